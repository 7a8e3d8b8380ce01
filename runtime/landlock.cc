#include "runtime/landlock.h"

#include "runtime/probe.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <string>

namespace corral {

namespace {

// The installed <linux/landlock.h> stops at ABI 2, so everything is defined here from the
// kernel's uapi header (include/uapi/linux/landlock.h, Linux 6.15). Landlock's syscall numbers
// are the same on every architecture (allocated after the 5.1 unification).
constexpr long kSysCreateRuleset = 444;
constexpr long kSysAddRule = 445;
constexpr long kSysRestrictSelf = 446;

constexpr std::uint32_t kCreateRulesetVersion = 1U << 0;
constexpr int kRulePathBeneath = 1;

struct RulesetAttr {
  std::uint64_t handled_access_fs;
  std::uint64_t handled_access_net;  // ABI 4
  std::uint64_t scoped;              // ABI 6
};

struct __attribute__((packed)) PathBeneathAttr {
  std::uint64_t allowed_access;
  std::int32_t parent_fd;
};

// File-system rights.
constexpr std::uint64_t kFsExecute = 1ULL << 0;
constexpr std::uint64_t kFsWriteFile = 1ULL << 1;
constexpr std::uint64_t kFsReadFile = 1ULL << 2;
constexpr std::uint64_t kFsReadDir = 1ULL << 3;
constexpr std::uint64_t kFsRefer = 1ULL << 13;     // ABI 2
constexpr std::uint64_t kFsTruncate = 1ULL << 14;  // ABI 3
constexpr std::uint64_t kFsIoctlDev = 1ULL << 15;  // ABI 5
// ABI 1: EXECUTE .. MAKE_SYM (bits 0-12: write/read file, read dir, remove dir/file, make
// char/dir/reg/sock/fifo/block/sym).
constexpr std::uint64_t kFsAbi1 = (1ULL << 13) - 1;
// Rights a rule on a non-directory may carry; others make landlock_add_rule fail with EINVAL.
constexpr std::uint64_t kFsFileRights = kFsExecute | kFsWriteFile | kFsReadFile | kFsTruncate | kFsIoctlDev;

// Network rights (ABI 4), TCP only: UDP and other protocols are not handled by Landlock.
constexpr std::uint64_t kNetBindTcp = 1ULL << 0;
constexpr std::uint64_t kNetConnectTcp = 1ULL << 1;

// Scopes (ABI 6).
constexpr std::uint64_t kScopeAbstractUnixSocket = 1ULL << 0;
constexpr std::uint64_t kScopeSignal = 1ULL << 1;

std::uint64_t fs_rights_for_abi(int abi) {
  std::uint64_t rights = kFsAbi1;
  if (abi >= 2) rights |= kFsRefer;
  if (abi >= 3) rights |= kFsTruncate;
  if (abi >= 5) rights |= kFsIoctlDev;
  return rights;
}

// Adds a path-beneath rule for the object `fd` refers to; `path` only names it in messages.
Status add_fd_rule(int ruleset, int fd, const std::string& path, std::uint64_t rights, std::uint64_t handled) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return Status::from_errno("landlock", errno, "fstat " + path);
  if (!S_ISDIR(st.st_mode)) rights &= kFsFileRights;
  rights &= handled;
  if (rights == 0) return Status();
  PathBeneathAttr attr{rights, fd};
  if (::syscall(kSysAddRule, ruleset, kRulePathBeneath, &attr, 0) != 0)
    return Status::from_errno("landlock", errno, "add rule for " + path);
  return Status();
}

// Adds a path-beneath rule for `path` granting `rights` (masked to what the ruleset handles).
Status add_path_rule(int ruleset, const std::string& path, std::uint64_t rights, std::uint64_t handled) {
  UniqueFd fd(::open(path.c_str(), O_PATH | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT || errno == ENOTDIR) return Status();  // does not exist: skipped
    return Status::from_errno("landlock", errno, "open " + path);
  }
  return add_fd_rule(ruleset, fd.get(), path, rights, handled);
}

}  // namespace

int landlock_abi() {
  long v = ::syscall(kSysCreateRuleset, nullptr, 0, kCreateRulesetVersion);
  return v < 0 ? 0 : static_cast<int>(v);
}

