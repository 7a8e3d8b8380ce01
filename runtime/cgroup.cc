#include "runtime/cgroup.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <string_view>
#include <thread>

#include "runtime/cgroup_version.h"
#include "runtime/limits.h"
#include "runtime/unique_fd.h"
#include "runtime/units.h"

namespace corral {
namespace cgroup_detail {

struct Hierarchy {
  int id = 0;  // first field of /proc/self/cgroup
  const CgroupVersion* version = &cgroup_v1();
  std::string mount;
  std::string own_rel;                      // the supervisor's group, as /proc/self/cgroup names it
  std::string own_dir;                      // the same, as a directory
  std::string parent_rel;                   // "<own_rel>/corral-<pid>"
  std::string parent_dir;                   // empty unless created: the hierarchy is usable
  std::set<std::string> controllers;        // offered to groups created beneath parent_dir
  std::vector<std::string> enabled_in_own;  // v2: what we added to own_dir's subtree_control
  std::string self_leaf;                    // v2: where we moved the supervisor, if we did
  bool usable() const { return !parent_dir.empty(); }
  // A group directory here, for a role or none (the parent groups, when they are cleaned up).
  GroupDir dir(std::string path, std::string rel, bool memory = false, bool cpu_accounting = false) const {
    return GroupDir{std::move(path), std::move(rel), id, version, memory, cpu_accounting, version->has_kill_file()};
  }
};

// ---------------------------------------------------------------------------------------------
// The file helpers both versions use (runtime/cgroup_version.h)

std::optional<std::string> read_file(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return std::nullopt;
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::nullopt;
    if (n == 0) return out;
    out.append(buf, static_cast<std::size_t>(n));
  }
}

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

Status write_file(const std::string& path, const std::string& value) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd) {
    int err = errno;
    if (!exists(path)) return Status::error("write", err, path + " does not exist");
    return Status::from_errno("write", err, path);
  }
  // A cgroup file takes one value per write(2); a short write would be a kernel rejection.
  ssize_t n = ::write(fd.get(), value.data(), value.size());
  if (n < 0) return Status::from_errno("write", errno, "\"" + value + "\" to " + path);
  if (static_cast<std::size_t>(n) != value.size())
    return Status::error("write", EIO, "short write of \"" + value + "\" to " + path);
  return {};
}

}  // namespace cgroup_detail

using cgroup_detail::CgroupVersion;
using cgroup_detail::GroupDir;
using cgroup_detail::Hierarchy;
using cgroup_detail::JoinKind;
using cgroup_detail::Role;
using cgroup_detail::collect_pids;
using cgroup_detail::exists;
using cgroup_detail::keyed_value;
using cgroup_detail::parse_u64;
using cgroup_detail::read_file;
using cgroup_detail::write_file;

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::chrono::milliseconds kWaitBound{1000};
constexpr std::chrono::milliseconds kPollInterval{1};
constexpr std::uint64_t kPidMaxLimit = 4'194'304;  // PID_MAX_LIMIT: no pid is larger
constexpr std::uint64_t kProbeMemoryBytes = 1024 * 1024 * 1024;
constexpr std::uint64_t kProbePids = 64;
constexpr double kProbeCpus = 0.5;
constexpr std::size_t kMaxNameBytes = 200;
constexpr const char* kProbeName = "corral-probe";
const char* const kControllers[] = {"memory", "pids", "cpu"};

bool is_dir(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::vector<std::string> tokens(std::string_view text) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    std::size_t start = i;
    while (i < text.size() && !std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    if (i > start) out.emplace_back(text.substr(start, i - start));
  }
  return out;
}

std::string join(const std::vector<std::string>& v, std::string_view sep, std::string_view prefix = {}) {
  std::string out;
  for (const auto& s : v) {
    if (!out.empty()) out.append(sep);
    out.append(prefix).append(s);
  }
  return out;
}

