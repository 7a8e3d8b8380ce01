// The `corral` subcommands. main.cc parses arguments (CLI11) into these option structs;
// each run_* returns the process exit status (DESIGN.md "Results and exit codes").
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "supervisor/server.h"
#include "worker_proto/client.h"

namespace corral::cli {

// Exit statuses of every command but exec.
inline constexpr int kOk = 0;
inline constexpr int kFailed = 1;
inline constexpr int kUsage = 2;
// exec: corral itself failed (no supervisor, request refused).
inline constexpr int kExecCorralFailed = 125;

struct ExecOptions {
  std::string socket;
  std::vector<std::string> argv;
  std::string shell;
  bool has_shell = false;
  std::string timeout, grace, max_output;  // as typed; parsed with units.h
  std::vector<std::string> env;            // K=V
  std::string cwd;
  std::string stdin_file;                  // "-" reads corral's own stdin
  bool json = false;
  // Isolation
  std::string mode = "workspace-write", net = "denied";
  std::vector<std::string> workspaces, deny_read, protect, binds;
  std::string memory, pids, cpu_time, cpus, max_file_size;
  std::string scope;
  bool background = false;
  std::string authorize_cmd;  // run with the description on stdin; exit 0 grants
};

struct FileOptions {
  std::string socket;
  std::string path;
  std::vector<std::string> workspaces;
  std::string mode = "workspace-write";
  std::string offset, max_bytes;  // read
  bool binary = false;            // read, write
  bool json = false;              // ls
  std::string max_entries;        // ls
  std::string scope;
};

struct ScopeOptions {
  std::string socket;
  std::string id;         // close
  std::string parent;     // create
  std::string mode = "workspace-write", net = "denied";
  std::vector<std::string> workspaces;
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
  std::string timeout;
};

// --sandbox-uid: a uid number or a user name -> (uid, gid); refuses 0.
StatusOr<std::pair<uid_t, gid_t>> lookup_sandbox_user(const std::string& text);

int run_serve(supervisor::ServerOptions options, const std::string& log_level);
int run_exec(const ExecOptions& options);
int run_status(const StatusOptions& options);
int run_call(const CallOptions& options);
struct WorkerOptions {
  std::string socket;
  std::string name, scope;
  std::vector<std::string> argv;  // start: /ABS/PATH ARGS...
  bool python = false;
  std::string mode = "workspace-write", net = "denied";
  std::vector<std::string> workspaces;
  std::string memory, pids, cpus, idle_timeout;
  std::string request, timeout, host_cmd;  // eval
  bool has_request = false, reset = false;
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
// "read-only" | "workspace-write" | "danger-full-access" -> the wire's Mode.
bool parse_mode_arg(const std::string& text, proto::Mode& mode, std::string& error);
// "denied" | "allowed" -> the wire's Network.
bool parse_net_arg(const std::string& text, proto::Network& net, std::string& error);
// Connects, sends one request with id 1 and waits for its final reply. On an Error reply or a
// failure prints the message and returns kFailed; else kOk with `reply` filled.
// Runs CMD with /bin/sh -c, `input` on its stdin; true if it exits 0, with its stdout.
bool run_shell(const std::string& cmd, std::string_view input, std::string& output, std::string& error);
int request(const std::string& socket, const proto::Frame& frame, proto::Received& reply);

}  // namespace corral::cli
