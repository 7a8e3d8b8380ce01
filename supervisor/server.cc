#include "supervisor/server.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/io_context.hpp>
#include <asio/local/stream_protocol.hpp>
#include <asio/post.hpp>
#include <asio/signal_set.hpp>
#include <asio/use_awaitable.hpp>
#include <cstring>
#include <deque>
#include <filesystem>
#include <list>
#include <optional>

#include "runtime/policy.h"
#include "runtime/unique_fd.h"
#include "runtime/units.h"
#include "supervisor/connection.h"
#include "supervisor/instance.h"
#include "supervisor/peer.h"
#include "worker_proto/messages.h"

namespace corral::supervisor {

namespace {

// The event loop's niceness, where the supervisor may raise it (CAP_SYS_NICE or RLIMIT_NICE).
constexpr int kLoopNice = -5;

using asio::local::stream_protocol;
constexpr auto use_tuple = asio::experimental::as_tuple(asio::use_awaitable);

// The socket's directory: created 0700 if missing, refused if someone else owns it (they
// could swap the socket under us). With --allow-uid others may traverse it (0711); the
// peer credential check stays the gate.
Status prepare_directory(const std::string& dir, bool shared) {
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec)) {
    std::filesystem::create_directories(dir, ec);
    if (ec) return Status::error("mkdir", ec.value(), "cannot create socket directory " + dir + ": " + ec.message());
  }
  struct stat st {};
  if (::lstat(dir.c_str(), &st) < 0) return Status::from_errno("stat", errno, dir);
  if (!S_ISDIR(st.st_mode)) return Status::error("stat", ENOTDIR, "socket directory " + dir + " is not a directory");
  if (st.st_uid != ::geteuid())
    return Status::error("stat", EPERM, "socket directory " + dir + " is owned by uid " + std::to_string(st.st_uid) +
                                            ", not by this supervisor's uid " + std::to_string(::geteuid()));
  // Only a directory of our own whose name is ours to set: never chmod /tmp or /run itself.
  if (dir != "/" && dir != "/tmp" && dir != "/run" && ::chmod(dir.c_str(), shared ? 0711 : 0700) < 0)
    return Status::from_errno("chmod", errno, dir);
  return {};
}

// Another live supervisor on the path is refused; a stale socket file is replaced.
Status claim_path(const std::string& path, UniqueFd& lock_fd) {
  const std::string lock_path = path + ".lock";
  lock_fd.reset(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!lock_fd) return Status::from_errno("lock", errno, lock_path);
  if (::flock(lock_fd.get(), LOCK_EX | LOCK_NB) < 0) {
    char buf[32] = {};
    [[maybe_unused]] auto n = ::pread(lock_fd.get(), buf, sizeof buf - 1, 0);
    return Status::error("lock", EADDRINUSE,
                         "another corral supervisor (pid " + std::string(buf[0] ? buf : "?") +
                             ") is already serving " + path);
  }
  std::string pid = std::to_string(::getpid());
  if (::ftruncate(lock_fd.get(), 0) == 0) [[maybe_unused]] auto n = ::pwrite(lock_fd.get(), pid.data(), pid.size(), 0);

  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode))
      return Status::error("bind", EEXIST, path + " exists and is not a socket; refusing to replace it");
    // Someone (not a corral holding the lock) may still listen there.
    UniqueFd probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    if (::connect(probe.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0)
      return Status::error("bind", EADDRINUSE, "a live server already listens on " + path);
    spdlog::info("replacing stale socket {}", path);
    ::unlink(path.c_str());
  }
  return {};
}

StatusOr<UniqueFd> listen_on(const std::string& path, bool shared) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path)
    return Status::error("bind", ENAMETOOLONG, "socket path is too long (" + std::to_string(path.size()) +
                                                   " bytes; the limit is " + std::to_string(sizeof addr.sun_path - 1) + ")");
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) return Status::from_errno("socket", errno);
  // The socket is born with its final mode: no window in which it is wider than asked.
  mode_t old = ::umask(shared ? 0111 : 0177);
  int rc = ::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  int bind_errno = errno;
  ::umask(old);
  if (rc < 0) return Status::from_errno("bind", bind_errno, path);
  // Before listen(): a client may send before it is accepted, and accepted sockets inherit it.
  if (const int err = refuse_descriptors(fd.get()))
    spdlog::warn("this kernel cannot refuse descriptors sent by clients and workers (SO_PASSRIGHTS, Linux 6.16: {}); "
                 "a client could stall the supervisor by sending one whose last close blocks "
                 "(docs/threat-model.md \"The supervisor's own reads and writes\")",
                 std::strerror(err));
  if (::listen(fd.get(), 128) < 0) return Status::from_errno("listen", errno, path);
  return fd;
}