std::vector<std::string> subdirs(const std::string& path) {
  std::vector<std::string> out;
  DIR* d = ::opendir(path.c_str());  // glibc opens it close-on-exec
  if (!d) return out;
  while (struct dirent* e = ::readdir(d)) {
    std::string_view n = e->d_name;
    if (n == "." || n == "..") continue;
    std::string full = path + "/" + e->d_name;
    if (e->d_type == DT_DIR || (e->d_type == DT_UNKNOWN && is_dir(full))) out.push_back(std::move(full));
  }
  ::closedir(d);
  return out;
}

// Returns the errno of the last rmdir (0 once removed).
int remove_tree(const std::string& dir, int depth = 0) {
  if (depth < 16)
    for (const auto& sub : subdirs(dir)) remove_tree(sub, depth + 1);
  return ::rmdir(dir.c_str()) == 0 ? 0 : errno;
}

// Whether `pid` is still in `d` or beneath it: checked after pidfd_open, so that a pid reused
// between reading cgroup.procs and signalling is never hit.
bool in_group(pid_t pid, const GroupDir& d) {
  auto text = read_file("/proc/" + std::to_string(pid) + "/cgroup");
  if (!text) return false;
  std::size_t pos = 0;
  while (pos < text->size()) {
    std::size_t end = text->find('\n', pos);
    if (end == std::string::npos) end = text->size();
    std::string_view line(text->data() + pos, end - pos);
    pos = end + 1;
    std::size_t c1 = line.find(':');
    std::size_t c2 = c1 == std::string_view::npos ? c1 : line.find(':', c1 + 1);
    if (c2 == std::string_view::npos) continue;
    auto id = parse_u64(line.substr(0, c1));
    if (!id || static_cast<int>(*id) != d.hierarchy_id) continue;
    std::string_view path = line.substr(c2 + 1);
    if (path == d.cgroup_path ||
        (path.size() > d.cgroup_path.size() && path.substr(0, d.cgroup_path.size()) == d.cgroup_path &&
         path[d.cgroup_path.size()] == '/'))
      return true;
  }
  return false;
}

void signal_round(const std::vector<GroupDir>& dirs) {
  for (const auto& d : dirs) {
    std::map<pid_t, int> pids;
    collect_pids(d.path, pids);
    for (const auto& [pid, unused] : pids) {
      UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
      if (!pidfd) {
        if (errno == ENOSYS) ::kill(pid, SIGKILL);  // kernel < 5.3: accept the reuse race
        continue;
      }
      if (in_group(pid, d)) ::syscall(SYS_pidfd_send_signal, pidfd.get(), SIGKILL, nullptr, 0);
    }
  }
}

Status apply_pids(const std::string& dir, std::uint64_t pids) {
  return write_file(dir + "/pids.max", std::to_string(pids));
}

Status read_cpu_probe(const std::string& dir, const CgroupVersion& version) {
  if (version.cpu_usage_ns(dir)) return {};
  return Status::error("read", 0, "no CPU usage readable in " + dir + " (" + version.files_for(Role::cpu_accounting) + ")");
}

struct SelfEntry {
  int id = 0;
  std::vector<std::string> controllers;
  std::string path;
};

std::vector<SelfEntry> parse_self(const std::string& text) {
  std::vector<SelfEntry> out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + pos, end - pos);
    pos = end + 1;
    std::size_t c1 = line.find(':');
    std::size_t c2 = c1 == std::string_view::npos ? c1 : line.find(':', c1 + 1);
    if (c2 == std::string_view::npos) continue;
    auto id = parse_u64(line.substr(0, c1));
    if (!id) continue;
    SelfEntry e;
    e.id = static_cast<int>(*id);
    std::string_view ctl = line.substr(c1 + 1, c2 - c1 - 1);
    std::size_t p = 0;
    while (p < ctl.size()) {
      std::size_t comma = ctl.find(',', p);
      if (comma == std::string_view::npos) comma = ctl.size();
      if (comma > p) e.controllers.emplace_back(ctl.substr(p, comma - p));
      p = comma + 1;
    }
    e.path = std::string(line.substr(c2 + 1));
    if (e.path.empty() || e.path[0] != '/') continue;
    out.push_back(std::move(e));
  }
  return out;
}

