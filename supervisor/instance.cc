#include "supervisor/instance.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

namespace corral::supervisor {

namespace {

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

std::string base_name(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// A directory of ours that nobody else may write, or an error saying why not.
Status check_own_dir(const std::string& dir) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) < 0) return Status::from_errno("registry", errno, dir);
  if (!S_ISDIR(st.st_mode)) return Status::error("registry", ENOTDIR, dir + " is not a directory");
  if (st.st_uid != ::geteuid()) return Status::error("registry", EPERM, dir + " is not owned by this supervisor's uid");
  if (st.st_mode & 022) return Status::error("registry", EPERM, dir + " is writable by others");
  return {};
}

// Removes `name` in `dirfd` and everything beneath it by descriptor: a symlink planted
// anywhere inside is removed, never followed, whatever is renamed meanwhile.
void remove_at(int dirfd, const char* name, int depth = 0) {
  if (::unlinkat(dirfd, name, 0) == 0 || errno == ENOENT) return;
  if (errno != EISDIR && errno != EPERM) return;
  if (depth > 256) return;
  int fd = ::openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return;
  DIR* d = ::fdopendir(fd);
  if (!d) {
    ::close(fd);
    return;
  }
  std::vector<std::string> entries;
  while (dirent* e = ::readdir(d))
    if (std::string n = e->d_name; n != "." && n != "..") entries.push_back(std::move(n));
  for (const auto& e : entries) remove_at(::dirfd(d), e.c_str(), depth + 1);
  ::closedir(d);
  ::unlinkat(dirfd, name, AT_REMOVEDIR);
}

// Mount points at or beneath `dir`, deepest first (from /proc/self/mountinfo).
std::vector<std::string> mounts_under(const std::string& dir) {
  std::vector<std::string> found;
  std::ifstream in("/proc/self/mountinfo");
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string id, parent, devno, root, point;
    fields >> id >> parent >> devno >> root >> point;
    // Octal escapes (\040 for a space) never occur in the paths we create.
    if (point == dir || starts_with(point, dir + "/")) found.push_back(point);
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.size() > b.size(); });
  return found;
}

std::string remove_temp(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) < 0) return errno == ENOENT ? "" : "temp dir " + path + ": " + std::strerror(errno);
  if (!S_ISDIR(st.st_mode) || st.st_uid != ::geteuid() || !starts_with(base_name(path), "corral-"))
    return "temp dir " + path + ": not a corral temp dir of this uid; left alone";
  for (const auto& m : mounts_under(path)) ::umount2(m.c_str(), MNT_DETACH);
  const std::string parent = path.substr(0, path.rfind('/'));
  int pfd = ::open(parent.empty() ? "/" : parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (pfd < 0) return "temp dir " + path + ": " + std::strerror(errno);
  remove_at(pfd, base_name(path).c_str());
  ::close(pfd);
  return ::access(path.c_str(), F_OK) == 0 ? "temp dir " + path + ": could not be removed" : "removed temp dir " + path;
}

