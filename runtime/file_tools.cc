#include "runtime/file_tools.h"

#include "runtime/host_path.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <queue>

namespace corral::files {
namespace {

constexpr std::size_t kNpos = std::string::npos;
constexpr std::string_view kSymlinkRefused =
    "is or goes through a symlink, which corral does not follow below a directory a sandbox may write";

// The client's path as shown in messages: quoted, control bytes (NUL included) escaped.
std::string quote(std::string_view path) {
  std::string out = "'";
  for (unsigned char c : path) {
    if (c < 0x20 || c == 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    } else {
      out += static_cast<char>(c);
    }
  }
  out += "'";
  return out;
}

Status fail(const char* step, int err, const std::string& shown, std::string_view why) {
  std::string msg = shown;
  msg.append(": ").append(why);
  return Status::error(step, err, std::move(msg));
}
// The policy's own refusals: --deny-read ("denied"), a read-only root or --protect ("readonly").
Status refuse(const char* step, int err, const std::string& shown, std::string_view why) {
  std::string msg = shown;
  msg.append(": ").append(why);
  return Status::refused(step, err, std::move(msg));
}
Status fail_errno(const char* step, int err, const std::string& shown, std::string_view what = {}) {
  std::string why(what);
  if (!why.empty()) why += ": ";
  why += std::strerror(err);
  return fail(step, err, shown, why);
}

// Components of a path, without empty and "." ones.
std::vector<std::string_view> split(std::string_view path) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < path.size()) {
    std::size_t j = path.find('/', i);
    if (j == kNpos) j = path.size();
    std::string_view c = path.substr(i, j - i);
    if (!c.empty() && c != ".") out.push_back(c);
    i = j + 1;
  }
  return out;
}

std::string join(const std::vector<std::string_view>& parts, std::size_t from) {
  std::string out;
  for (std::size_t i = from; i < parts.size(); ++i) {
    if (!out.empty()) out += '/';
    out.append(parts[i]);
  }
  return out.empty() ? std::string(".") : out;
}

const char* describe(mode_t mode) {
  switch (mode & S_IFMT) {
    case S_IFDIR: return "a directory";
    case S_IFIFO: return "a fifo";
    case S_IFSOCK: return "a socket";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    case S_IFLNK: return "a symlink";
    case S_IFREG: return "a regular file";
    default: return "of an unknown type";
  }
}

Status wrong_type(const std::string& shown, mode_t mode, const char* wanted) {
  return fail("type", S_ISDIR(mode) ? EISDIR : 0, shown, std::string("is ") + describe(mode) + ", not " + wanted);
}

long raw_openat2(int dirfd, const std::string& rel, std::uint64_t flags, std::uint64_t mode,
                 std::uint64_t resolve_flags) {
  open_how how{};
  how.flags = flags | O_CLOEXEC;
  how.mode = mode;
  how.resolve = resolve_flags;
  // EAGAIN: a rename or mount elsewhere raced a `..` step and the kernel could not prove it
  // stayed beneath (openat2(2)); retrying is the documented answer.
  long r;
  int again = 0;
  do {
    r = ::syscall(SYS_openat2, dirfd, rel.c_str(), &how, sizeof how);
  } while (r < 0 && (errno == EINTR || (errno == EAGAIN && ++again < 64)));
  return r;
}

// Opens `rel` beneath `dirfd` without following any symlink: every root is a directory some
// sandbox may write, so a link there may have been planted (runtime/host_path.h). The kernel
// refuses links, magic links and escapes. `shown` names the client's path.
StatusOr<UniqueFd> open_beneath(int dirfd, const std::string& rel, int flags,
                                const std::string& shown, std::string_view what = {}) {
  long r = raw_openat2(dirfd, rel, static_cast<std::uint64_t>(flags), 0,
                       RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
  if (r >= 0) return UniqueFd(static_cast<int>(r));
  int err = errno;
  switch (err) {
    case ELOOP: return fail("resolve", ELOOP, shown, kSymlinkRefused);
    case EXDEV: return fail("resolve", EXDEV, shown, "escapes the root");
    case ENOSYS:
      return fail("open", ENOSYS, shown, "openat2 is unavailable (needs Linux 5.6 or later)");
    default: return fail_errno("open", err, shown, what);
  }
}

struct Utf8Scan {
  std::size_t error_at = kNpos;  // start of the first malformed sequence
  bool incomplete = false;       // ... which is a valid prefix cut by the end of the data
};

// Well-formed UTF-8 per Unicode table 3-7: no overlongs, surrogates or values over U+10FFFF.
Utf8Scan scan_utf8(std::string_view s) {
  const std::size_t n = s.size();
  std::size_t i = 0;
  while (i < n) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t len;
    unsigned char lo = 0x80, hi = 0xBF;  // range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return {i, false};
    }
    for (std::size_t k = 1; k < len; ++k) {
      if (i + k >= n) return {i, true};
      auto d = static_cast<unsigned char>(s[i + k]);
      if (d < (k == 1 ? lo : 0x80) || d > (k == 1 ? hi : 0xBF)) return {i, false};
    }
    i += len;
  }
  return {};
}