std::string dir_of(const std::string& mount, const std::string& rel) {
  return rel == "/" ? mount : mount + rel;
}

std::string child_rel(const std::string& rel, const std::string& name) {
  return rel == "/" ? "/" + name : rel + "/" + name;
}

void append_reason(std::string& reason, const std::string& text) {
  if (text.empty()) return;
  if (!reason.empty()) reason.append("; ");
  reason.append(text);
}

bool valid_name(const std::string& name) {
  if (name.empty() || name.size() > kMaxNameBytes || name == "." || name == "..") return false;
  if (name.rfind("corral-", 0) == 0) return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') return false;
  return true;
}

// Runs `fn` in a fresh group beneath `h`'s parent, then removes the group.
Status try_in_probe(const Hierarchy& h, const std::function<Status(const std::string&)>& fn) {
  const std::string dir = h.parent_dir + "/" + kProbeName;
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return Status::from_errno("mkdir", errno, dir);
  Status s = fn(dir);
  remove_tree(dir);
  return s;
}

}  // namespace

namespace cgroup_detail {

std::uint64_t cpu_quota_us(double cpus) {
  return static_cast<std::uint64_t>(std::llround(cpus * static_cast<double>(kCpuPeriodUs)));
}

std::optional<std::uint64_t> parse_u64(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  std::uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

std::optional<std::uint64_t> keyed_value(std::string_view text, std::string_view key) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    auto t = tokens(text.substr(pos, end - pos));
    if (t.size() == 2 && t[0] == key) return parse_u64(t[1]);
    pos = end + 1;
  }
  return std::nullopt;
}

void collect_pids(const std::string& dir, std::map<pid_t, int>& out, int depth) {
  if (auto text = read_file(dir + "/cgroup.procs"))
    for (const auto& t : tokens(*text))
      if (auto v = parse_u64(t); v && *v > 0 && *v <= kPidMaxLimit) out.emplace(static_cast<pid_t>(*v), 0);
  if (depth < 16)
    for (const auto& sub : subdirs(dir)) collect_pids(sub, out, depth + 1);
}

}  // namespace cgroup_detail

// ---------------------------------------------------------------------------------------------
// Cgroup

Cgroup::~Cgroup() {
  if (!empty()) kill();
  const auto deadline = Clock::now() + kWaitBound;
  for (auto it = dirs_.rbegin(); it != dirs_.rend(); ++it) {
    // EBUSY while a killed process is still exiting; anything else (ENOENT, or files that a
    // test's plain tree holds) will not change by waiting.
    while (remove_tree(it->path) == EBUSY && Clock::now() < deadline)
      std::this_thread::sleep_for(kPollInterval);
  }
}

Status Cgroup::add(pid_t pid) {
  const std::string value = std::to_string(pid);
  for (const auto& d : dirs_)
    if (Status s = write_file(d.path + "/cgroup.procs", value); !s.ok()) return s;
  return {};
}

Status Cgroup::add_after_clone(pid_t pid) {
  const std::string value = std::to_string(pid);
  for (const auto& d : dirs_)
    if (d.version->join_kind() == JoinKind::at_clone)
      if (Status s = write_file(d.path + "/cgroup.procs", value); !s.ok()) return s;
  return {};
}

bool Cgroup::holds(pid_t pid) const {
  for (const auto& d : dirs_) {
    std::map<pid_t, int> pids;
    collect_pids(d.path, pids, /*depth=*/16);  // the group's own processes, not its children's
    if (!pids.count(pid)) return false;
  }
  return !dirs_.empty();
}

bool Cgroup::kills_at_once() const {
  for (const auto& d : dirs_)
    if (d.kill) return true;
  return false;
}

