#include "runtime/execution.h"
#include "runtime/prepared.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/posix/stream_descriptor.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>
#include <array>
#include <mutex>

#include "runtime/sandbox.h"
#include "runtime/spawn.h"
#include "runtime/unique_fd.h"

namespace corral {

namespace {

using asio::awaitable;
using Clock = std::chrono::steady_clock;
constexpr auto use_tuple = asio::experimental::as_tuple(asio::use_awaitable);
// How long an ended command's output waits in its pipes for a paused reader (arm_linger).
constexpr std::chrono::hours kPausedLinger{1};

bool has_nul(std::string_view s) { return s.find('\0') != std::string_view::npos; }

struct Pipe {
  UniqueFd read, write;
};

// A launch in progress: the child's spec and the descriptors it gets, held until the launch
// has returned (it may run on another thread: ExecSpec::offload).
struct Launch {
  SpawnSpec ss;
  Pipe out_pipe, err_pipe;
  UniqueFd stdin_read, stdin_write, extra;
  StatusOr<SandboxLaunch> sandbox = Status::invalid("not launched");
};

StatusOr<Pipe> make_pipe(bool enlarge) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) < 0) return Status::from_errno("pipe", errno);
  Pipe p{UniqueFd(fds[0]), UniqueFd(fds[1])};
  // May fail past /proc/sys/fs/pipe-max-size for an unprivileged user: the pipe still works.
  if (enlarge) ::fcntl(p.read.get(), F_SETPIPE_SZ, limits::kPipeBytes);
  return p;
}

}  // namespace

Status validate(const ExecSpec& spec) {
  if (spec.shell && !spec.argv.empty()) return Status::invalid("give argv or a shell string, not both");
  if (!spec.shell && spec.argv.empty()) return Status::invalid("no command: argv is empty");
  if (spec.shell && spec.shell->empty()) return Status::invalid("the shell string is empty");
  if (!spec.shell && spec.argv[0].empty()) return Status::invalid("argv[0] is empty");
  for (const auto& a : spec.argv)
    if (has_nul(a)) return Status::invalid("an argv entry contains a NUL byte");
  if (spec.shell && has_nul(*spec.shell)) return Status::invalid("the shell string contains a NUL byte");
  for (const auto& [name, value] : spec.env) {
    if (name.empty() || name.find('=') != std::string::npos || has_nul(name))
      return Status::invalid("bad environment variable name '" + name + "'");
    if (has_nul(value)) return Status::invalid("environment variable " + name + " contains a NUL byte");
  }
  if (has_nul(spec.cwd)) return Status::invalid("cwd contains a NUL byte");
  if (spec.timeout.count() < 0 || spec.timeout > limits::kMaxTimeout)
    return Status::invalid("timeout must be between 1ms and " + std::to_string(limits::kMaxTimeout.count()) + "ms");
  if (spec.grace.count() < 0 || spec.grace > limits::kMaxGrace)
    return Status::invalid("grace must be between 0 and " + std::to_string(limits::kMaxGrace.count()) + "ms");
  if (!spec.unlimited_output && (spec.max_output == 0 || spec.max_output > limits::kMaxOutput))
    return Status::invalid("max output must be between 1 byte and " + std::to_string(limits::kMaxOutput) + " bytes (64M)");
  if (spec.stdin_data && spec.stdin_data->size() > limits::kMaxStdin)
    return Status::invalid("stdin is over the " + std::to_string(limits::kMaxStdin) + "-byte limit");
  return {};
}

std::vector<std::string> child_environment(const ExecSpec& spec) {
  std::vector<std::string> env;
  bool path = false, home = false, tmpdir = false;
  for (const auto& [name, value] : spec.env) {
    // A repeated name: the last one wins, as with `env A=1 A=2`.
    std::string prefix = name + "=";
    std::erase_if(env, [&](const std::string& e) { return e.rfind(prefix, 0) == 0; });
    env.push_back(prefix + value);
    path |= name == "PATH";
    home |= name == "HOME";
    tmpdir |= name == "TMPDIR";
  }
  if (!path) env.emplace_back("PATH=/usr/local/bin:/usr/bin:/bin");
  // Inside a sandbox the scope's temp dir is seen as /tmp.
  const std::string temp = spec.policy ? std::string("/tmp") : spec.temp_dir;
  if (!temp.empty()) {
    if (!home) env.push_back("HOME=" + temp);
    if (!tmpdir) env.push_back("TMPDIR=" + temp);
  }
  return env;
}