bool beneath(const std::string& path, const std::string& root) {
  return path == root || path.rfind(root == "/" ? root : root + "/", 0) == 0;
}

// The policy's guards on what was actually opened: `fd` itself, or the entry `name` in the
// directory `fd`. The kernel's name for the handle is the path the command would meet.
Status check_guards(const Roots& roots, int fd, const std::string& name, bool for_write, const std::string& shown) {
  if (roots.denied.empty() && (!for_write || roots.read_only.empty())) return {};  // nothing to check
  char buf[PATH_MAX];
  const std::string link = "/proc/self/fd/" + std::to_string(fd);
  ssize_t n = ::readlink(link.c_str(), buf, sizeof buf);
  if (n <= 0 || static_cast<std::size_t>(n) == sizeof buf) return fail_errno("open", n < 0 ? errno : ENAMETOOLONG, shown, "readlink");
  std::string real(buf, static_cast<std::size_t>(n));
  if (!name.empty()) real += (real == "/" ? "" : "/") + name;
  bool exempt = false;
  for (const auto& e : roots.not_denied) exempt |= beneath(real, e);
  for (const auto& d : roots.denied)
    if (!exempt && beneath(real, d)) return refuse("denied", EACCES, shown, "is unreadable here (--deny-read)");
  if (for_write)
    for (const auto& p : roots.read_only)
      if (beneath(real, p)) return refuse("readonly", EROFS, shown, "read-only (--protect " + p + ")");
  return {};
}

Status check_regular(int fd, const std::string& shown) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return fail_errno("open", errno, shown, "fstat");
  if (!S_ISREG(st.st_mode)) return wrong_type(shown, st.st_mode, "a regular file");
  return {};
}

StatusOr<ReadResult> read_window(const Roots& roots, const std::string& path, std::uint64_t offset,
                                 std::uint64_t max_bytes) {
  const std::string shown = quote(path);
  if (max_bytes == 0) return fail("size", 0, shown, "a read window of 0 bytes is not allowed");
  if (max_bytes > kMaxReadBytes)
    return fail("size", 0, shown,
                "a read window of " + std::to_string(max_bytes) + " bytes is over the " +
                    std::to_string(kMaxReadBytes) + "-byte limit");
  auto r = resolve(roots, path, false);
  if (!r.ok()) return r.status();

  // Look before opening for reading: a fifo or device is never opened (O_PATH opens nothing).
  auto probe = open_beneath(r->root_fd.get(), r->rel, O_PATH, shown);
  if (!probe.ok()) return probe.status();
  if (Status s = check_regular(probe->get(), shown); !s.ok()) return s;
  // The entry may be swapped between the two opens: O_NONBLOCK keeps a fifo from blocking and
  // the handle actually read is checked again.
  auto fd = open_beneath(r->root_fd.get(), r->rel, O_RDONLY | O_NONBLOCK | O_NOCTTY, shown);
  if (!fd.ok()) return fd.status();
  struct stat st;
  if (::fstat(fd->get(), &st) != 0) return fail_errno("read", errno, shown, "fstat");
  if (!S_ISREG(st.st_mode)) return wrong_type(shown, st.st_mode, "a regular file");
  if (Status s = check_guards(roots, fd->get(), {}, false, shown); !s.ok()) return s;

  ReadResult out;
  out.offset = offset;
  out.file_size = static_cast<std::uint64_t>(st.st_size);
  if (offset >= out.file_size) return out;
  const std::uint64_t want = std::min(max_bytes, out.file_size - offset);
  out.data.resize(want);
  std::uint64_t got = 0;
  while (got < want) {
    ssize_t n =
        ::pread(fd->get(), out.data.data() + got, want - got, static_cast<off_t>(offset + got));
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail_errno("read", errno, shown);
    }
    if (n == 0) break;  // the file shrank since fstat
    got += static_cast<std::uint64_t>(n);
  }
  out.data.resize(got);
  out.truncated = got == want && offset + got < out.file_size;
  return out;
}