StatusOr<CgroupJoin> Cgroup::open_join() const {
  CgroupJoin join;
  for (const auto& d : dirs_) {
    switch (d.version->join_kind()) {
      case JoinKind::self_tasks: {
        const std::string path = d.path + "/tasks";
        UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW));
        if (!fd) return Status::from_errno("open", errno, path);
        join.self.push_back(std::move(fd));
        break;
      }
      case JoinKind::at_clone:
        // One process is born in one group: a host has at most one hierarchy of this kind.
        if (join.clone_into) return Status::error("cgroup", EINVAL, "more than one group to be born in");
        join.clone_into.reset(::open(d.path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW));
        if (!join.clone_into) return Status::from_errno("open", errno, d.path);
        break;
    }
  }
  return join;
}

CgroupUsage Cgroup::usage() const {
  CgroupUsage u;
  for (const auto& d : dirs_) {
    if (d.memory) d.version->read_memory(d.path, u);
    if (d.cpu_accounting) {
      u.cpu_usage_ns = d.version->cpu_usage_ns(d.path);
      d.version->read_cpu_split(d.path, u);
    }
  }
  return u;
}

bool Cgroup::kill() {
  const auto deadline = Clock::now() + kWaitBound;
  for (;;) {
    if (empty()) return true;
    bool by_kernel = false;
    for (const auto& d : dirs_)
      if (d.kill && write_file(d.path + "/cgroup.kill", "1").ok()) by_kernel = true;
    // Without cgroup.kill a process may fork between our read and our signal: keep going
    // round until the listing is empty.
    if (!by_kernel) signal_round(dirs_);
    if (Clock::now() >= deadline) return empty();
    std::this_thread::sleep_for(kPollInterval);
  }
}

bool Cgroup::empty() const {
  for (const auto& d : dirs_)
    if (!d.version->tree_empty(d.path)) return false;
  return true;
}

std::vector<std::string> Cgroup::paths() const {
  std::vector<std::string> out;
  for (const auto& d : dirs_) out.push_back(d.path);
  return out;
}

// ---------------------------------------------------------------------------------------------
// CgroupManager

std::unique_ptr<CgroupManager> CgroupManager::create(std::string sysfs_root, std::string self_cgroup_file,
                                                     std::function<void(const std::string&)> before_mkdir) {
  std::unique_ptr<CgroupManager> m(new CgroupManager());
  m->before_mkdir_ = std::move(before_mkdir);
  m->detect(sysfs_root, self_cgroup_file);
  m->probe();
  return m;
}