struct Execution::State : std::enable_shared_from_this<State> {
  State(asio::io_context& io_, ExecSpec spec_, OutputSink sink_, DoneHandler done_)
      : io(io_), spec(std::move(spec_)), sink(std::move(sink_)), done(std::move(done_)),
        out(io), err(io), pidfd(io), stdin_w(io), deadline(io), grace_timer(io), gate(io),
        linger(io), cpu_poll(io) {
    gate.expires_at(Clock::time_point::max());
  }
  ~State() {
    if (spec.extra_fd >= 0) ::close(spec.extra_fd);
  }

  asio::io_context& io;
  ExecSpec spec;
  OutputSink sink;
  DoneHandler done;
  Process process;
  std::optional<SandboxLaunch> sandbox;  // set for sandboxed commands
  asio::posix::stream_descriptor out, err, pidfd, stdin_w;
  asio::steady_timer deadline, grace_timer, gate, linger, cpu_poll;
  Clock::time_point started;
  std::optional<ExitStatus> decided;  // first decision wins
  ExitInfo exit;
  Result result;
  std::uint64_t kept = 0;
  int parts = 0;  // running coroutines (2 readers + exit watcher)
  bool spawned = false, paused = false, output_closed = false, finished = false;
  bool releasing = false;  // an authorized launch's release runs off the loop (authorize)
  bool finish_pending = false;  // the command ended while its release ran: finish after it
  bool cancelled_before_spawn = false, sigkilled = false;

  void decide(ExitStatus s) {
    if (!decided) decided = s;
  }
  // Stopped or ended by its owner (a cancel, a closed connection or scope): no reader comes back.
  bool decided_cancelled() const { return decided && *decided == ExitStatus::cancelled; }

  // Ends the process group: SIGKILL now, or SIGTERM then SIGKILL after the grace period.
  void kill_tree(bool graceful) {
    if (!spawned || process.reaped()) return;
    if (!graceful || spec.grace.count() == 0) {
      sigkilled = true;
      process.signal_group(SIGKILL);
      if (sandbox && sandbox->cgroup) sandbox->cgroup->kill();
      return;
    }
    process.signal_group(SIGTERM);
    grace_timer.expires_after(spec.grace);
    grace_timer.async_wait([self = shared_from_this()](std::error_code ec) {
      if (!ec && !self->process.reaped()) self->kill_tree(/*graceful=*/false);
    });
  }

  void cancel(bool graceful) {
    if (finished) return;
    if (!spawned) {
      cancelled_before_spawn = true;
      decide(ExitStatus::cancelled);
      return;
    }
    if (process.reaped()) {
      // Nothing left to stop but what its pipes still hold (a paused reader's): that goes
      // now, so the command finishes whether or not its reader ever comes back.
      close_output();
      return;
    }
    decide(ExitStatus::cancelled);
    if (graceful && grace_timer.expiry() > Clock::now()) return;  // already stopping
    kill_tree(graceful);
  }

  void close_output() {
    output_closed = true;
    std::error_code ignored;
    out.close(ignored);
    err.close(ignored);
    gate.cancel();
  }

  void set_paused(bool p) {
    if (p == paused) return;
    paused = p;
    if (!p) gate.cancel();
    if (spawned && process.reaped() && !output_closed && !finished) arm_linger();
  }

  // Accounts one read: keeps what fits under the cap, hands it to the sink, and on the first
  // byte past the cap kills the tree.
  void take(StreamId id, const char* data, std::size_t n) {
    if (output_closed) return;
    if (spec.unlimited_output) {
      if (sink) sink(id, std::string_view(data, n));
      return;
    }
    std::uint64_t room = spec.max_output - kept;
    std::size_t keep = static_cast<std::size_t>(std::min<std::uint64_t>(room, n));
    if (keep > 0) {
      kept += keep;
      std::string_view chunk(data, keep);
      if (id == StreamId::out) {
        result.out_bytes += keep;
        if (spec.retain_output) result.out.append(chunk);
      } else {
        result.err_bytes += keep;
        if (spec.retain_output) result.err.append(chunk);
      }
      if (sink) sink(id, chunk);
    }
    if (keep < n) {
      result.output_truncated = true;
      decide(ExitStatus::output_limit);
      result.message = "output exceeded the " + std::to_string(spec.max_output) + "-byte cap";
      kill_tree(/*graceful=*/false);
      close_output();
    }
  }