class Server {
 public:
  Server(asio::io_context& io, Context& ctx, UniqueFd listen_fd, asio::signal_set& signals)
      : io_(io), ctx_(ctx), acceptor_(io), signals_(signals), refusal_flush_(io) {
    acceptor_.assign(stream_protocol(), listen_fd.release());
  }

  void start() {
    signals_.async_wait([this](std::error_code ec, int sig) {
      if (ec) return;
      spdlog::info("signal {}: stopping: no new connections, terminating every command", sig);
      stopping_ = true;
      std::error_code ignored;
      acceptor_.close(ignored);
      for (auto& weak : connections_)
        if (auto c = weak.lock()) c->close();
      // Detached scopes and their background commands end with the supervisor too.
      for (const auto& scope : ctx_.scopes->list(0)) ctx_.scopes->close(scope);
    });
    asio::co_spawn(io_, accept_loop(), asio::detached);
  }

 private:
  asio::awaitable<void> accept_loop() {
    while (!stopping_) {
      auto [ec, socket] = co_await acceptor_.async_accept(use_tuple);
      if (ec) {
        if (stopping_ || ec == asio::error::operation_aborted) break;
        spdlog::warn("accept: {}", ec.message());
        continue;
      }
      admit(std::move(socket));
    }
  }

  void admit(stream_protocol::socket socket) {
    std::erase_if(connections_, [](const auto& w) { return w.expired(); });
    ucred cred{};
    socklen_t len = sizeof cred;
    if (::getsockopt(socket.native_handle(), SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
      log_refusal(fmt::format(": SO_PEERCRED: {}", std::strerror(errno)));
      return;
    }
    Peer peer{cred.uid, cred.gid, cred.pid, {}};
    errno = 0;
    peer.groups = peer_groups(socket.native_handle());
    if (peer.groups.empty() && errno != 0) {
      // Paths are checked with the peer's groups: without them the check would be wrong.
      log_refusal(fmt::format(": SO_PEERGROUPS: {}", std::strerror(errno)));
      return;
    }
#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77  // Linux 6.5
#endif
    // Nothing a sandbox runs may use the socket (it is also masked in every mount view). A
    // peer that cannot be vouched for (gone before we could look) is refused too.
    int peer_pidfd = -1;
    socklen_t fdlen = sizeof peer_pidfd;
    if (::getsockopt(socket.native_handle(), SOL_SOCKET, SO_PEERPIDFD, &peer_pidfd, &fdlen) < 0) peer_pidfd = -1;
    // The uid and the quotas first: they need no /proc, and a peer refused by them never
    // costs a lineage walk. Admissions in progress count against the quotas, so a flood of
    // connects is refused here instead of queueing walks.
    if (refused_by_uid_or_quota(socket, cred, pending_for(cred.uid), admissions_.size())) {
      if (peer_pidfd >= 0) ::close(peer_pidfd);
      return;
    }
    // The lineage walk reads /proc/PID/status up the peer's ancestry: off the loop.
    // Admitted in the order accepted, whichever walk ends first: a client that connected and
    // left is seen gone before the next one is counted.
    auto admission = std::make_shared<Admission>(Admission{std::move(socket), peer, std::nullopt});
    admissions_.push_back(admission);
    auto pidfd = std::make_shared<UniqueFd>(peer_pidfd);
    const pid_t self = ::getpid();
    // The job may outlive this Server (a supervisor stopping drains its pools after the Server
    // is gone): it touches only the io_context, and the handler runs only while the loop does.
    ctx_.admission->submit([this, &io = io_, admission, pidfd, self]() {
      const Lineage who = lineage(admission->peer.pid, self, pidfd->get());
      asio::post(io, [this, admission, who]() {
        admission->who = who;
        while (!admissions_.empty() && admissions_.front()->who) {
          auto next = std::move(admissions_.front());
          admissions_.pop_front();
          if (!stopping_) admit_checked(std::move(next->socket), next->peer, *next->who);
        }
      });
    });
  }

  // The rest of admit(), back on the loop once the peer's lineage is known.
  void admit_checked(stream_protocol::socket socket, const Peer& peer, Lineage who) {
    const ucred cred{peer.pid, peer.uid, peer.gid};
    if (who != Lineage::stranger) {
      log_refusal(fmt::format(" from pid {}: {}", cred.pid,
                              who == Lineage::ours        ? "it runs inside a sandbox of this supervisor"
                              : who == Lineage::sandboxed ? "it runs inside a corral sandbox (another supervisor's)"
                                                          : "the peer vanished before it could be checked"));
      refuse(socket, proto::ErrorCode::permission_denied,
             who == Lineage::unverifiable ? "the peer could not be verified" : "commands run by corral may not use its socket");
      return;
    }
    // Checked again: connections admitted meanwhile count now.
    if (refused_by_uid_or_quota(socket, cred, 0, 0)) return;
    auto c = std::make_shared<Connection>(io_, std::move(socket), peer, ctx_);
    connections_.push_back(c);
    c->start();
  }

  // Refuses (and closes) a peer whose uid may not connect, or that would be over its uid's quota
  // or the total with `pending_uid` / `pending_all` admissions still in progress.
  bool refused_by_uid_or_quota(stream_protocol::socket& socket, const ucred& cred, std::size_t pending_uid,
                               std::size_t pending_all) {
    const bool allowed = cred.uid == ::geteuid() ||
                         std::find(ctx_.options.allow_uids.begin(), ctx_.options.allow_uids.end(), cred.uid) !=
                             ctx_.options.allow_uids.end();
    if (!allowed) {
      log_refusal(fmt::format(" from uid {} pid {}: not this supervisor's uid and not --allow-uid", cred.uid, cred.pid));
      refuse(socket, proto::ErrorCode::permission_denied,
             "uid " + std::to_string(cred.uid) + " may not use this supervisor (serve --allow-uid)");
      return true;
    }
    const unsigned per_uid = std::min(ctx_.options.max_connections_per_uid, ctx_.options.max_connections);
    auto it = ctx_.connections_by_uid.find(cred.uid);
    const std::size_t of_uid = (it == ctx_.connections_by_uid.end() ? 0 : it->second) + pending_uid;
    if (of_uid >= per_uid) {
      log_refusal(fmt::format(" from uid {} pid {}: {} connections of that uid open (--max-connections-per-uid)",
                              cred.uid, cred.pid, of_uid));
      refuse(socket, proto::ErrorCode::too_many_connections,
             "uid " + std::to_string(cred.uid) + " already has " + std::to_string(of_uid) +
                 " connections (serve --max-connections-per-uid)");
      return true;
    }
    const std::size_t all = ctx_.connections + pending_all;
    if (all >= ctx_.options.max_connections) {
      log_refusal(fmt::format(" from pid {}: {} connections open (--max-connections)", cred.pid, all));
      refuse(socket, proto::ErrorCode::too_many_connections,
             "the supervisor already has " + std::to_string(all) + " connections (serve --max-connections)");
      return true;
    }
    return false;
  }

  std::size_t pending_for(uid_t uid) const {
    return static_cast<std::size_t>(
        std::count_if(admissions_.begin(), admissions_.end(), [uid](const auto& a) { return a->peer.uid == uid; }));
  }

  // One best-effort error frame (small enough for the socket buffer), then close.
  static void refuse(stream_protocol::socket& socket, proto::ErrorCode code, const std::string& message) {
    proto::Frame f = proto::make_error(0, code, message);
    [[maybe_unused]] auto n = ::send(socket.native_handle(), f.data(), f.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    std::error_code ignored;
    socket.close(ignored);
  }

  asio::io_context& io_;
  Context& ctx_;
  stream_protocol::acceptor acceptor_;
  asio::signal_set& signals_;
  std::list<std::weak_ptr<Connection>> connections_;
  // Accepted, their lineage being checked off the loop; admitted in this order.
  struct Admission {
    stream_protocol::socket socket;
    Peer peer;
    std::optional<Lineage> who;  // once known
  };
  std::deque<std::shared_ptr<Admission>> admissions_;
  bool stopping_ = false;

  // "refused a connection<what>", at most kRefusalLogsPerSecond lines a second: a connect loop
  // must not flood the log. The ones left out are counted, and the count is logged when that
  // second ends.
  static constexpr unsigned kRefusalLogsPerSecond = 10;
  void log_refusal(const std::string& what) {
    const auto now = std::chrono::steady_clock::now();
    if (now - refusal_second_ >= std::chrono::seconds(1)) {
      flush_refusals();
      refusal_second_ = now;
      refusals_logged_ = 0;
    }
    if (refusals_logged_ < kRefusalLogsPerSecond) {
      ++refusals_logged_;
      spdlog::warn("refused a connection{}", what);
    } else if (++refusals_unlogged_ == 1) {
      refusal_flush_.expires_at(refusal_second_ + std::chrono::seconds(1));
      refusal_flush_.async_wait([this](std::error_code ec) {
        if (!ec) flush_refusals();
      });
    }
  }
  void flush_refusals() {
    if (refusals_unlogged_)
      spdlog::warn("refused {} more connections (not logged one by one: over {} a second)", refusals_unlogged_,
                   kRefusalLogsPerSecond);
    refusals_unlogged_ = 0;
  }
  asio::steady_timer refusal_flush_;  // logs a second's count when it ends
  std::chrono::steady_clock::time_point refusal_second_{};
  unsigned refusals_logged_ = 0;
  std::uint64_t refusals_unlogged_ = 0;
};

}  // namespace

// What a command gets when it asks for no cap of a kind (docs/design.md "Bounds"), and whether
// this host enforces it: status reports these. A default the host cannot enforce is reported,
// never refused; a cap asked for explicitly is refused instead (SandboxHost::check).
static std::vector<proto::BoundInfo> default_bounds(const ServerOptions& o, const SandboxHost& host) {
  std::vector<proto::BoundInfo> out;
  const std::uint64_t memory = host.options().default_memory;
  const LayerReport* mem = find_layer(host.layers(), Layer::cgroup_memory);
  if (memory == 0)
    out.push_back({"memory", 0, false, "serve --default-memory 0: no memory bound without --memory"});
  else if (mem && mem->available)
    out.push_back({"memory", memory, true, "a memory cgroup per command (layer cgroup-memory); a scope's /tmp "
                                           "tmpfs pages count against the command that wrote them"});
  else
    out.push_back({"memory", memory, false,
                   "no memory cgroup on this host: " + (mem ? mem->reason : std::string("not probed"))});
  if (o.default_pids == 0)
    out.push_back({"pids", 0, false, "serve --default-pids 0: no process bound without --pids"});
  else
    out.push_back({"pids", o.default_pids, true, "RLIMIT_NPROC in the command's own user namespace"});
  const LayerReport* tmp = find_layer(host.layers(), Layer::temp_size);
  out.push_back({"temp-size", o.temp_size, tmp && tmp->available,
                 tmp ? tmp->reason : std::string("layer temp-size not probed")});
  out.push_back({"timeout", static_cast<std::uint64_t>(limits::kDefaultTimeout.count()), true,
                 "the supervisor stops the command (SIGTERM, then SIGKILL after the grace period)"});
  out.push_back({"max-output", limits::kDefaultMaxOutput, true,
                 "stdout and stderr together; past it the command is killed (status output_limit)"});
  return out;
}

std::uint64_t host_memory() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page) : 0;
}