void CgroupManager::detect(const std::string& root, const std::string& self_file) {
  const std::string pid = std::to_string(::getpid());
  auto note = [this](const std::string& ctl, const std::string& text) {
    if (ctl == "memory") append_reason(caps_.memory_reason, text);
    if (ctl == "pids") append_reason(caps_.pids_reason, text);
    if (ctl == "cpu") append_reason(caps_.cpu_reason, text);
    if (ctl == "cpuacct") append_reason(caps_.cpu_accounting_reason, text);
    if (ctl == "kill") append_reason(caps_.kill_reason, text);
  };
  const std::vector<std::string> v2_roles = {"memory", "pids", "cpu", "cpuacct", "kill"};

  auto self = read_file(self_file);
  if (!self) {
    for (const auto& r : v2_roles) note(r, "cannot read " + self_file + ": " + std::strerror(errno));
    return;
  }
  const auto entries = parse_self(*self);

  // Creates corral-<pid> beneath the supervisor's own group; a directory of that name is a
  // leftover of an earlier supervisor that had our pid, so whatever it holds is killed first.
  auto create_parent = [&](Hierarchy& h, const std::vector<std::string>& roles) {
    const std::string dir = h.own_dir + "/corral-" + pid;
    const std::string rel = child_rel(h.own_rel, "corral-" + pid);
    if (before_mkdir_) before_mkdir_(dir);
    if (::mkdir(dir.c_str(), 0755) != 0) {
      if (errno != EEXIST) {
        const int err = errno;
        for (const auto& r : roles) note(r, "mkdir " + dir + ": " + std::strerror(err));
        return false;
      }
      { Cgroup stale({h.dir(dir, rel)}); }
      if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
        const int err = errno;
        for (const auto& r : roles) note(r, "mkdir " + dir + ": " + std::strerror(err));
        return false;
      }
    }
    h.parent_dir = dir;
    h.parent_rel = rel;
    return true;
  };

  auto locate = [&](Hierarchy& h, const SelfEntry& e, const std::vector<std::string>& roles) {
    h.id = e.id;
    h.own_rel = e.path;
    h.own_dir = dir_of(h.mount, e.path);
    if (is_dir(h.own_dir)) return true;
    // Never fall back to the hierarchy's root: that group belongs to someone else.
    for (const auto& r : roles)
      note(r, "the supervisor's group " + e.path + " (" + self_file + ") is not under " + h.mount);
    return false;
  };

  auto detect_v2 = [&](const std::string& mount, const SelfEntry& e) {
    auto h = std::make_unique<Hierarchy>();
    h->version = &cgroup_detail::cgroup_v2();
    h->mount = mount;
    if (!locate(*h, e, v2_roles)) return;
    const std::string controllers_file = h->own_dir + "/cgroup.controllers";
    const auto offered = tokens(read_file(controllers_file).value_or(""));
    const auto enabled = tokens(read_file(h->own_dir + "/cgroup.subtree_control").value_or(""));
    auto has = [](const std::vector<std::string>& v, const std::string& s) {
      return std::find(v.begin(), v.end(), s) != v.end();
    };
    std::vector<std::string> wanted, missing;
    for (const char* c : kControllers) {
      if (!has(offered, c)) {
        note(c, "cgroup v2 " + controllers_file + " does not offer " + c + " (offers: \"" +
                    join(offered, " ") + "\")");
        continue;
      }
      wanted.push_back(c);
      if (!has(enabled, c)) missing.push_back(c);
    }

    // Enables `ctls` for the children of `dir`, all in one write if possible (so a test can
    // read back one line), else one by one; returns those that ended up enabled.
    auto enable = [&](const std::string& dir, const std::vector<std::string>& ctls, Status& first_error) {
      std::vector<std::string> done;
      if (ctls.empty()) return done;
      const std::string file = dir + "/cgroup.subtree_control";
      first_error = write_file(file, join(ctls, " ", "+"));
      if (first_error.ok()) return ctls;
      if (first_error.err() == EBUSY) return done;
      for (const auto& c : ctls) {
        if (Status s = write_file(file, "+" + c); s.ok())
          done.push_back(c);
        else
          note(c, "enabling " + c + " in " + file + ": " + s.message());
      }
      return done;
    };

    Status st;
    auto now_enabled = enable(h->own_dir, missing, st);
    if (!st.ok() && st.err() == EBUSY) {
      // v2's no-internal-process rule: a non-root group with processes in it cannot delegate
      // controllers. Move the supervisor into a leaf of its own group, as systemd asks of a
      // service with Delegate=yes.
      const std::string leaf = h->own_dir + "/corral-" + pid + "-self";
      if (before_mkdir_) before_mkdir_(leaf);
      if ((::mkdir(leaf.c_str(), 0755) == 0 || errno == EEXIST) &&
          write_file(leaf + "/cgroup.procs", pid).ok()) {
        h->self_leaf = leaf;
        now_enabled = enable(h->own_dir, missing, st);
      } else {
        ::rmdir(leaf.c_str());
      }
      if (!st.ok() && st.err() == EBUSY)
        for (const auto& c : missing)
          note(c, "enabling " + c + " in " + h->own_dir + "/cgroup.subtree_control: " + st.message() +
                      " (other processes share the supervisor's group)");
    }
    h->enabled_in_own = now_enabled;
    std::vector<std::string> usable;
    for (const auto& c : wanted)
      if (has(enabled, c) || has(now_enabled, c)) usable.push_back(c);

    if (!create_parent(*h, v2_roles)) {
      hierarchies_.push_back(std::move(h));  // kept so that the destructor undoes the above
      return;
    }
    Status st2;
    for (const auto& c : enable(h->parent_dir, usable, st2)) h->controllers.insert(c);
    if (!st2.ok() && st2.err() == EBUSY)
      for (const auto& c : usable) note(c, "enabling " + c + " in " + h->parent_dir + ": " + st2.message());
    hierarchies_.push_back(std::move(h));
  };

  if (exists(root + "/cgroup.controllers")) {
    for (const auto& e : entries)
      if (e.id == 0 && e.controllers.empty()) return detect_v2(root, e);
    for (const auto& r : v2_roles) note(r, root + " is cgroup v2 but " + self_file + " has no \"0::\" line");
    return;
  }

  bool v2_seen = false;
  for (const auto& e : entries) {
    if (e.controllers.empty()) {
      if (e.id != 0 || v2_seen) continue;
      v2_seen = true;
      if (exists(root + "/unified/cgroup.controllers"))
        detect_v2(root + "/unified", e);
      else
        note("kill", "no cgroup v2 mount at " + root + "/unified");
      continue;
    }
    std::vector<std::string> roles;
    for (const auto& c : e.controllers)
      if (c == "memory" || c == "pids" || c == "cpu" || c == "cpuacct") roles.push_back(c);
    if (roles.empty()) continue;
    // "cpu,cpuacct" is mounted under its joined name and usually linked from each controller.
    std::vector<std::string> candidates = {root + "/" + join(e.controllers, ",")};
    for (const auto& c : e.controllers) candidates.push_back(root + "/" + c);
    std::string mount;
    for (const auto& c : candidates)
      if (is_dir(c)) {
        mount = c;
        break;
      }
    if (mount.empty()) {
      for (const auto& r : roles)
        note(r, "cgroup v1 hierarchy " + std::to_string(e.id) + " (" + join(e.controllers, ",") +
                    ") is not mounted at " + candidates[0]);
      continue;
    }
    auto h = std::make_unique<Hierarchy>();
    h->mount = mount;
    if (!locate(*h, e, roles) || !create_parent(*h, roles)) continue;
    h->controllers.insert(roles.begin(), roles.end());
    hierarchies_.push_back(std::move(h));
  }
  if (!v2_seen) note("kill", "no cgroup v2 hierarchy in " + self_file);
}