  awaitable<void> read_stream(StreamId id) {
    auto self = shared_from_this();
    auto& desc = id == StreamId::out ? out : err;
    std::array<char, limits::kReadChunk> buf;
    for (;;) {
      while (paused && !output_closed) co_await gate.async_wait(use_tuple);
      if (output_closed || !desc.is_open()) break;
      auto [ec, n] = co_await desc.async_read_some(asio::buffer(buf), use_tuple);
      if (n > 0) take(id, buf.data(), n);
      if (ec) break;  // eof, or closed by close_output()
    }
  }

  awaitable<void> watch_exit() {
    auto self = shared_from_this();
    co_await pidfd.async_wait(asio::posix::descriptor_base::wait_read, use_tuple);
    // The leader is a zombie now, which keeps the group id reserved: kill what it left
    // behind before reaping it.
    process.signal_group(SIGKILL);
    process.reap(exit, /*block=*/true);
    cpu_poll.cancel();
    if (sandbox) account_sandbox();
    result.wall_ms = static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started).count());
    deadline.cancel();
    grace_timer.cancel();
    std::error_code ignored;
    stdin_w.close(ignored);
    arm_linger();
  }

  // Once the command has ended, output still buffered in the pipes is drained; a descendant
  // that escaped the group and holds a pipe open gets the grace period, then the pipes are
  // closed. While output is paused (back-pressure) what the pipes hold is the reader's, who
  // will come back for it (a background command's poll): it gets up to an hour, and the clock
  // starts again when it resumes. Stopping or ending the command closes them at once.
  void arm_linger() {
    const bool reader_returns = paused && !decided_cancelled();
    linger.expires_after(reader_returns ? kPausedLinger : std::max(spec.grace, std::chrono::milliseconds(100)));
    linger.async_wait([self = shared_from_this()](std::error_code ec) {
      if (!ec) self->close_output();
    });
  }

  // What init reported (the command's own exit and usage) and what the cgroup measured.
  void account_sandbox() {
    const bool reported = sandbox->read_report(exit);
    if (!sandbox->cgroup) return;
    CgroupUsage usage = sandbox->cgroup->usage();
    // init was killed before it could report (a cap or a SIGKILL): the cgroup still counted.
    if (!reported && usage.cpu_user_ns && usage.cpu_system_ns) {
      exit.user_cpu_ms = *usage.cpu_user_ns / 1'000'000;
      exit.sys_cpu_ms = *usage.cpu_system_ns / 1'000'000;
    }
    if (usage.memory_peak_bytes) result.memory_peak_kb = *usage.memory_peak_bytes / 1024;
    if (usage.oom_killed) {
      decide(ExitStatus::memory_limit);
      if (result.message.empty()) result.message = "the memory cap's OOM killer ended it";
    }
    if (spec.policy->caps.cpu_time && usage.cpu_usage_ns &&
        *usage.cpu_usage_ns >= static_cast<std::uint64_t>(spec.policy->caps.cpu_time->count()) * 1'000'000) {
      decide(ExitStatus::cpu_limit);
      if (result.message.empty())
        result.message = "CPU time exceeded " + std::to_string(spec.policy->caps.cpu_time->count()) + "ms";
    }
    // Kills stragglers (waiting up to ~1 s for them) and removes the group, off the loop. The
    // job holds no work on the loop; a supervisor that stops drains its pools before its host
    // goes (supervisor/context.h).
    if (spec.teardown) {
      std::shared_ptr<Cgroup> group(std::move(sandbox->cgroup));
      // A spare takes its place (the next command's launch then makes none).
      spec.teardown([group, host = spec.host]() mutable {
        group.reset();
        if (host) host->refill_default_groups(limits::kSpareDefaultGroups);
      });
    } else {
      sandbox->cgroup.reset();
    }
  }

  // --cpu-time counts the whole tree: poll the cgroup's CPU usage.
  void arm_cpu_poll() {
    cpu_poll.expires_after(std::chrono::milliseconds(50));
    cpu_poll.async_wait([self = shared_from_this()](std::error_code ec) {
      if (ec || self->process.reaped() || !self->sandbox || !self->sandbox->cgroup) return;
      auto used = self->sandbox->cgroup->usage().cpu_usage_ns;
      const auto limit_ns = static_cast<std::uint64_t>(self->spec.policy->caps.cpu_time->count()) * 1'000'000;
      if (used && *used >= limit_ns) {
        self->decide(ExitStatus::cpu_limit);
        self->result.message = "CPU time exceeded " + std::to_string(self->spec.policy->caps.cpu_time->count()) + "ms";
        self->kill_tree(/*graceful=*/false);
        return;
      }
      self->arm_cpu_poll();
    });
  }

  awaitable<void> write_stdin() {
    auto self = shared_from_this();
    co_await asio::async_write(stdin_w, asio::buffer(*spec.stdin_data), use_tuple);
    std::error_code ignored;
    stdin_w.close(ignored);
  }

  void part_done() {
    if (--parts == 0) finish();
  }

  void finish() {
    // An authorized launch's release still under way on the pool: its outcome (launched or
    // not) belongs in the result, so the finish waits for it (released()).
    if (releasing) {
      finish_pending = true;
      return;
    }
    finished = true;
    linger.cancel();
    deadline.cancel();
    grace_timer.cancel();
    cpu_poll.cancel();
    std::error_code ignored;
    stdin_w.close(ignored);
    result.temp_dir = spec.temp_dir;
    result.policy = spec.policy;
    if (spawned) {
      result.exit_code = exit.exited ? std::optional<int>(exit.exit_code) : std::nullopt;
      result.signal = exit.signal;
      result.user_cpu_ms = exit.user_cpu_ms;
      result.sys_cpu_ms = exit.sys_cpu_ms;
      result.max_rss_kb = exit.max_rss_kb;
      if (decided) result.status = *decided;
      else result.status = exit.exited ? ExitStatus::exited : ExitStatus::signaled;
    }
    // A finished command holds no descriptor: a handle kept for its result (a background
    // command's record, kept until polled) must not pin its pipes, pidfds or report pipe.
    out.close(ignored);
    err.close(ignored);
    pidfd.close(ignored);
    process.close_pidfd();
    sandbox.reset();
    if (done) {
      auto handler = std::move(done);
      done = nullptr;
      handler(std::move(result));
    }
  }

  void fail_setup(const Status& st) {
    result.status = st.code() == StatusCode::invalid || !cancelled_before_spawn ? ExitStatus::setup_error
                                                                        : ExitStatus::cancelled;
    result.setup_step = st.step();
    result.setup_errno = st.err();
    result.message = st.message();
    result.wall_ms = static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started).count());
    // A failed launch may have taken a spare cgroup (and removed it): one takes its place, as
    // after any command's teardown.
    if (spec.teardown && spec.host)
      spec.teardown([host = spec.host] { host->refill_default_groups(limits::kSpareDefaultGroups); });
    finish();
  }

  void run() {
    started = Clock::now();
    UniqueFd extra(std::exchange(spec.extra_fd, -1));  // the launch closes it once the child has it
    if (cancelled_before_spawn) {
      result.status = ExitStatus::cancelled;
      result.message = "cancelled before it started";
      finish();
      return;
    }
    if (Status st = validate(spec); !st.ok()) return fail_setup(st);
    if (spec.policy && !spec.host) return fail_setup(Status::invalid("a sandbox policy needs a SandboxHost"));
    if (spec.hold_for_authorization && !spec.policy)
      return fail_setup(Status::invalid("an authorized launch needs a sandbox"));

    auto out_pipe = make_pipe(true);
    if (!out_pipe.ok()) return fail_setup(out_pipe.status());
    auto err_pipe = make_pipe(true);
    if (!err_pipe.ok()) return fail_setup(err_pipe.status());
    UniqueFd stdin_read;
    UniqueFd stdin_write;
    if (spec.stdin_data) {
      auto in_pipe = make_pipe(false);
      if (!in_pipe.ok()) return fail_setup(in_pipe.status());
      stdin_read = std::move(in_pipe->read);
      stdin_write = std::move(in_pipe->write);
    } else {
      stdin_read.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
      if (!stdin_read) return fail_setup(Status::from_errno("open", errno, "/dev/null"));
    }

    // What the launch uses, kept (its descriptors open) until it has returned.
    auto l = std::make_shared<Launch>();
    l->out_pipe = std::move(out_pipe).value();
    l->err_pipe = std::move(err_pipe).value();
    l->stdin_read = std::move(stdin_read);
    l->stdin_write = std::move(stdin_write);
    l->extra = std::move(extra);
    SpawnSpec& ss = l->ss;
    ss.argv = spec.shell ? std::vector<std::string>{"/bin/sh", "-c", *spec.shell} : spec.argv;
    ss.env = child_environment(spec);
    ss.cwd = !spec.cwd.empty() ? spec.cwd : spec.policy ? std::string("/tmp") : spec.temp_dir;
    ss.fds = {{l->stdin_read.get(), 0}, {l->out_pipe.write.get(), 1}, {l->err_pipe.write.get(), 2}};
    if (l->extra) ss.fds.push_back({l->extra.get(), 3});
    if (spec.script_fd) ss.fds.push_back({spec.script_fd->get(), 4});
    if (spec.program_fd) {
      if (!spec.policy) return fail_setup(Status::invalid("a program descriptor needs a sandbox"));
      ss.exec_fd = spec.program_fd->get();
    }
    if (!spec.policy) {
      auto proc = spawn(ss);
      if (!proc.ok()) return fail_setup(proc.status());
      process = std::move(proc).value();
      return launched(*l);
    }
    // The launch reads only what nothing changes meanwhile (the spec, the host), and writes
    // only what the loop does not read before the outcome (before_launch: temp_dir, netns_fd); its outcome
    // comes back here, on the io_context's thread, where a cancel may have come first.
    auto self = shared_from_this();
    // The io_context has work while the launch runs elsewhere (its run() must not return).
    auto work = std::make_shared<asio::executor_work_guard<asio::io_context::executor_type>>(io.get_executor());
    auto job = [self, l, work]() mutable {
      ExecSpec& sp = self->spec;
      Status ready = sp.before_launch ? sp.before_launch(sp) : Status{};
      if (!ready.ok())
        l->sandbox = std::move(ready);
      else if (auto prepared = sp.prepared.lock())
        l->sandbox = prepared->launch(l->ss, *sp.policy, sp.temp_dir, sp.cgroup_name, sp.hold_for_authorization,
                                      sp.netns_fd);
      else
        l->sandbox = sp.host->launch(l->ss, *sp.policy, sp.temp_dir, sp.cgroup_name, sp.hold_for_authorization,
                                     sp.netns_fd);
      if (!sp.offload) return;
      // Everything moves on to the loop: the last reference to the execution is never dropped
      // on this thread (its descriptors and timers belong to the loop).
      asio::io_context& loop = self->io;
      asio::post(loop, [self = std::move(self), l = std::move(l), work = std::move(work)] { self->sandbox_launched(*l); });
    };
    if (!spec.offload) {
      job();
      return sandbox_launched(*l);
    }
    spec.offload(std::move(job));
  }

  void sandbox_launched(Launch& l) {
    if (!l.sandbox.ok()) return fail_setup(l.sandbox.status());
    sandbox.emplace(std::move(l.sandbox).value());
    process = std::move(sandbox->init);
    result.enforced = sandbox->enforced;
    launched(l);
  }

  // The child runs (or, held, waits for its release): streams, deadline and exit watch.
  void launched(Launch& l) {
    spawned = true;
    // The parent keeps only its own ends; the child's copies are closed here.
    l.out_pipe.write.reset();
    l.err_pipe.write.reset();
    l.stdin_read.reset();
    l.extra.reset();
    for (int fd : {l.out_pipe.read.get(), l.err_pipe.read.get(), l.stdin_write.get()})
      if (fd >= 0) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    out.assign(l.out_pipe.read.release());
    err.assign(l.err_pipe.read.release());
    // The pidfd stays owned by `process`; Asio only waits on a duplicate.
    pidfd.assign(::fcntl(process.pidfd(), F_DUPFD_CLOEXEC, 3));

    if (spec.hold_for_authorization) {
      result.launched = false;
      if (spec.on_prepared) asio::post(io, [self = shared_from_this()] {
        if (!self->finished && !self->decided && self->spec.on_prepared) self->spec.on_prepared();
      });
    } else {
      arm_deadline();
    }
    if (decided == ExitStatus::cancelled) kill_tree(false);  // cancelled while spawning
    if (sandbox && sandbox->cgroup && spec.policy->caps.cpu_time) arm_cpu_poll();

    auto self = shared_from_this();
    auto on_part = [self](std::exception_ptr) { self->part_done(); };
    parts = 3;
    asio::co_spawn(io, read_stream(StreamId::out), on_part);
    asio::co_spawn(io, read_stream(StreamId::err), on_part);
    asio::co_spawn(io, watch_exit(), on_part);
    if (l.stdin_write) {
      stdin_w.assign(l.stdin_write.release());
      asio::co_spawn(io, write_stdin(), asio::detached);
    }
  }

  void authorize(bool grant, const std::string& reason) {
    if (finished || releasing || !sandbox || !sandbox->held()) return;
    if (!grant) {
      decide(ExitStatus::cancelled);
      result.message = "not launched: " + reason;
      kill_tree(/*graceful=*/false);
      sandbox->release_fd.reset();  // EOF: the prepared command exits without exec
      return;
    }
    // The release waits for the exec (or a setup error), which a stopped init would hold up to
    // limits::kSetupDeadline: off the loop, as the launch itself. It takes the held descriptors
    // with it and shares nothing with the loop meanwhile.
    auto held = std::make_shared<SandboxLaunch>();
    held->release_fd = std::move(sandbox->release_fd);
    held->error_read = std::move(sandbox->error_read);
    held->program = sandbox->program;
    if (!spec.offload) return released(held->release());
    releasing = true;
    auto self = shared_from_this();
    auto work = std::make_shared<asio::executor_work_guard<asio::io_context::executor_type>>(io.get_executor());
    spec.offload([self, held, work]() mutable {
      Status st = held->release();
      asio::io_context& loop = self->io;
      asio::post(loop, [self = std::move(self), st = std::move(st), work = std::move(work)]() mutable {
        self->releasing = false;
        self->released(std::move(st));
      });
    });
  }

  // The release's outcome, back on the loop. The command may have ended meanwhile (a fast
  // command, a cancel, a cap): its finish waited for this (finish_pending).
  void released(Status st) {
    if (finished) return;
    if (!st.ok()) {
      decide(ExitStatus::setup_error);
      result.setup_step = st.step();
      result.setup_errno = st.err();
      result.message = st.message();
      if (!finish_pending) kill_tree(false);
    } else {
      result.launched = true;  // it exec'd, whatever was decided meanwhile
      if (!finish_pending && !decided) arm_deadline();
    }
    if (finish_pending) {
      finish_pending = false;
      finish();
    }
  }

  void arm_deadline() {
    if (spec.timeout.count() > 0) {
      deadline.expires_after(spec.timeout);
      deadline.async_wait([self = shared_from_this()](std::error_code ec) {
        if (ec || self->process.reaped()) return;
        self->result.timed_out = true;
        self->decide(ExitStatus::timed_out);
        self->result.message = "timed out after " + std::to_string(self->spec.timeout.count()) + "ms";
        self->kill_tree(/*graceful=*/true);
      });
    }
  }
};