Status validate(const ServerOptions& o) {
  if (o.socket_path.empty()) return Status::invalid("no socket path");
  if (o.socket_path[0] != '/') return Status::invalid("socket path must be absolute: " + o.socket_path);
  if (o.max_connections < 1 || o.max_connections > 65536)
    return Status::invalid("--max-connections must be between 1 and 65536");
  if (o.max_connections_per_uid < 1 || o.max_connections_per_uid > 65536)
    return Status::invalid("--max-connections-per-uid must be between 1 and 65536");
  if (o.hello_timeout.count() < 100 || o.hello_timeout > std::chrono::minutes(10))
    return Status::invalid("--hello-timeout must be between 100ms and 10m");
  if (o.default_pids > cap_limits::kMaxPids)
    return Status::invalid("--default-pids must be between 0 (none) and " + std::to_string(cap_limits::kMaxPids));
  if (o.default_memory && *o.default_memory != 0 &&
      (*o.default_memory < cap_limits::kMinMemory || *o.default_memory > cap_limits::kMaxMemory))
    return Status::invalid("--default-memory must be 0 (none) or between " + format_size(cap_limits::kMinMemory) +
                           " and " + format_size(cap_limits::kMaxMemory));
  if (o.temp_size != 0 && (o.temp_size < limits::MiB || o.temp_size > limits::kMaxTempSize))
    return Status::invalid("--temp-size must be 0 (unbounded host directories) or between 1M and " +
                           format_size(limits::kMaxTempSize));
  if (o.max_worker_queued < 64 * 1024 || o.max_worker_queued > limits::GiB)
    return Status::invalid("--max-worker-queued must be between 64K and 1G");
  if (o.prepare_after > 1000) return Status::invalid("--prepare-after must be between 0 (never) and 1000");
  if (o.max_in_flight < 1 || o.max_in_flight > 65536)
    return Status::invalid("--max-in-flight must be between 1 and 65536");
  if (o.max_queued < 64 * 1024 || o.max_queued > limits::GiB)
    return Status::invalid("--max-queued must be between 64K and 1G");
  if (o.max_frame < proto::kMinMaxFrame || o.max_frame > proto::kMaxMaxFrame)
    return Status::invalid("--max-frame must be between " + format_size(proto::kMinMaxFrame) + " and " +
                           format_size(proto::kMaxMaxFrame));
  if (o.authorization_deadline.count() < 1 || o.authorization_deadline > std::chrono::hours(1))
    return Status::invalid("--authorization-deadline must be between 1ms and 1h");
  if (o.max_timeout.count() < 1 || o.max_timeout > limits::kMaxTimeout)
    return Status::invalid("--max-timeout must be between 1ms and " + format_duration(limits::kMaxTimeout));
  return {};
}

