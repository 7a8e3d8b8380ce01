// The `corral` subcommands. main.cc parses arguments (CLI11) into these option structs;
// each run_* returns the process exit status (docs/design.md "Results and exit codes").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/policy.h"
#include "supervisor/server.h"
#include "worker_proto/client.h"

namespace corral::cli {

// Exit statuses of every command but exec.
inline constexpr int kOk = 0;
inline constexpr int kFailed = 1;
inline constexpr int kUsage = 2;
// exec: corral itself failed (a usage error, no supervisor, a refused request).
inline constexpr int kExecCorralFailed = 125;

// Option values arrive typed and bounds-checked from main.cc's CLI11 validators
// (tools/options.h); an absent std::optional means "not given" (the supervisor's default).
struct ExecOptions {
  std::string socket;
  std::vector<std::string> argv;
  std::optional<std::string> shell;           // --sh
  std::optional<std::uint64_t> timeout_ms, grace_ms, max_output;  // ms, ms, bytes
  std::vector<std::string> env;               // NAME=VALUE
  std::string cwd;
  std::string stdin_file;                     // "-" reads corral's own stdin
  bool json = false;
  // Isolation
  std::optional<Mode> mode;
  std::optional<Network> net;
  std::vector<std::string> workspaces, deny_read, protect, binds, allow_sockets;
  std::optional<std::uint64_t> memory, pids, cpu_time_ms, max_file_size;  // bytes, count, ms, bytes
  std::optional<double> cpus;
  std::string scope;
  bool background = false;
  std::string authorize_cmd;  // run with the description on stdin; exit 0 grants
};

struct FileOptions {
  std::string socket;
  std::string path;
  std::vector<std::string> workspaces;
  std::optional<Mode> mode;
  std::optional<std::uint64_t> offset, max_bytes;  // read, bytes
  bool binary = false;                             // read, write
  bool json = false;                               // ls
  std::optional<std::uint32_t> max_entries;        // ls
  std::string scope;
};

struct ScopeOptions {
  std::string socket;
  std::string id;         // close
  std::string parent;     // create
  // Not given: the parent's (top level: workspace-write, denied, no caps). A ceiling for
  // everything that runs in the scope (docs/threat-model.md "Scopes narrow").
  std::optional<Mode> mode;
  std::optional<Network> net;
  std::vector<std::string> workspaces, deny_read, protect;
  std::optional<std::uint64_t> memory, pids, cpu_time_ms, max_file_size;  // bytes, count, ms, bytes
  std::optional<double> cpus;
  bool json = false;      // list
};

struct BackgroundOptions {
  std::string socket;
  std::string id;
  bool force = false;     // stop
  bool json = false;      // poll
};

struct StatusOptions {
  std::string socket;
  bool json = false;
};

struct CallOptions {
  std::string socket;
  std::string json;
  std::optional<std::uint64_t> timeout_ms;
};

// --sandbox-uid: a uid number or a user name -> (uid, gid); refuses 0.
StatusOr<std::pair<uid_t, gid_t>> lookup_sandbox_user(const std::string& text);

// The ordinary log goes to stderr at `log_level`; the audit lines to `audit_log` (stderr when
// empty) at every level.
int run_serve(supervisor::ServerOptions options, const std::string& log_level, const std::string& audit_log);
int run_exec(const ExecOptions& options);
int run_status(const StatusOptions& options);
int run_call(const CallOptions& options);
struct WorkerOptions {
  std::string socket;
  std::string name, scope;
  std::vector<std::string> argv;  // start: /ABS/PATH ARGS...
  bool python = false;
  std::optional<Mode> mode;
  std::optional<Network> net;
  std::vector<std::string> workspaces, allow_sockets;
  std::optional<std::uint64_t> memory, pids, idle_timeout_ms;  // bytes, count, ms
  std::optional<double> cpus;
  std::optional<std::string> request;           // eval; absent: read stdin
  std::optional<std::uint64_t> timeout_ms;      // eval
  std::string host_cmd;                         // eval
  bool reset = false;
  bool force = false;  // stop
  bool json = false;   // list
};

int run_worker_start(const WorkerOptions& options);
int run_worker_eval(const WorkerOptions& options);
int run_worker_stop(const WorkerOptions& options);
int run_worker_list(const WorkerOptions& options);
int run_worker_logs(const WorkerOptions& options);
int run_scope_create(const ScopeOptions& options);
int run_scope_close(const ScopeOptions& options);
int run_scope_list(const ScopeOptions& options);
int run_poll(const BackgroundOptions& options);
int run_stop(const BackgroundOptions& options);
int run_read(const FileOptions& options);
int run_write(const FileOptions& options);
int run_ls(const FileOptions& options);

// Prints "corral: MESSAGE" to stderr and returns `code`.
int complain(int code, const std::string& message);
// Writes all of `data` to `fd` unbuffered (output reaches a terminal or file as it comes).
void write_all(int fd, std::string_view data);
// A path typed relative to the caller's cwd, made absolute (the supervisor has another cwd).
std::string absolute(const std::string& path);
// Reads `name` ("-": corral's own stdin) up to `limit` bytes and no further; nullopt with a
// message naming `what` for a directory, an open or read error, or a source past the limit.
std::optional<std::string> read_input(const std::string& name, std::size_t limit, const std::string& what,
                                      std::string& error);
// The wire's Mode and Network for a mode or network given on the command line. Not given
// stays absent on the wire: the scope's (docs/threat-model.md "Scopes narrow").
std::optional<proto::Mode> wire_mode(std::optional<Mode> mode);
std::optional<proto::Network> wire_network(std::optional<Network> net);
// Connects, sends one request with id 1 and waits for its final reply. On an Error reply or a
// failure prints the message and returns kFailed; else kOk with `reply` filled.
// Runs CMD with /bin/sh -c, `input` on its stdin; true if it exits 0, with its stdout.
bool run_shell(const std::string& cmd, std::string_view input, std::string& output, std::string& error);
int request(const std::string& socket, const proto::Frame& frame, proto::Received& reply);

}  // namespace corral::cli