// Random suffix for temp names; getrandom(2) never blocks for 8 bytes once the pool is ready.
std::string random_hex() {
  unsigned char buf[8];
  if (::getrandom(buf, sizeof buf, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof buf)) {
    auto t =
        static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    t ^= static_cast<std::uint64_t>(::getpid()) << 32;
    std::memcpy(buf, &t, sizeof buf);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : buf) {
    out += kHex[c >> 4];
    out += kHex[c & 0xf];
  }
  return out;
}

// Removes the temp file unless the rename went through.
class TempName {
 public:
  TempName(int dirfd, std::string name) : dirfd_(dirfd), name_(std::move(name)) {}
  TempName(const TempName&) = delete;
  TempName& operator=(const TempName&) = delete;
  ~TempName() {
    if (!committed_) ::unlinkat(dirfd_, name_.c_str(), 0);
  }
  const std::string& name() const { return name_; }
  void commit() { committed_ = true; }

 private:
  int dirfd_;
  std::string name_;
  bool committed_ = false;
};

}  // namespace

bool valid_utf8(std::string_view data) { return scan_utf8(data).error_at == kNpos; }

StatusOr<Resolved> resolve(const Roots& roots, const std::string& path, bool for_write) {
  if (roots.roots.empty()) return Status::invalid("file tools: no allowed roots");
  if (roots.writable.size() != roots.roots.size())
    return Status::invalid("file tools: roots and writable flags differ in length");
  for (const auto& root : roots.roots) {
    if (root.empty() || root[0] != '/' || root.find('\0') != kNpos)
      return Status::invalid("file tools: root " + quote(root) + " is not an absolute path");
    for (auto c : split(root))
      if (c == "..") return Status::invalid("file tools: root " + quote(root) + " has '..'");
  }

  const std::string shown = quote(path);
  if (path.empty()) return fail("path", 0, shown, "empty path");
  if (path.find('\0') != kNpos) return fail("path", 0, shown, "contains a NUL byte");
  const auto parts = split(path);
  for (auto c : parts)
    if (c == "..") return fail("path", EXDEV, shown, "'..' is not allowed");

  // A relative path is taken as roots[0]/path. The longest root containing the path wins, so a
  // read-only root nested in a writable one stays read-only whichever way it is named.
  std::vector<std::string_view> full;
  if (path[0] != '/') full = split(roots.roots[0]);
  full.insert(full.end(), parts.begin(), parts.end());
  std::size_t index = kNpos, skip = 0;
  for (std::size_t i = 0; i < roots.roots.size(); ++i) {
    const auto rc = split(roots.roots[i]);
    if (rc.size() > full.size() || !std::equal(rc.begin(), rc.end(), full.begin())) continue;
    if (index == kNpos || rc.size() > skip) index = i, skip = rc.size();
  }
  if (index == kNpos) return fail("path", EXDEV, shown, "not beneath any allowed root");
  const std::string& root = roots.roots[index];
  if (for_write && !roots.writable[index])
    return refuse("readonly", EROFS, shown, "read-only (root '" + root + "' is not writable)");

  if (!roots.fds.empty() && roots.fds.size() != roots.roots.size())
    return Status::invalid("file tools: roots and descriptors differ in length");
  int fd = roots.fds.empty() ? ::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC)
                             : ::fcntl(roots.fds[index], F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return fail_errno("open", errno, "root '" + root + "'");
  Resolved out;
  out.root_fd.reset(fd);
  out.rel = join(full, skip);
  out.root_index = index;
  if (root == "/" && out.rel != "." && out.rel.find('/') != kNpos) {
    // Anywhere on the host (danger-full-access): the directory part is walked like any host
    // path, so links in system directories (/bin -> usr/bin) are followed and no others.
    const std::size_t slash = out.rel.rfind('/');
    auto dir = resolve_host_path("/" + out.rel.substr(0, slash), "path");
    if (!dir.ok()) {
      if (dir.status().err() == ELOOP) return fail("resolve", ELOOP, shown, kSymlinkRefused);
      return fail_errno("open", dir.status().err(), shown);
    }
    int dfd = ::fcntl(dir->get(), F_DUPFD_CLOEXEC, 0);
    if (dfd < 0) return fail_errno("open", errno, shown);
    out.root_fd.reset(dfd);
    out.rel = out.rel.substr(slash + 1);
  }
  return out;
}