StatusOr<UniqueFd> build_landlock_ruleset(const LandlockPolicy& policy) {
  long v = ::syscall(kSysCreateRuleset, nullptr, 0, kCreateRulesetVersion);
  if (v < 0) {
    int err = errno;
    return Status::from_errno("landlock", err,
                              err == EOPNOTSUPP ? "(built in but disabled at boot: lsm= lacks landlock)"
                                                : "(not supported by this kernel)");
  }
  const int abi = static_cast<int>(v);
  const std::uint64_t handled_fs = policy.handle_fs ? fs_rights_for_abi(abi) : 0;
  RulesetAttr attr{handled_fs, 0, 0};
  if (abi >= 4 && policy.deny_tcp) attr.handled_access_net = kNetBindTcp | kNetConnectTcp;
  if (abi >= 6) {
    if (policy.scope_signals) attr.scoped |= kScopeSignal;
    if (policy.scope_abstract_unix) attr.scoped |= kScopeAbstractUnixSocket;
  }
  // Older kernels take the struct prefix they know.
  const std::size_t size = abi >= 6 ? sizeof(RulesetAttr)
                         : abi >= 4 ? offsetof(RulesetAttr, scoped)
                                    : offsetof(RulesetAttr, handled_access_net);
  // The kernel opens the ruleset fd close-on-exec.
  UniqueFd ruleset(static_cast<int>(::syscall(kSysCreateRuleset, &attr, size, 0)));
  if (!ruleset) return Status::from_errno("landlock", errno, "create ruleset");

  if (!policy.handle_fs) return ruleset;
  constexpr std::uint64_t kReadRights = kFsExecute | kFsReadFile | kFsReadDir;
  constexpr std::uint64_t kWriteFileRights = kFsReadFile | kFsWriteFile | kFsTruncate | kFsIoctlDev;
  for (const auto& path : policy.read_roots) {
    if (Status s = add_path_rule(ruleset.get(), path, kReadRights, handled_fs); !s.ok()) return s;
  }
  for (const auto& path : policy.write_roots) {
    if (Status s = add_path_rule(ruleset.get(), path, handled_fs, handled_fs); !s.ok()) return s;
  }
  for (int fd : policy.write_root_fds) {
    if (Status s = add_fd_rule(ruleset.get(), fd, "a writable root", handled_fs, handled_fs); !s.ok()) return s;
  }
  for (const auto& path : policy.write_files) {
    if (Status s = add_path_rule(ruleset.get(), path, kWriteFileRights, handled_fs); !s.ok()) return s;
  }
  return ruleset;
}

int landlock_restrict(int ruleset_fd) noexcept {
  if (::syscall(kSysRestrictSelf, ruleset_fd, 0) != 0) return errno;
  return 0;
}

namespace {

}  // namespace

Status probe_landlock() {
  LandlockPolicy policy;
  policy.read_roots = {"/"};
  auto ruleset = build_landlock_ruleset(policy);
  if (!ruleset.ok()) return ruleset.status();
  const int rfd = ruleset->get();

  // The child only makes syscalls (safe after fork in a multithreaded parent).
  auto report = probe_in_child(
      [](const void* arg) -> ProbeReport {
        const int fd = *static_cast<const int*>(arg);
        if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return {1, errno};
        if (int err = landlock_restrict(fd); err != 0) return {2, err};
        if (::open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC) < 0) return {3, errno};
        if (int w = ::open("/dev/null", O_WRONLY | O_CLOEXEC); w >= 0 || errno != EACCES) return {4, w >= 0 ? 0 : errno};
        return {0, 0};
      },
      &rfd);
  if (!report.ok()) return report.status();
  const ProbeReport r = *report;
  switch (r.step) {
    case 0: return Status();
    case 1: return Status::from_errno("no_new_privs", r.err);
    case 2: return Status::from_errno("restrict", r.err, "landlock_restrict_self");
    case 3: return Status::from_errno("verify", r.err, "reading / under a read root");
    default: return Status::error("verify", r.err, "opening /dev/null for writing was not refused with EACCES");
  }
}

}  // namespace corral
