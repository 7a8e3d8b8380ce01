// Builders for the messages both sides send, so no caller hand-assembles a FlatBuffer.
// Each returns a complete frame (header + payload) for codec.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "worker_proto/codec.h"

namespace corral::proto {

// A layer of the host capability report (HelloReply, StatusReply).
struct LayerInfo {
  std::string name;
  bool available = false;
  std::string reason;
};

// The fields of an ExecRequest in plain C++. Zero means "the supervisor's default".
struct ExecArgs {
  std::vector<std::string> argv;
  std::optional<std::string> shell;
  std::vector<std::pair<std::string, std::string>> env;
  std::string cwd;
  std::optional<std::string> stdin_data;
  std::uint64_t timeout_ms = 0;
  std::uint64_t grace_ms = 0;
  std::uint64_t max_output_bytes = 0;

  // Isolation (docs/threat-model.md "Policy by mode"); zero caps mean "none" (the scope's, where it
  // has one). Absent mode / network: the scope's.
  std::optional<Mode> mode;
  std::optional<Network> network;
  std::vector<std::string> workspaces, deny_read, protect;
  std::vector<std::string> allow_sockets;  // host Unix sockets reachable from the confining modes
  struct BindArg {
    std::string source, target;
    bool writable = false;
  };
  std::vector<BindArg> binds;
  // Absent: the scope's cap, else the supervisor's default; 0: unlimited, said explicitly.
  std::optional<std::uint64_t> memory_bytes, pids;
  std::uint64_t cpu_time_ms = 0, max_file_size = 0;  // 0: the scope's (or none)
  double cpus = 0;
  std::string scope;        // empty: the connection's scope (background: the uid's default)
  bool background = false;
  bool authorize = false;   // execute_authorized: run only on the client's grant
};

// File tools (ReadRequest, WriteRequest, ListRequest).
struct FileArgs {
  std::string path;
  std::vector<std::string> workspaces;
  std::optional<Mode> mode;                 // absent: the scope's
  std::uint64_t offset = 0, max_bytes = 0;  // read
  bool binary = false;                      // read, write
  std::string data;                         // write
  std::uint32_t max_entries = 0;            // list
  std::string scope;
};

struct ScopeArgs {
  std::string parent;
  bool detach = false;
  std::optional<Mode> mode;        // absent: the parent's (top level: workspace_write)
  std::optional<Network> network;  // absent: the parent's (top level: denied)
  std::vector<std::string> workspaces, deny_read, protect;
  std::optional<std::uint64_t> memory_bytes, pids;   // absent: the parent's; 0: unlimited
  std::uint64_t cpu_time_ms = 0, max_file_size = 0;  // 0: the parent's
  double cpus = 0;
};
// Workers and channels.
struct WorkerStartArgs {
  std::string name, scope;
  std::vector<std::string> argv;  // argv[0]: absolute path of a trusted executable
  bool python = false;            // the shipped Python worker instead of argv
  std::optional<Mode> mode;       // absent: the scope's
  std::optional<Network> network;
  std::vector<std::string> workspaces;
  std::optional<std::uint64_t> memory_bytes, pids;  // absent: the scope's, else the default; 0: unlimited
  std::uint64_t idle_timeout_ms = 0;
  double cpus = 0;
  std::vector<std::string> allow_sockets;  // host Unix sockets it may connect to (confining modes)
};
Frame make_worker_start(std::uint64_t request_id, const WorkerStartArgs& args);

struct WorkerEvalArgs {
  std::string name, scope;
  std::string request;
  std::uint64_t timeout_ms = 0;
  bool reset = false;
  bool serve_host_calls = false;
};
Frame make_worker_eval(std::uint64_t request_id, const WorkerEvalArgs& args);
// WorkerStop, WorkerListRequest (empty scope: every scope of the caller), WorkerLogsRequest.
// The names are written even when empty.
Frame make_worker_stop(std::uint64_t request_id, const std::string& name, const std::string& scope, bool force);
Frame make_worker_list(std::uint64_t request_id, const std::string& scope);
Frame make_worker_logs(std::uint64_t request_id, const std::string& name, const std::string& scope);
// A host reply goes from a client to the supervisor and from the supervisor to its worker
// (`request_id`: the evaluation's number there). An empty `error` is absent: the call succeeded.
Frame make_host_reply(std::uint64_t request_id, std::uint64_t call_id, std::string_view data, std::string_view error = {});
Frame make_authorization(std::uint64_t request_id, bool grant, std::string_view reason = {});

Frame make_scope_create(std::uint64_t request_id, const ScopeArgs& args);
Frame make_scope_close(std::uint64_t request_id, const std::string& id);
Frame make_scope_list(std::uint64_t request_id);
Frame make_poll(std::uint64_t request_id, const std::string& id);
Frame make_background_stop(std::uint64_t request_id, const std::string& id, bool force);
Frame make_read(std::uint64_t request_id, const FileArgs& args);
Frame make_write(std::uint64_t request_id, const FileArgs& args);
Frame make_list(std::uint64_t request_id, const FileArgs& args);

Frame make_hello(std::string_view client_name);
Frame make_hello_reply(std::string_view server_version, const std::vector<LayerInfo>& layers,
                       std::uint32_t max_frame);
Frame make_exec(std::uint64_t request_id, const ExecArgs& args);
Frame make_output(std::uint64_t request_id, Stream stream, std::string_view data);
Frame make_cancel(std::uint64_t request_id, bool force);
Frame make_status_request(std::uint64_t request_id);
// What `corral status` shows about a running supervisor.
// One default bound as status reports it (StatusReply.defaults).
struct BoundInfo {
  std::string name;         // "memory", "pids", "temp-size", "timeout", "max-output"
  std::uint64_t value = 0;  // bytes, count or ms; 0: none
  bool enforced = false;
  std::string how;          // how it is enforced, or why it is not
};

struct StatusInfo {
  std::string server_version;
  std::vector<LayerInfo> layers;
  std::vector<BoundInfo> defaults;
  std::uint32_t pid = 0;
  std::uint64_t uptime_ms = 0;
  std::uint32_t connections = 0;
  std::uint32_t running_commands = 0;
  std::string socket_path;
};
Frame make_status_reply(std::uint64_t request_id, const StatusInfo& info);
Frame make_error(std::uint64_t request_id, ErrorCode code, std::string_view message);

// Replies from the supervisor to its clients.
Frame make_ack(std::uint64_t request_id);
Frame make_scope_created(std::uint64_t request_id, const std::string& id, const std::string& temp_dir);

// One row of ScopeList, as it reports a scope.
struct ScopeListEntry {
  std::string id;
  std::string parent;  // empty: a top-level scope
  std::uint32_t owner_uid = 0;
  bool detached = false;
  Mode mode = Mode::workspace_write;
  Network network = Network::denied;
  std::vector<std::string> workspaces, deny_read, protect;
  std::string temp_dir;        // empty: not created yet
  std::uint32_t background = 0;  // background commands it holds
  std::uint32_t workers = 0;
  std::optional<std::uint64_t> memory_bytes, pids;   // absent: none (the defaults apply); 0: unlimited
  std::uint64_t cpu_time_ms = 0, max_file_size = 0;  // 0: none
  double cpus = 0;
  bool ceiling = false;
};
// The reply to make_scope_list().
Frame make_scope_list_reply(std::uint64_t request_id, const std::vector<ScopeListEntry>& scopes);

Frame make_background_started(std::uint64_t request_id, const std::string& id, const std::string& scope);

// An ExecResult in plain C++: what happened to a command (runtime/result.h).
struct ExecResultInfo {
  ExitStatus status = ExitStatus::setup_error;
  std::optional<std::int32_t> exit_code;  // only when the command exited
  std::int32_t signal = 0;
  bool timed_out = false;
  bool output_truncated = false;
  std::uint64_t wall_ms = 0, user_cpu_ms = 0, sys_cpu_ms = 0;
  std::uint64_t max_rss_kb = 0;
  std::optional<std::uint64_t> memory_peak_kb;
  std::vector<std::string> enforced;
  std::string temp_dir;
  std::string setup_step;  // empty: absent
  std::int32_t setup_errno = 0;
  std::string message;     // empty: absent
  std::uint64_t stdout_bytes = 0, stderr_bytes = 0;
  std::optional<bool> launched;
  // The effective policy, for a command that ran sandboxed; absent: none of its fields is written.
  struct PolicyInfo {
    Mode mode = Mode::workspace_write;
    Network network = Network::denied;
    std::vector<std::string> workspaces, deny_read, protect;
  };
  std::optional<PolicyInfo> policy;
};
Frame make_exec_result(std::uint64_t request_id, const ExecResultInfo& result);

// What a Poll reports about a background command.
struct PollInfo {
  std::string id;
  std::string state;  // running, exited, failed, stopped
  std::string_view out, err;  // output since the last poll
  std::optional<ExecResultInfo> result;  // once it has ended
};
Frame make_poll_reply(std::uint64_t request_id, const PollInfo& info);

// `deadline_ms`: how long the client has to answer, in ms.
Frame make_authorization_request(std::uint64_t request_id, std::string_view description, std::uint64_t deadline_ms);

Frame make_read_result(std::uint64_t request_id, std::string_view data, std::uint64_t offset, std::uint64_t file_size,
                       bool truncated);
Frame make_write_result(std::uint64_t request_id, std::uint64_t bytes);
// One row of ListResult.
struct ListEntry {
  std::string name;
  std::string type;           // file, dir, symlink, other
  std::uint64_t size = 0;     // bytes
  std::int64_t mtime_ms = 0;  // ms since the epoch
};
Frame make_list_result(std::uint64_t request_id, const std::vector<ListEntry>& entries, bool truncated);

Frame make_worker_started(std::uint64_t request_id, const std::string& name, const std::string& scope);
// One row of WorkerList.
struct WorkerListEntry {
  std::string name, scope;
  std::string state;  // idle, busy, state_lost, stopped
  std::uint64_t evaluations = 0;
  std::vector<std::string> argv;
  std::uint32_t pid = 0;  // 0: no process
};
// The reply to make_worker_list().
Frame make_worker_list_reply(std::uint64_t request_id, const std::vector<WorkerListEntry>& workers);
// The reply to make_worker_logs(): the worker's latest output.
Frame make_worker_logs_reply(std::uint64_t request_id, std::string_view data);
Frame make_worker_eval_result(std::uint64_t request_id, std::string_view reply, std::uint32_t host_calls);

// The worker channel (docs/design.md "Workers and channels"), where `request_id` is the
// evaluation's number. The supervisor sends Evaluate and host replies; the worker sends host
// calls and its EvalReply. A host call is relayed to the evaluating client under the client's id.
Frame make_evaluate(std::uint64_t request_id, std::string_view data);
Frame make_host_call(std::uint64_t request_id, std::uint64_t call_id, std::string_view data);
Frame make_eval_reply(std::uint64_t request_id, std::string_view data);

std::vector<LayerInfo> read_layers(const flatbuffers::Vector<flatbuffers::Offset<Layer>>* v);
std::vector<BoundInfo> read_bounds(const flatbuffers::Vector<flatbuffers::Offset<Bound>>* v);
inline std::string str(const flatbuffers::String* s) { return s ? s->str() : std::string(); }

}  // namespace corral::proto