// Kills whatever is left in a cgroup directory and its children, then removes them.
bool remove_cgroup_dir(const std::string& dir, int depth = 0) {
  if (depth > 32) return false;
  if (DIR* d = ::opendir(dir.c_str())) {
    std::vector<std::string> children;
    while (dirent* e = ::readdir(d))
      if (e->d_type == DT_DIR && e->d_name[0] != '.') children.push_back(dir + "/" + e->d_name);
    ::closedir(d);
    for (const auto& c : children) remove_cgroup_dir(c, depth + 1);
  }
  for (int round = 0; round < 100; ++round) {
    if (::rmdir(dir.c_str()) == 0 || errno == ENOENT) return true;
    if (errno != EBUSY) return false;
    if (std::ofstream kill(dir + "/cgroup.kill"); kill) kill << "1";  // v2, 5.14+
    std::ifstream procs(dir + "/cgroup.procs");
    for (pid_t pid; procs >> pid;) ::kill(pid, SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

std::string remove_cgroup(const std::string& path) {
  if (!starts_with(path, "/sys/fs/cgroup/") || !starts_with(base_name(path), "corral-") ||
      path.find("/../") != std::string::npos)
    return "cgroup " + path + ": not a corral cgroup; left alone";
  struct stat st {};
  if (::lstat(path.c_str(), &st) < 0) return errno == ENOENT ? "" : "cgroup " + path + ": " + std::strerror(errno);
  return remove_cgroup_dir(path) ? "removed cgroup " + path : "cgroup " + path + ": could not be removed";
}

}  // namespace

std::string instance_registry_dir() {
  std::string base;
  if (::geteuid() == 0) {
    base = "/run/corral";
  } else if (const char* x = std::getenv("XDG_RUNTIME_DIR"); x && *x == '/') {
    base = std::string(x) + "/corral";
  } else {
    base = "/tmp/corral-" + std::to_string(::geteuid());
  }
  return base + "/instances";
}

StatusOr<InstanceRecord> InstanceRecord::create(const std::string& dir, const std::string& name) {
  const std::string parent = dir.substr(0, dir.rfind('/'));
  for (const std::string& d : {parent, dir}) {
    if (::mkdir(d.c_str(), 0700) < 0 && errno != EEXIST) return Status::from_errno("registry", errno, d);
    if (Status st = check_own_dir(d); !st.ok()) return st;
  }
  InstanceRecord r;
  r.path_ = dir + "/" + name;
  // Locked under a dot name (which cleaners skip) before it takes its own: a cleaner never
  // sees the record unlocked.
  const std::string hidden = dir + "/." + name;
  r.fd_.reset(::open(hidden.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!r.fd_) return Status::from_errno("registry", errno, hidden);
  if (::flock(r.fd_.get(), LOCK_EX | LOCK_NB) < 0 || ::rename(hidden.c_str(), r.path_.c_str()) < 0) {
    const int err = errno;
    ::unlink(hidden.c_str());
    r.fd_.reset();
    return Status::from_errno("registry", err, r.path_);
  }
  return r;
}

InstanceRecord::~InstanceRecord() {
  if (fd_) ::unlink(path_.c_str());
}

Status InstanceRecord::add(const std::string& kind, const std::string& path) {
  if (!fd_) return Status::error("registry", EBADF, "no instance record");
  const std::string line = kind + " " + path + "\n";
  if (::write(fd_.get(), line.data(), line.size()) != static_cast<ssize_t>(line.size()))
    return Status::from_errno("registry", errno, path_);
  return {};
}

std::vector<std::string> clean_dead_instances(const std::string& dir) {
  std::vector<std::string> done;
  if (!check_own_dir(dir).ok()) return done;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return done;
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d))
    if (e->d_name[0] != '.') names.emplace_back(e->d_name);
  ::closedir(d);
  for (const auto& name : names) {
    const std::string path = dir + "/" + name;
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd) continue;
    struct stat st {};
    if (::fstat(fd.get(), &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid()) continue;
    if (::flock(fd.get(), LOCK_EX | LOCK_NB) < 0) continue;  // its supervisor is alive
    std::string text;
    char buf[4096];
    for (ssize_t n; (n = ::read(fd.get(), buf, sizeof buf)) > 0;) text.append(buf, static_cast<std::size_t>(n));
    std::istringstream lines(text);
    std::vector<std::string> temps, cgroups;
    for (std::string line; std::getline(lines, line);) {
      auto space = line.find(' ');
      if (space == std::string::npos) continue;
      const std::string kind = line.substr(0, space), what = line.substr(space + 1);
      if (kind == "temp") temps.push_back(what);
      if (kind == "cgroup") cgroups.push_back(what);
    }
    // Deepest groups first: a command's group before its supervisor's parent group.
    std::sort(cgroups.begin(), cgroups.end(), [](const auto& a, const auto& b) { return a.size() > b.size(); });
    for (const auto& c : cgroups)
      if (auto line = remove_cgroup(c); !line.empty()) done.push_back(line);
    for (const auto& t : temps)
      if (auto line = remove_temp(t); !line.empty()) done.push_back(line);
    ::unlink(path.c_str());
    done.push_back("removed the record " + path + " of a supervisor that is gone");
  }
  return done;
}

}  // namespace corral::supervisor
