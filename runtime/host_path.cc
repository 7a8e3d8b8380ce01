#include "runtime/host_path.h"

#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <deque>
#include <thread>

namespace corral {
namespace {

constexpr int kMaxLinks = 40;  // as the kernel's own limit

std::vector<std::string> split(const std::string& path) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < path.size()) {
    std::size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    if (j > i) out.push_back(path.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

std::string quoted(const std::string& what, const std::string& path) { return what + " '" + path + "'"; }

long raw_openat2(int dirfd, const char* rel, std::uint64_t flags, std::uint64_t resolve) {
  open_how how{};
  how.flags = flags | O_CLOEXEC;
  how.resolve = resolve;
  long r;
  do {
    r = ::syscall(SYS_openat2, dirfd, rel, &how, sizeof how);
  } while (r < 0 && errno == EINTR);
  return r;
}

// A directory in which links are followed: a system directory no sandbox can write.
bool trusted(const struct stat& st, const std::string& path) {
  return S_ISDIR(st.st_mode) && st.st_uid == 0 && (st.st_mode & 022) == 0 && system_directory(path);
}

Status link_refused(const std::string& what, const std::string& path, const std::string& at) {
  return Status::error("symlink", ELOOP,
                       quoted(what, path) + ": '" + at +
                           "' is a symlink below a directory a sandbox may write; corral does not follow it "
                           "(name the real path)");
}

}  // namespace

bool system_directory(const std::string& p) {
  auto under = [&](const char* root) {
    const std::string r = root;
    return p == r || p.rfind(r + "/", 0) == 0;
  };
  return p == "/" || under("/usr") || under("/etc");
}

StatusOr<UniqueFd> open_below(int dir, const std::string& rel, int extra_flags) {
  long r = raw_openat2(dir, rel.c_str(), static_cast<std::uint64_t>(O_PATH | extra_flags),
                       RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_BENEATH);
  if (r < 0) return Status::from_errno("resolve", errno, "'" + rel + "'");
  return UniqueFd(static_cast<int>(r));
}

StatusOr<HostPath> resolve_host_path(const std::string& path, const std::string& what) {
  if (path.empty() || path[0] != '/') return Status::error("path", 0, what + " must be an absolute path, got '" + path + "'");
  if (path.find('\0') != std::string::npos) return Status::error("path", 0, what + " contains a NUL byte");
  std::deque<std::string> rest;
  for (auto& c : split(path)) {
    if (c == "..") return Status::error("path", 0, quoted(what, path) + " contains '..'");
    if (c != ".") rest.push_back(std::move(c));
  }

  auto open_root = [&]() -> StatusOr<UniqueFd> {
    UniqueFd fd(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!fd) return Status::from_errno("resolve", errno, "'/'");
    return fd;
  };
  auto root = open_root();
  if (!root.ok()) return root.status();
  UniqueFd cur = std::move(*root);
  std::string cur_path = "/";
  struct stat st {};
  if (::fstat(cur.get(), &st) < 0) return Status::from_errno("resolve", errno, "'/'");
  int links = 0;

  while (!rest.empty()) {
    if (!trusted(st, cur_path)) {
      // Below a directory a sandbox may write: the kernel opens the rest, following nothing.
      std::string rel;
      for (const auto& c : rest) rel += (rel.empty() ? "" : "/") + c;
      long r = raw_openat2(cur.get(), rel.c_str(), O_PATH, RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_BENEATH);
      if (r < 0) {
        int err = errno;
        if (err == ELOOP) {
          // Name the link: find the first component that is one.
          std::string at = cur_path;
          for (const auto& c : rest) {
            at += (at == "/" ? "" : "/") + c;
            struct stat lst {};
            if (::lstat(at.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode)) break;
          }
          return link_refused(what, path, at);
        }
        return Status::from_errno("resolve", err, quoted(what, path));
      }
      cur.reset(static_cast<int>(r));
      for (const auto& c : rest) cur_path += (cur_path == "/" ? "" : "/") + c;
      rest.clear();
      if (::fstat(cur.get(), &st) < 0) return Status::from_errno("resolve", errno, quoted(what, path));
      break;
    }
    const std::string name = std::move(rest.front());
    rest.pop_front();
    UniqueFd next(::openat(cur.get(), name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    if (!next) return Status::from_errno("resolve", errno, quoted(what, path));
    struct stat nst {};
    if (::fstat(next.get(), &nst) < 0) return Status::from_errno("resolve", errno, quoted(what, path));
    if (S_ISLNK(nst.st_mode)) {
      // In a system directory: follow it, lexically (every directory walked so far is trusted
      // and canonical, so ".." in the target means the parent of cur_path).
      if (++links > kMaxLinks) return Status::from_errno("resolve", ELOOP, quoted(what, path));
      char buf[PATH_MAX];
      ssize_t n = ::readlinkat(next.get(), "", buf, sizeof buf);
      if (n <= 0 || static_cast<std::size_t>(n) >= sizeof buf)
        return Status::from_errno("resolve", n < 0 ? errno : ENAMETOOLONG, quoted(what, path));
      const std::string target(buf, static_cast<std::size_t>(n));
      std::vector<std::string> base = target[0] == '/' ? std::vector<std::string>{} : split(cur_path);
      for (auto& c : split(target)) {
        if (c == ".") continue;
        if (c == "..") {
          if (!base.empty()) base.pop_back();
          continue;
        }
        base.push_back(std::move(c));
      }
      for (auto it = base.rbegin(); it != base.rend(); ++it) rest.push_front(*it);
      auto again = open_root();
      if (!again.ok()) return again.status();
      cur = std::move(*again);
      cur_path.assign(1, '/');  // not = "/": GCC 12 -O3 warns -Wrestrict falsely on that
      if (::fstat(cur.get(), &st) < 0) return Status::from_errno("resolve", errno, "'/'");
      continue;
    }
    cur = std::move(next);
    cur_path += (cur_path == "/" ? "" : "/") + name;
    st = nst;
    if (!rest.empty() && !S_ISDIR(st.st_mode)) return Status::from_errno("resolve", ENOTDIR, quoted(what, path));
  }
  HostPath out;
  out.path = cur_path;
  out.fd = std::make_shared<UniqueFd>(std::move(cur));
  out.st = st;
  return out;
}

Status writable_root_allowed(const HostPath& p, const std::string& what) {
  if (system_directory(p.path))
    return Status::error("path", EPERM,
                         quoted(what, p.path) +
                             " is a system directory ('/', /usr, /etc and below) and cannot be writable in a sandbox");
  return {};
}

Status check_access(const HostPath& p, int mode, const std::string& what) {
  if (::syscall(SYS_faccessat2, p.get(), "", mode, AT_EACCESS | AT_EMPTY_PATH) == 0) return {};
  const int err = errno;
  std::string want = (mode & W_OK) ? "write" : "read";
  return Status::error("access", err, quoted(what, p.path) + ": the requesting uid may not " + want + " it (" + std::strerror(err) + ")");
}

Status with_credentials(const Credentials* creds, const std::function<Status()>& fn) {
  if (!creds || ::geteuid() != 0 || (creds->uid == 0 && creds->gid == 0)) return fn();
  Status out;
  std::thread t([&] {
    // Raw syscalls: each changes only this thread's credentials (the thread ends right after).
    const std::vector<gid_t>& g = creds->groups;
    if (::syscall(SYS_setgroups, g.size(), g.empty() ? nullptr : g.data()) < 0) {
      out = Status::from_errno("credentials", errno, "setgroups");
      return;
    }
    // setfsgid/setfsuid return the previous value; success shows in a second call.
    ::syscall(SYS_setfsgid, creds->gid);
    ::syscall(SYS_setfsuid, creds->uid);
    if (static_cast<gid_t>(::syscall(SYS_setfsgid, -1)) != creds->gid ||
        static_cast<uid_t>(::syscall(SYS_setfsuid, -1)) != creds->uid) {
      out = Status::error("credentials", EPERM, "could not take the peer's filesystem credentials");
      return;
    }
    out = fn();
  });
  t.join();
  return out;
}

}  // namespace corral