Execution Execution::start(asio::io_context& io, ExecSpec spec, OutputSink sink, DoneHandler done) {
  // A child that closes its stdin must not kill the supervisor with SIGPIPE; the child
  // itself gets default dispositions back (child_setup.cc).
  static std::once_flag sigpipe_once;
  std::call_once(sigpipe_once, [] { ::signal(SIGPIPE, SIG_IGN); });
  Execution e;
  e.state_ = std::make_shared<State>(io, std::move(spec), std::move(sink), std::move(done));
  asio::post(io, [s = e.state_] { s->run(); });
  return e;
}

Execution::Execution(Execution&&) noexcept = default;
Execution& Execution::operator=(Execution&& o) noexcept {
  if (this != &o) {
    if (state_) state_->cancel(false);
    state_ = std::move(o.state_);
  }
  return *this;
}
Execution::~Execution() {
  if (state_) state_->cancel(false);
}

void Execution::stop() {
  if (state_) state_->cancel(true);
}
void Execution::terminate() {
  if (state_) state_->cancel(false);
}
void Execution::pause_output() {
  if (state_) state_->set_paused(true);
}
void Execution::resume_output() {
  if (state_) state_->set_paused(false);
}
void Execution::authorize(bool grant, const std::string& reason) {
  if (state_) state_->authorize(grant, reason);
}
bool Execution::finished() const { return !state_ || state_->finished; }
pid_t Execution::pid() const { return state_ && state_->spawned ? state_->process.pid() : -1; }

}  // namespace corral