void CgroupManager::probe() {
  // Picks the first usable hierarchy that passes `fn` among those `fits` accepts, in `order`.
  auto pick = [this](std::string& reason, const std::function<bool(const Hierarchy&)>& fits,
                     const std::function<Status(const Hierarchy&, const std::string&)>& fn,
                     const std::function<std::string(const Hierarchy&)>& describe) {
    std::string failures;
    for (std::size_t i = 0; i < hierarchies_.size(); ++i) {
      const Hierarchy& h = *hierarchies_[i];
      if (!h.usable() || !fits(h)) continue;
      Status s = try_in_probe(h, [&](const std::string& dir) { return fn(h, dir); });
      if (s.ok()) {
        reason = describe(h);
        return static_cast<int>(i);
      }
      append_reason(failures, "probe under " + h.parent_dir + " failed: " + s.message());
    }
    if (!failures.empty()) {
      append_reason(failures, reason);
      reason = failures;
    }
    return -1;
  };
  auto with = [](const char* c) { return [c](const Hierarchy& h) { return h.controllers.count(c) > 0; }; };
  auto where = [](Role role) {
    return [=](const Hierarchy& h) {
      return std::string("cgroup ") + h.version->name() + " " + h.version->files_for(role) + " under " + h.parent_dir;
    };
  };

  memory_ = pick(
      caps_.memory_reason, with("memory"),
      [](const Hierarchy& h, const std::string& dir) { return h.version->set_memory(dir, kProbeMemoryBytes); },
      where(Role::memory));
  pids_ = pick(
      caps_.pids_reason, with("pids"),
      [](const Hierarchy&, const std::string& dir) { return apply_pids(dir, kProbePids); }, where(Role::pids));
  cpu_ = pick(
      caps_.cpu_reason, with("cpu"),
      [](const Hierarchy& h, const std::string& dir) { return h.version->set_cpus(dir, kProbeCpus); },
      where(Role::cpu));
  kill_ = pick(
      caps_.kill_reason, [](const Hierarchy& h) { return h.version->has_kill_file(); },
      [](const Hierarchy&, const std::string& dir) { return write_file(dir + "/cgroup.kill", "1"); },
      where(Role::kill));
  if (kill_ < 0)
    append_reason(caps_.kill_reason,
                  "Cgroup::kill() falls back to SIGKILL of each pid listed in cgroup.procs");
  // CPU time from a group that exists anyway: a version that counts it in every group serves
  // through the kill group, unless a cpuacct controller is the only source.
  cpu_accounting_ = pick(
      caps_.cpu_accounting_reason,
      [this](const Hierarchy& h) {
        return h.version->accounts_cpu_in_every_group() &&
               (kill_ < 0 || hierarchies_[static_cast<std::size_t>(kill_)].get() == &h);
      },
      [](const Hierarchy& h, const std::string& dir) { return read_cpu_probe(dir, *h.version); },
      where(Role::cpu_accounting));
  if (cpu_accounting_ < 0) {
    std::string every_group_reason = caps_.cpu_accounting_reason;
    caps_.cpu_accounting_reason.clear();
    cpu_accounting_ = pick(
        caps_.cpu_accounting_reason, with("cpuacct"),
        [](const Hierarchy& h, const std::string& dir) { return read_cpu_probe(dir, *h.version); },
        where(Role::cpu_accounting));
    if (cpu_accounting_ < 0) append_reason(caps_.cpu_accounting_reason, every_group_reason);
  }

  caps_.memory = memory_ >= 0;
  caps_.pids = pids_ >= 0;
  caps_.cpu = cpu_ >= 0;
  caps_.kill = kill_ >= 0;
  caps_.cpu_accounting = cpu_accounting_ >= 0;
  for (auto* r : {&caps_.memory_reason, &caps_.pids_reason, &caps_.cpu_reason, &caps_.cpu_accounting_reason,
                  &caps_.kill_reason})
    if (r->empty()) *r = "no cgroup hierarchy offers it";

  bool v1 = false, v2 = false;
  for (const auto& h : hierarchies_)
    if (h->usable()) (h->version == &cgroup_detail::cgroup_v2() ? v2 : v1) = true;
  if (v1)
    caps_.version = caps_.kill ? "v1+v2-kill" : "v1";
  else
    caps_.version = v2 ? "v2" : "none";
}