StatusOr<ReadResult> read_bytes(const Roots& roots, const std::string& path, std::uint64_t offset,
                                std::uint64_t max_bytes) {
  return read_window(roots, path, offset, max_bytes);
}

StatusOr<ReadResult> read_text(const Roots& roots, const std::string& path, std::uint64_t offset,
                               std::uint64_t max_bytes) {
  auto r = read_window(roots, path, offset, max_bytes);
  if (!r.ok()) return r;
  const Utf8Scan scan = scan_utf8(r->data);
  if (scan.error_at == kNpos) return r;
  if (scan.incomplete && r->truncated) {
    // The window cut a character: hand back whole characters; the next window starts at it.
    r->data.resize(scan.error_at);
    return r;
  }
  return fail("utf8", 0, quote(path),
              "invalid UTF-8 at byte offset " + std::to_string(offset + scan.error_at) +
                  "; read it with --binary");
}

Status write_file(const Roots& roots, const std::string& path, std::string_view data, bool binary,
                  std::uint64_t max_bytes) {
  const std::string shown = quote(path);
  if (max_bytes == 0) return fail("size", 0, shown, "a write limit of 0 bytes is not allowed");
  if (max_bytes > kMaxWrite)
    return fail("size", 0, shown,
                "a write limit of " + std::to_string(max_bytes) + " bytes is over the " +
                    std::to_string(kMaxWrite) + "-byte limit");
  if (data.size() > max_bytes)
    return fail("size", 0, shown,
                std::to_string(data.size()) + " bytes is over the " + std::to_string(max_bytes) +
                    "-byte limit");
  if (!binary) {
    const Utf8Scan scan = scan_utf8(data);
    if (scan.error_at != kNpos)
      return fail("utf8", 0, shown,
                  "data is not valid UTF-8 (byte offset " + std::to_string(scan.error_at) +
                      "); write it with --binary");
  }
  auto r = resolve(roots, path, true);
  if (!r.ok()) return r.status();
  if (path.back() == '/') return fail("type", EISDIR, shown, "names a directory, not a file");

  // The directory and the name to replace. A final symlink is refused like any other: the
  // write would land wherever a sandbox pointed it.
  const std::string& cur = r->rel;
  const std::size_t slash = cur.rfind('/');
  const std::string dir_rel = slash == kNpos ? std::string(".") : cur.substr(0, slash);
  const std::string name = slash == kNpos ? cur : cur.substr(slash + 1);
  if (name.empty() || name == "." || name == "..") return fail("type", EISDIR, shown, "names a directory, not a file");
  auto d = open_beneath(r->root_fd.get(), dir_rel, O_RDONLY | O_DIRECTORY, shown, "parent directory");
  if (!d.ok()) return d.status();
  UniqueFd dir = std::move(*d);
  mode_t mode = 0644;
  struct stat st;
  if (::fstatat(dir.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
    if (S_ISLNK(st.st_mode)) return fail("resolve", ELOOP, shown, kSymlinkRefused);
    if (!S_ISREG(st.st_mode)) return wrong_type(shown, st.st_mode, "a regular file");
    mode = st.st_mode & 07777;
  } else if (errno != ENOENT) {
    return fail_errno("open", errno, shown);
  }
  if (Status s = check_guards(roots, dir.get(), name, true, shown); !s.ok()) return s;

  UniqueFd tmp_fd;
  std::unique_ptr<TempName> tmp;
  for (int attempt = 0; !tmp_fd; ++attempt) {
    std::string tmp_name = ".corral-write-" + random_hex();
    int fd = ::openat(dir.get(), tmp_name.c_str(),
                      O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0) {
      tmp_fd.reset(fd);
      tmp = std::make_unique<TempName>(dir.get(), std::move(tmp_name));
    } else if (errno != EEXIST || attempt >= 16) {
      return fail_errno("open", errno, shown, "creating a temp file");
    }
  }
  std::size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(tmp_fd.get(), data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail_errno("write", errno, shown);
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fchmod(tmp_fd.get(), mode) != 0) return fail_errno("write", errno, shown, "fchmod");
  if (::fsync(tmp_fd.get()) != 0) return fail_errno("write", errno, shown, "fsync");
  if (::renameat(dir.get(), tmp->name().c_str(), dir.get(), name.c_str()) != 0)
    return fail_errno("rename", errno, shown);
  tmp->commit();
  if (::fsync(dir.get()) != 0)
    return fail_errno("write", errno, shown, "fsync of the directory after rename");
  return {};
}

StatusOr<Listing> list_dir(const Roots& roots, const std::string& path, std::size_t max_entries) {
  const std::string shown = quote(path);
  if (max_entries == 0) return fail("size", 0, shown, "a listing of 0 entries is not allowed");
  if (max_entries > kMaxListEntries)
    return fail("size", 0, shown,
                "a listing of " + std::to_string(max_entries) + " entries is over the " +
                    std::to_string(kMaxListEntries) + "-entry limit");
  auto r = resolve(roots, path, false);
  if (!r.ok()) return r.status();
  auto probe = open_beneath(r->root_fd.get(), r->rel, O_PATH, shown);
  if (!probe.ok()) return probe.status();
  struct stat st;
  if (::fstat(probe->get(), &st) != 0) return fail_errno("open", errno, shown, "fstat");
  if (!S_ISDIR(st.st_mode)) return wrong_type(shown, st.st_mode, "a directory");
  if (Status s = check_guards(roots, probe->get(), {}, false, shown); !s.ok()) return s;
  // Reopening "." through the O_PATH fd reads exactly the directory checked above.
  int dfd = ::openat(probe->get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return fail_errno("open", errno, shown);
  UniqueFd dir_fd(dfd);
  std::unique_ptr<DIR, int (*)(DIR*)> dir(::fdopendir(dir_fd.get()), &::closedir);
  if (!dir) return fail_errno("open", errno, shown, "fdopendir");
  dir_fd.release();  // owned by `dir` now

  // Keep only the max_entries smallest names: memory stays bounded on a huge directory.
  std::priority_queue<std::string> kept;  // largest on top
  std::size_t total = 0;
  for (;;) {
    errno = 0;
    dirent* e = ::readdir(dir.get());
    if (!e) {
      if (errno != 0) return fail_errno("read", errno, shown, "readdir");
      break;
    }
    std::string_view n = e->d_name;
    if (n == "." || n == "..") continue;
    ++total;
    if (kept.size() < max_entries) {
      kept.emplace(n);
    } else if (n < kept.top()) {
      kept.pop();
      kept.emplace(n);
    }
  }

  Listing out;
  out.truncated = total > max_entries;
  std::vector<std::string> names;
  names.reserve(kept.size());
  while (!kept.empty()) {
    names.push_back(kept.top());
    kept.pop();
  }
  std::reverse(names.begin(), names.end());
  for (auto& n : names) {
    struct stat est;
    if (::fstatat(::dirfd(dir.get()), n.c_str(), &est, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) continue;
      return fail_errno("read", errno, shown, "stat of '" + n + "'");
    }
    Entry e;
    e.name = std::move(n);
    e.type = S_ISREG(est.st_mode)   ? "file"
             : S_ISDIR(est.st_mode) ? "dir"
             : S_ISLNK(est.st_mode) ? "symlink"
                                    : "other";
    e.size = static_cast<std::uint64_t>(est.st_size);
    e.mtime_ms =
        static_cast<std::int64_t>(est.st_mtim.tv_sec) * 1000 + est.st_mtim.tv_nsec / 1000000;
    // A --deny-read entry is listed as a command sees it, masked: no size, no time.
    if (!check_guards(roots, ::dirfd(dir.get()), e.name, false, shown).ok()) {
      e.size = 0;
      e.mtime_ms = 0;
    }
    out.entries.push_back(std::move(e));
  }
  return out;
}

}  // namespace corral::files
