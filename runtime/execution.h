// Execution: one command run by the process engine, asynchronously on an Asio io_context.
//
// The engine spawns the command (spawn.h), drains stdout and stderr concurrently through
// 1 MiB pipes, hands every kept chunk to an OutputSink, enforces the output cap and the
// deadline, and reaps the child through its pidfd. Its outcome, whatever it is (a setup
// failure included), arrives once through the DoneHandler as a Result.
//
// Asio stays out of this header: the io_context is only forward-declared.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/limits.h"
#include "runtime/policy.h"
#include "runtime/result.h"
#include "runtime/status.h"

namespace asio {
class io_context;
}

namespace corral {

class SandboxHost;

struct ExecSpec {
  std::vector<std::string> argv;                // exactly one of argv and shell
  std::optional<std::string> shell;             // run as /bin/sh -c STRING
  std::vector<std::pair<std::string, std::string>> env;  // the child's whole environment,
                                                // plus PATH, HOME, TMPDIR defaults if absent
  std::string cwd;                              // empty: temp_dir
  std::string temp_dir;                         // the scope's private dir (HOME, TMPDIR)
  std::optional<std::string> stdin_data;        // absent: stdin is /dev/null
  std::chrono::milliseconds timeout = limits::kDefaultTimeout;  // zero: no deadline
  std::chrono::milliseconds grace = limits::kDefaultGrace;      // SIGTERM -> SIGKILL
  std::uint64_t max_output = limits::kDefaultMaxOutput;         // stdout+stderr, bytes
  bool retain_output = true;  // keep output in Result::out/err (the sink sees it anyway)
  bool unlimited_output = false;  // no cap (workers: their sink keeps a bounded log)
  // An extra fd placed at fd 3 in the child (a worker's socketpair end). The execution owns
  // it from start() on and closes it once the child is spawned (or never will be).
  int extra_fd = -1;
  // Workers (sandboxed only): the program exactly as it was checked, executed by descriptor
  // (execveat with AT_EMPTY_PATH) instead of by argv[0]'s name, which inside the view may
  // name something else (/tmp is the scope's temp dir); and an interpreter script, opened when
  // it was checked, placed at fd 4 (its argv names /dev/fd/4). Shared: a worker's restart runs
  // the same files.
  std::shared_ptr<UniqueFd> program_fd;
  std::shared_ptr<UniqueFd> script_fd;

  // Isolation (sandbox.h). With a policy the command runs in its own namespaces on `host`;
  // it sees temp_dir as /tmp, which is then its default cwd, HOME and TMPDIR. Without one
  // it runs bare (only the engine's own tests do that).
  std::optional<Policy> policy;
  const SandboxHost* host = nullptr;
  std::string cgroup_name;  // unique per command, e.g. "cmd-42"
  int netns_fd = -1;        // network denied: the scope's network namespace (borrowed), -1 fresh
  // The scope's prepared sandboxes (runtime/prepared.h), which decide whether the command starts
  // from one; none (or gone with a closed scope): every launch as usual. Weak: a spec outlives
  // its launch (a background command's record), and the servers go when the scope closes.
  std::weak_ptr<class PreparedSandboxes> prepared;
  // Sandboxed only: runs first on the launch's thread (see `offload`) and may fill temp_dir and
  // netns_fd, which nothing reads before the launch. The supervisor makes a new scope's temp
  // dir (a mount) and network namespace there, not on its event loop. A failure is the
  // command's setup error.
  std::function<Status(ExecSpec&)> before_launch;

  // Where a sandboxed launch runs (SandboxHost::launch: clone, id maps, and the wait for the
  // child's setup until exec, about a millisecond): handed to `offload`, which runs it on
  // another thread; its outcome comes back on the io_context's thread. Empty: right here, on
  // the io_context's thread (the engine's own tests). The host must outlive the launch.
  std::function<void(std::function<void()>)> offload;
  // Where the command's cgroup is torn down once it has ended (stragglers killed, up to about a
  // second, then the rmdirs). Empty: right here, on the io_context's thread.
  std::function<void(std::function<void()>)> teardown;

  // Authorized launch (sandboxed only): the command is prepared up to exec, then
  // `on_prepared` runs (on the io_context's thread) and nothing executes until authorize().
  bool hold_for_authorization = false;
  std::function<void()> on_prepared;
};

// Checks a spec against the limits in limits.h; the message names the field and the limit.
Status validate(const ExecSpec& spec);
// The exact environment the child gets, as "NAME=value" strings.
std::vector<std::string> child_environment(const ExecSpec& spec);

// Receives each chunk of kept output, in the order read. Called on the io_context's thread.
using OutputSink = std::function<void(StreamId, std::string_view)>;
using DoneHandler = std::function<void(Result)>;

class Execution {
 public:
  // Starts `spec` on `io` (the spawn itself happens on the io_context's thread). `done` is
  // called exactly once, never from inside start(). The command belongs to the returned
  // handle: destroying the handle terminates it (SIGKILL to its process group); `done` is
  // still called once it is reaped.
  static Execution start(asio::io_context& io, ExecSpec spec, OutputSink sink, DoneHandler done);

  Execution() = default;
  Execution(Execution&&) noexcept;
  Execution& operator=(Execution&&) noexcept;
  ~Execution();

  // Cancel gracefully: SIGTERM to the group, the spec's grace period, then SIGKILL.
  void stop();
  // Cancel now: SIGKILL to the group. Idempotent; also after stop().
  void terminate();
  // Back-pressure: while paused the engine reads no more output (the child blocks on a full
  // pipe). Deadlines and caps still apply.
  void pause_output();
  void resume_output();
  // Authorized launch: lets a prepared command exec (grant), or ends it unlaunched. Only the
  // first call counts; `reason` explains a denial in the result's message.
  void authorize(bool grant, const std::string& reason = {});

  bool finished() const;
  pid_t pid() const;  // -1 before the spawn or after a setup error

  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace corral