std::vector<std::string> CgroupManager::created_dirs() const {
  std::vector<std::string> dirs;
  for (const auto& h : hierarchies_) {
    if (h->usable()) dirs.push_back(h->parent_dir);
    if (!h->self_leaf.empty()) dirs.push_back(h->self_leaf);
  }
  return dirs;
}

CgroupManager::~CgroupManager() {
  const std::string pid = std::to_string(::getpid());
  for (auto it = hierarchies_.rbegin(); it != hierarchies_.rend(); ++it) {
    Hierarchy& h = **it;
    if (h.usable()) {
      Cgroup tree({h.dir(h.parent_dir, h.parent_rel)});
    }
    if (!h.enabled_in_own.empty())
      (void)write_file(h.own_dir + "/cgroup.subtree_control", join(h.enabled_in_own, " ", "-"));
    if (!h.self_leaf.empty() && write_file(h.own_dir + "/cgroup.procs", pid).ok())
      ::rmdir(h.self_leaf.c_str());
  }
}

std::set<int> CgroupManager::hierarchies_for(const CgroupLimits& limits, bool extras) const {
  // The memory hierarchy also when unlimited: it gives the peak and the OOM count.
  std::set<int> needed;
  for (int i : {memory_, extras ? cpu_accounting_ : -1, extras ? kill_ : -1})
    if (i >= 0) needed.insert(i);
  if (limits.pids && pids_ >= 0) needed.insert(pids_);
  if (limits.cpus && cpu_ >= 0) needed.insert(cpu_);
  return needed;
}