Status serve(const ServerOptions& options_in) {
  ServerOptions options = options_in;
  if (Status st = validate(options); !st.ok()) return st;
  if (options.temp_root.empty()) {
    const char* t = std::getenv("TMPDIR");
    options.temp_root = (t && *t == '/') ? t : "/tmp";
  }
  const bool shared = !options.allow_uids.empty();
  const std::string dir = std::filesystem::path(options.socket_path).parent_path().string();
  // What crashed supervisors left behind (their sandboxes ended with them: the death pipe).
  const std::string registry = instance_registry_dir();
  for (const auto& line : clean_dead_instances(registry)) spdlog::info("crash cleanup: {}", line);
  // Our own record, destroyed last (after the temp dir and the cgroups it lists are gone).
  std::optional<InstanceRecord> record;
  // Declared before the Context: everything the Context owns (background records, workers,
  // scopes, their timers and descriptors) belongs to this io_context and must die first.
  asio::io_context io(1);
  // Scope temp dirs live in a directory of our own (0711: nobody can list it), masked in
  // every sandbox like the socket dir, so that no command sees another scope's temp dir.
  std::string base = options.temp_root + "/corral-" + std::to_string(::getpid()) + "-XXXXXX";
  if (::mkdtemp(base.data()) == nullptr) return Status::from_errno("mkdtemp", errno, base);
  ::chmod(base.c_str(), 0711);
  // Canonical (no symlink, no "//"), as every path a request names is once resolved: the temp
  // dirs under it, the file tools' checks and refuse_hidden() compare it with those.
  {
    std::error_code ec;
    auto canonical = std::filesystem::canonical(base, ec);
    if (!ec) base = canonical.string();
  }
  struct RemoveBase {
    std::string path;
    ~RemoveBase() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  } remove_base{base};
  if (auto r = InstanceRecord::create(registry, std::filesystem::path(base).filename().string()); r.ok()) {
    record.emplace(std::move(r).value());
    if (Status st = record->add("temp", base); !st.ok()) spdlog::warn("{}", st.message());
  } else {
    spdlog::warn("no crash-cleanup record ({}): if this supervisor crashes, the next one will not remove its "
                 "temp dir and cgroups",
                 r.status().message());
  }
  options.temp_root = base;
  options.hidden_paths.push_back(base);
  if (Status st = prepare_directory(dir, shared); !st.ok()) return st;
  UniqueFd lock_fd;
  if (Status st = claim_path(options.socket_path, lock_fd); !st.ok()) return st;
  // SIGTERM and SIGINT are ours from before the socket listens: a client may connect (and a
  // stop may come) before the server is started; a signal that comes early waits for it.
  asio::signal_set signals(io, SIGINT, SIGTERM);
  auto listen_fd = listen_on(options.socket_path, shared);
  if (!listen_fd.ok()) return listen_fd.status();

  // A peer that vanishes mid-write must not kill us.
  ::signal(SIGPIPE, SIG_IGN);

  Context ctx;
  ctx.blocking = std::make_unique<BlockingPool>(2);
  // Both cores launch: a launch is mostly waiting for its child's setup.
  ctx.launcher = std::make_unique<BlockingPool>(std::max(2u, std::thread::hardware_concurrency()));
  ctx.admission = std::make_unique<BlockingPool>(1);
  // Background work (teardowns, spare namespaces) yields the CPU to launches.
  ctx.teardown = std::make_unique<BlockingPool>(1, 10);
  options.hidden_paths.push_back(dir);
  options.hidden_paths.push_back(registry);
  // As a root resolves (canonical: no symlink), for refuse_hidden() to compare.
  for (auto& h : options.hidden_paths) {
    std::error_code ec;
    auto canonical = std::filesystem::weakly_canonical(h, ec);
    if (!ec) h = canonical.string();
  }
  ctx.options = options;
  HostOptions host_options;
  host_options.sandbox_uid = options.sandbox_uid;
  host_options.allow_supplementary_groups = options.allow_supplementary_groups;
  host_options.sandbox_gid = options.sandbox_gid;
  host_options.hidden_paths = options.hidden_paths;
  host_options.temp_root = options.temp_root;
  host_options.temp_size = options.temp_size;
  host_options.default_pids = options.default_pids;
  host_options.default_memory = options.default_memory.value_or(limits::default_memory_for(host_memory()));
  host_options.own_temp_root = true;  // `base`, made above
  // Each cgroup dir is in the record before it exists: a supervisor killed while it probes
  // leaves nothing its successor would not find.
  if (record)
    host_options.before_cgroup_mkdir = [&record](const std::string& group) {
      if (Status st = record->add("cgroup", group); !st.ok()) spdlog::warn("{}", st.message());
    };
  ctx.host = SandboxHost::create(host_options);
  ctx.layers = probe_host();
  for (const auto& l : ctx.host->layers()) {
    ctx.layers.push_back(l);
    if (!l.available) spdlog::warn("layer {} is not available: {}", l.name, l.reason);
  }

  ctx.defaults = default_bounds(options, *ctx.host);
  for (const auto& d : ctx.defaults)
    if (!d.enforced) spdlog::warn("default bound {} is not enforced: {}", d.name, d.how);

  ctx.scopes = std::make_unique<ScopeRegistry>(options.temp_root, ctx.host.get(), ctx.teardown->submitter(),
                                               options.prepare_after);
  ctx.teardown->submit([host = ctx.host.get()] {
    host->refill_network_namespaces(kSpareNetworkNamespaces);
    host->refill_default_groups(limits::kSpareDefaultGroups);
  });
  ctx.background = std::make_unique<BackgroundTable>(io);
  Server server(io, ctx, std::move(listen_fd).value(), signals);
  server.start();
  spdlog::info("corral supervisor pid {} serving {} (max frame {}, max connections {} ({} per uid), max in flight {})",
               ::getpid(), options.socket_path, format_size(options.max_frame), options.max_connections,
               std::min(options.max_connections_per_uid, options.max_connections), options.max_in_flight);
  // The event loop answers every client; on a busy host (two cores, eight clients launching)
  // it waited behind launches and commands for a CPU. Its own thread only, and best effort
  // (needs CAP_SYS_NICE): the pools and the sandboxes they clone keep the default niceness.
  if (::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), kLoopNice) < 0)
    spdlog::debug("event loop stays at the default priority: {}", std::strerror(errno));
  io.run();
  ::unlink(options.socket_path.c_str());
  ::unlink((options.socket_path + ".lock").c_str());
  spdlog::info("stopped; socket removed");
  return {};
}

}  // namespace corral::supervisor