bool CgroupManager::born_into(const CgroupLimits& limits, bool extras) const {
  for (int i : hierarchies_for(limits, extras))
    if (hierarchies_[static_cast<std::size_t>(i)]->version->join_kind() == JoinKind::at_clone) return true;
  return false;
}

StatusOr<std::unique_ptr<Cgroup>> CgroupManager::create_group(const std::string& name,
                                                              const CgroupLimits& limits, bool extras) {
  if (!valid_name(name))
    return Status::invalid("cgroup name \"" + name + "\" must be 1.." + std::to_string(kMaxNameBytes) +
                           " bytes of [A-Za-z0-9._-], not . or .., not starting with corral-");
  using namespace cap_limits;
  if (limits.memory_bytes && (*limits.memory_bytes < kMinMemory || *limits.memory_bytes > kMaxMemory))
    return Status::invalid("cgroup memory limit " + std::to_string(*limits.memory_bytes) + " bytes is outside " +
                           std::to_string(kMinMemory) + ".." + std::to_string(kMaxMemory));
  if (limits.pids && (*limits.pids < 1 || *limits.pids > kMaxPids))
    return Status::invalid("cgroup pids limit " + std::to_string(*limits.pids) + " is outside 1.." +
                           std::to_string(kMaxPids));
  if (limits.cpus && !(std::isfinite(*limits.cpus) && *limits.cpus >= kMinCpus && *limits.cpus <= kMaxCpus))
    return Status::invalid("cgroup cpu limit " + std::to_string(*limits.cpus) + " CPUs is outside " +
                           format_rate(kMinCpus) + ".." + format_rate(kMaxCpus));

  auto refuse = [](const char* what, const std::string& reason) {
    return Status::error(
        "cgroup", 0,
        std::string(what) + " limit requested but the " + what + " controller is unavailable: " + reason);
  };
  if (limits.memory_bytes && memory_ < 0) return refuse("memory", caps_.memory_reason);
  if (limits.pids && pids_ < 0) return refuse("pids", caps_.pids_reason);
  if (limits.cpus && cpu_ < 0) return refuse("cpu", caps_.cpu_reason);

  const std::set<int> needed = hierarchies_for(limits, extras);
  if (needed.empty())
    return Status::error(
        "cgroup", 0,
        "no usable cgroup hierarchy (version " + caps_.version + "): kill: " + caps_.kill_reason);

  std::vector<GroupDir> dirs;
  auto fail = [&dirs](Status s) {
    for (auto it = dirs.rbegin(); it != dirs.rend(); ++it) ::rmdir(it->path.c_str());
    return s;
  };
  for (int i : needed) {
    const Hierarchy& h = *hierarchies_[static_cast<std::size_t>(i)];
    GroupDir d = h.dir(h.parent_dir + "/" + name, child_rel(h.parent_rel, name), i == memory_, i == cpu_accounting_);
    d.kill = i == kill_;
    if (::mkdir(d.path.c_str(), 0755) != 0) return fail(Status::from_errno("mkdir", errno, d.path));
    dirs.push_back(d);
    if (limits.memory_bytes && i == memory_)
      if (Status s = h.version->set_memory(d.path, *limits.memory_bytes); !s.ok()) return fail(s);
    if (limits.pids && i == pids_)
      if (Status s = apply_pids(d.path, *limits.pids); !s.ok()) return fail(s);
    if (limits.cpus && i == cpu_)
      if (Status s = h.version->set_cpus(d.path, *limits.cpus); !s.ok()) return fail(s);
  }
  return std::unique_ptr<Cgroup>(new Cgroup(std::move(dirs)));
}

}  // namespace corral
