// corral: one binary, the supervisor (`serve`) and every client command.
//
// Start-up is part of every client command's latency (bench/peers.sh), so main() registers only
// the subcommand that argv names: defining every subcommand's options with CLI11 was a quarter of
// `corral status`'s instructions. Without a known subcommand (`corral`, `corral --help`, a typo)
// all of them are registered, so that help and errors list them.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstring>
#include <functional>
#include <iostream>
#include <limits>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

#include "runtime/limits.h"
#include "runtime/policy.h"
#include "runtime/sandbox_plan.h"
#include "runtime/units.h"
#include "tools/commands.h"
#include "tools/mcp_server.h"
#include "tools/options.h"
#include "worker_proto/client.h"

using namespace corral;
using namespace corral::cli;

namespace {

using std::chrono::milliseconds;

const char* kSocketHelp =
    "supervisor socket (default: $CORRAL_SOCKET, else $XDG_RUNTIME_DIR/corral/corral.sock, "
    "else /run/corral/corral.sock for root, else /tmp/corral-$UID/corral.sock)";

// Each registered command and what runs it once it is the one parsed. The runner owns the
// option values that CLI11 writes into.
using Runners = std::vector<std::pair<CLI::App*, std::function<int()>>>;

CLI::Validator any_duration() { return duration_in(milliseconds(1), milliseconds::max()); }

// `serve`'s values that need converting after parsing.
struct ServeArgs {
  supervisor::ServerOptions options;
  std::string log_level = "info";
  std::uint64_t max_queued = options.max_queued, max_frame = options.max_frame,
                max_timeout_ms = static_cast<std::uint64_t>(options.max_timeout.count()),
                auth_deadline_ms = static_cast<std::uint64_t>(options.authorization_deadline.count()),
                hello_timeout_ms = static_cast<std::uint64_t>(options.hello_timeout.count()),
                max_worker_queued = options.max_worker_queued, temp_size = options.temp_size;
  std::optional<std::uint64_t> default_memory;
  std::string audit_log;
  std::string sandbox_user = "nobody";

  int run() {
    options.max_queued = max_queued;
    options.max_frame = static_cast<std::uint32_t>(max_frame);  // bounded by its validator
    options.max_timeout = milliseconds(max_timeout_ms);
    options.authorization_deadline = milliseconds(auth_deadline_ms);
    options.hello_timeout = milliseconds(hello_timeout_ms);
    options.max_worker_queued = max_worker_queued;
    options.temp_size = temp_size;
    options.default_memory = default_memory;
    if (auto ids = cli::lookup_sandbox_user(sandbox_user); !ids.ok())
      return cli::complain(cli::kUsage, "--sandbox-uid: " + ids.status().message());
    else
      std::tie(options.sandbox_uid, options.sandbox_gid) = *ids;
    return cli::run_serve(options, log_level, audit_log);
  }
};

void add_serve(CLI::App& app, Runners& runners) {
  auto a = std::make_shared<ServeArgs>();
  supervisor::ServerOptions& serve_opts = a->options;
  serve_opts.socket_path = proto::default_socket_path();
  auto* serve = app.add_subcommand("serve", "Run the supervisor in the foreground until SIGTERM/SIGINT.");
  serve->add_option("--socket", serve_opts.socket_path, kSocketHelp);
  add_repeatable(serve, "--allow-uid", serve_opts.allow_uids,
                 "also accept peers with this uid; the socket then opens to others and the peer credential "
                 "check is the gate. A root supervisor checks every host path such a peer names with the "
                 "peer's own uid and groups; a non-root supervisor gives it its own uid's reach (see README)");
  serve->add_flag("--allow-supplementary-groups", serve_opts.allow_supplementary_groups,
                  "non-root supervisor without newgidmap or an /etc/subgid range: run commands although "
                  "they keep the supervisor's supplementary groups (the layer groups-dropped is then "
                  "reported missing); without this flag they are refused");
  serve->add_option("--max-connections", serve_opts.max_connections, "simultaneous client connections")
      ->type_name("N")->check(CLI::Range(1u, 1'000'000u).description(""))
      ->capture_default_str();
  serve->add_option("--max-connections-per-uid", serve_opts.max_connections_per_uid,
                    "simultaneous connections of one peer uid (never more than --max-connections)")
      ->type_name("N")->check(CLI::Range(1u, 1'000'000u).description(""))
      ->capture_default_str();
  serve->add_option("--hello-timeout", a->hello_timeout_ms, "a connection that has not said hello by then is closed")
      ->type_name("DURATION")->transform(any_duration())
      ->default_str(format_duration(serve_opts.hello_timeout));
  serve->add_option("--max-in-flight", serve_opts.max_in_flight, "requests in flight per connection")
      ->type_name("N")->check(CLI::Range(1u, 1'000'000u).description(""))
      ->capture_default_str();
  serve->add_option("--prepare-after", serve_opts.prepare_after,
                    "a scope's Nth command with one policy prepares a sandbox (namespaces and mount view) that "
                    "its later commands with that policy start from; 0: never")
      ->type_name("N")->check(CLI::Range(0u, 1000u).description(""))
      ->capture_default_str();
  serve->add_option("--max-queued", a->max_queued,
                    "bytes queued for one client (replies promised to its requests included) before its "
                    "commands' output is paused and its requests are no longer read (back-pressure)")
      ->type_name("SIZE")->transform(size_in(1, std::numeric_limits<std::uint64_t>::max()))
      ->default_str(format_size(a->max_queued));
  serve->add_option("--max-worker-queued", a->max_worker_queued,
                    "bytes waiting to be written to one worker before that worker and its evaluating client "
                    "are no longer read (back-pressure)")
      ->type_name("SIZE")->transform(size_in(1, std::numeric_limits<std::uint64_t>::max()))
      ->default_str(format_size(a->max_worker_queued));
  serve->add_option("--max-frame", a->max_frame, "largest frame accepted or sent")
      ->type_name("SIZE")->transform(size_in(proto::kMinMaxFrame, proto::kMaxMaxFrame))
      ->default_str(format_size(a->max_frame));
  serve->add_option("--max-timeout", a->max_timeout_ms, "largest timeout a request may ask for")
      ->type_name("DURATION")->transform(any_duration())
      ->default_str(format_duration(serve_opts.max_timeout));
  serve->add_option("--authorization-deadline", a->auth_deadline_ms,
                    "how long an authorized launch waits for its client's grant")
      ->type_name("DURATION")->transform(any_duration())
      ->default_str(format_duration(serve_opts.authorization_deadline));
  serve->add_option("--temp-root", serve_opts.temp_root,
                    "where scope temp dirs are created (default: $TMPDIR, else /tmp)");
  serve->add_option("--default-pids", serve_opts.default_pids,
                    "processes and threads one command may have when it asks for no --pids cap "
                    "(RLIMIT_NPROC in its own user namespace: holds without cgroups); 0 = none")
      ->type_name("N")->check(CLI::Range(std::uint64_t{0}, cap_limits::kMaxPids).description(""))
      ->capture_default_str();
  serve->add_option("--default-memory", a->default_memory,
                    "memory of one command's whole tree when it asks for no --memory cap (a memory cgroup per "
                    "command, where the host has one; status says whether it is enforced); 0 = none")
      ->type_name("SIZE")->transform(size_in(cap_limits::kMinMemory, cap_limits::kMaxMemory, "none"))
      ->default_str("the smaller of 8G and half the RAM: " +
                    format_size(limits::default_memory_for(supervisor::host_memory())));
  serve->add_option("--temp-size", a->temp_size,
                    "root supervisor: each scope's temp dir (its commands' /tmp) is a tmpfs of this size, "
                    "whose pages count as memory, against the writing command's --memory cap; 0 = plain "
                    "host directories, unbounded")
      ->type_name("SIZE")->transform(size_in(0, limits::kMaxTempSize))
      ->default_str(format_size(a->temp_size));
  serve->add_option("--log-level", a->log_level,
                    "trace, debug, info, warn, error, off: the ordinary log; never the audit lines")
      ->capture_default_str();
  serve->add_option("--audit-log", a->audit_log,
                    "append the audit lines (one per launch) to this file instead of stderr; "
                    "they are written whatever --log-level says")
      ->type_name("FILE");
  serve->add_option("--sandbox-uid", a->sandbox_user,
                    "for a root supervisor: the unprivileged host uid (or user name) commands run as; "
                    "never 0")
      ->capture_default_str();
  runners.emplace_back(serve, [a] { return a->run(); });
}

void add_exec(CLI::App& app, Runners& runners) {
  auto exec_opts_ptr = std::make_shared<ExecOptions>();
  ExecOptions& exec_opts = *exec_opts_ptr;
  exec_opts.socket = proto::default_socket_path();
  auto* exec = app.add_subcommand(
      "exec",
      "Run a command through the supervisor: `corral exec [OPTIONS] -- PROGRAM ARGS...` or "
      "`corral exec [OPTIONS] --sh 'STRING'`.\nEverything after `--` belongs to the program. Output streams as "
      "it arrives. Exit status: the command's own; 124 timed out; 125 corral failed (a bad option too); 126 not executable; "
      "127 not found; 128+N killed by signal N (137 for the output, memory and CPU caps, told apart by "
      "--json's status); 77 not launched (--authorize-cmd refused).");
  exec->add_option("--socket", exec_opts.socket, kSocketHelp);
  exec->add_option("--sh", exec_opts.shell, "run STRING with /bin/sh -c instead of PROGRAM ARGS");
  exec->add_option("--timeout", exec_opts.timeout_ms,
                   "deadline: SIGTERM, then SIGKILL after the grace period (500ms, 2s, 1m; bare number = "
                   "seconds; default 2m, max " + format_duration(limits::kMaxTimeout) + ")")
      ->type_name("DURATION")->transform(duration_in(milliseconds(1), limits::kMaxTimeout));
  exec->add_option("--grace", exec_opts.grace_ms,
                   "SIGTERM -> SIGKILL delay on timeout (default 2s, max " + format_duration(limits::kMaxGrace) + ")")
      ->type_name("DURATION")->transform(duration_in(milliseconds(0), limits::kMaxGrace));
  exec->add_option("--max-output", exec_opts.max_output,
                   "cap on stdout+stderr together; past it the command is killed (1000, 64K, 1M; "
                   "default 1M, max " + format_size(limits::kMaxOutput) + ")")
      ->type_name("SIZE")->transform(size_in(1, limits::kMaxOutput));
  add_repeatable(exec, "--env", exec_opts.env,
                 "NAME=VALUE for the command's environment; it sees only these plus PATH, HOME and TMPDIR "
                 "defaults")
      ->type_name("NAME=VALUE")->check(env_entry());
  exec->add_option("--cwd", exec_opts.cwd, "working directory (default: the scope's private temp dir)");
  exec->add_option("--stdin", exec_opts.stdin_file, "file to feed as stdin, read whole before the command starts "
                   "(at most 8M); '-' for corral's own stdin (default: /dev/null)");
  exec->add_flag("--json", exec_opts.json, "print the result record as one JSON object");
  exec->add_option("--mode", exec_opts.mode,
                   "read-only | workspace-write | danger-full-access: what the command may write "
                   "(default: the scope's, else workspace-write; never looser than a named scope's; see "
                   "README, 'Policy by mode')")
      ->type_name("MODE")->transform(mode_name());
  add_repeatable(exec, "--workspace", exec_opts.workspaces, "a workspace root: writable in workspace-write mode");
  exec->add_option("--net", exec_opts.net,
                   "denied (a network namespace with only its loopback, the scope's own or the command's) | "
                   "allowed (host network) "
                   "(default: the scope's, else denied; never looser than a named scope's)")
      ->type_name("NET")->transform(network_name());
  add_repeatable(exec, "--deny-read", exec_opts.deny_read, "PATH masked inside (added to the scope's)");
  add_repeatable(exec, "--protect", exec_opts.protect,
                 "PATH kept read-only even inside a writable root (added to the scope's)");
  add_repeatable(exec, "--allow-socket", exec_opts.allow_sockets,
                 "PATH of a host Unix socket the command may connect to in read-only and workspace-write modes, "
                 "where every other host socket is out of reach (no symlinks in PATH; audited)");
  add_repeatable(exec, "--bind", exec_opts.binds, "SRC:DST[:ro|rw] shows host path SRC at DST inside (default ro)");
  add_memory_cap(exec, exec_opts.memory,
                 "memory cap for the whole tree, past it status memory_limit; default: the scope's, else serve "
                 "--default-memory");
  add_pids_cap(exec, exec_opts.pids,
               "cap on processes and threads of the whole tree; default: the scope's, else serve --default-pids");
  exec->add_option("--cpu-time", exec_opts.cpu_time_ms,
                   "total CPU time of the whole tree (at least 10ms, e.g. 10s); past it: status cpu_limit")
      ->type_name("DURATION")->transform(duration_in(cap_limits::kMinCpuTime, milliseconds::max()));
  add_cpus_cap(exec, exec_opts.cpus, "CPU rate, e.g. 0.5 for half a CPU");
  exec->add_option("--max-file-size", exec_opts.max_file_size, "largest file the command may write (e.g. 10M)")
      ->type_name("SIZE")->transform(size_in(1, cap_limits::kMaxFileSize));
  exec->add_option("--scope", exec_opts.scope, "run in this scope (from `corral scope create`)");
  exec->add_flag("--background", exec_opts.background,
                 "start it and print its id alone on the last line; no deadline and no total output cap "
                 "unless --timeout or --max-output names one; drain output with `corral poll ID`, end it with "
                 "`corral stop ID` (default scope: your uid's detached one)");
  exec->add_option("--authorize-cmd", exec_opts.authorize_cmd,
                   "authorized launch: corral prepares the command up to exec, then runs CMD with a JSON "
                   "description of exactly what will run on stdin; exit 0 grants (within 30s). Not launched: "
                   "exit 77, and nothing ran");
  exec->add_option("command", exec_opts.argv, "PROGRAM ARGS... (after --)");
  runners.emplace_back(exec, [exec_opts_ptr] { return cli::run_exec(*exec_opts_ptr); });
}

// read, write and ls: the options every file command has.
CLI::App* add_file_command(CLI::App& app, const char* name, const char* help, FileOptions& fo) {
  fo.socket = proto::default_socket_path();
  auto* sub = app.add_subcommand(name, help);
  sub->add_option("--socket", fo.socket, kSocketHelp);
  add_repeatable(sub, "--workspace", fo.workspaces,
                 "a workspace root; a relative PATH is taken beneath the first one, an absolute PATH must "
                 "lie beneath a workspace root or the scope's temp dir");
  sub->add_option("--mode", fo.mode,
                  "read-only refuses writes; danger-full-access allows any path (default: the scope's, else "
                  "workspace-write; never looser than a named scope's, whose workspaces, --protect and "
                  "--deny-read apply as to a command)")
      ->type_name("MODE")->transform(mode_name());
  sub->add_option("--scope", fo.scope, "the scope whose temp dir is a root (default: this command's own)");
  sub->add_option("path", fo.path, "the file or directory")->required();
  return sub;
}

void add_read(CLI::App& app, Runners& runners) {
  auto o = std::make_shared<FileOptions>();
  auto* read = add_file_command(app, "read", "Print a file (UTF-8 text, or bytes with --binary) through one bounded handle.", *o);
  read->add_option("--offset", o->offset, "first byte to read (a size: 0, 4096, 1M)")
      ->type_name("SIZE")->transform(size_in(0, std::numeric_limits<std::int64_t>::max()));
  read->add_option("--max-bytes", o->max_bytes, "window size (default 1M text, 50M bytes, bounded by the frame size)")
      ->type_name("SIZE")->transform(size_in(1, std::numeric_limits<std::uint64_t>::max()));
  read->add_flag("--binary", o->binary, "exact bytes, no UTF-8 check");
  runners.emplace_back(read, [o] { return cli::run_read(*o); });
}

void add_write(CLI::App& app, Runners& runners) {
  auto o = std::make_shared<FileOptions>();
  auto* write = add_file_command(app, "write", "Write stdin to a file atomically (temp file + rename; UTF-8 unless --binary; 1M max).", *o);
  write->add_flag("--binary", o->binary, "accept any bytes");
  runners.emplace_back(write, [o] { return cli::run_write(*o); });
}

void add_ls(CLI::App& app, Runners& runners) {
  auto o = std::make_shared<FileOptions>();
  auto* ls = add_file_command(app, "ls",
                              "List a directory: one name a line, `/` after a directory; --json gives each "
                              "entry's name, type, size and mtime_ms.",
                              *o);
  ls->add_option("--max-entries", o->max_entries, "at most this many entries (default and max 10000)")
      ->type_name("N")->check(CLI::Range(1u, 10000u).description(""));
  ls->add_flag("--json", o->json, "print as JSON");
  runners.emplace_back(ls, [o] { return cli::run_ls(*o); });
}

void add_status(CLI::App& app, Runners& runners) {
  auto status_opts_ptr = std::make_shared<StatusOptions>();
  StatusOptions& status_opts = *status_opts_ptr;
  status_opts.socket = proto::default_socket_path();
  auto* status = app.add_subcommand("status", "Show the supervisor and what this host can enforce.");
  status->add_option("--socket", status_opts.socket, kSocketHelp);
  status->add_flag("--json", status_opts.json, "print as JSON");
  runners.emplace_back(status, [status_opts_ptr] { return cli::run_status(*status_opts_ptr); });
}

void add_call(CLI::App& app, Runners& runners) {
  auto call_opts_ptr = std::make_shared<CallOptions>();
  CallOptions& call_opts = *call_opts_ptr;
  call_opts.socket = proto::default_socket_path();
  auto* call = app.add_subcommand(
      "call",
      "Send one message written as JSON and print every reply frame as JSON (one per line), "
      "e.g. corral call '{request_id: 1, body_type: \"ExecRequest\", body: {argv: [\"echo\", \"hi\"]}}'.\n"
      "The hello is sent for you; a missing request_id becomes 1. Exit 1 if the reply is an Error.");
  call->add_option("--socket", call_opts.socket, kSocketHelp);
  call->add_option("--timeout", call_opts.timeout_ms, "give up waiting for the final reply after this long")
      ->type_name("DURATION")->transform(any_duration());
  call->add_option("message", call_opts.json, "the Message as JSON (schema: worker_proto/corral.fbs)")->required();
  auto call_json = std::make_shared<bool>(true);
  call->add_flag("--json", *call_json, "accepted for symmetry: call always prints JSON");
  runners.emplace_back(call, [call_opts_ptr, call_json] { return cli::run_call(*call_opts_ptr); });
}

void add_scope(CLI::App& app, Runners& runners) {
  auto scope_opts_ptr = std::make_shared<ScopeOptions>();
  ScopeOptions& scope_opts = *scope_opts_ptr;
  scope_opts.socket = proto::default_socket_path();
  auto* scope = app.add_subcommand("scope", "Scopes: a temp dir, policy defaults and everything started in them.");
  scope->require_subcommand(1);
  auto* scope_create = scope->add_subcommand(
      "create", "Create a detached scope (it outlives this command until `corral scope close`); prints its id alone on "
                "the last line. Its policy is a ceiling for everything that runs in it (README, 'Policy rules').");
  scope_create->add_option("--socket", scope_opts.socket, kSocketHelp);
  scope_create->add_option("--parent", scope_opts.parent, "make it a child of this scope (closed with it)");
  auto detach_flag = std::make_shared<bool>(true);
  scope_create->add_flag("--detach", *detach_flag, "accepted: the CLI always detaches");
  scope_create->add_option("--mode", scope_opts.mode,
                           "mode of what runs in it, and the loosest any of it may ask for (default: the "
                           "parent's; top level: workspace-write)")
      ->type_name("MODE")->transform(mode_name());
  scope_create->add_option("--net", scope_opts.net,
                           "network of what runs in it, and the loosest any of it may ask for (default: the "
                           "parent's; top level: denied)")
      ->type_name("NET")->transform(network_name());
  add_repeatable(scope_create, "--workspace", scope_opts.workspaces,
                 "a workspace root; what runs in it may name only roots beneath these");
  add_repeatable(scope_create, "--deny-read", scope_opts.deny_read, "PATH masked in everything that runs in it");
  add_repeatable(scope_create, "--protect", scope_opts.protect, "PATH read-only in everything that runs in it");
  add_memory_cap(scope_create, scope_opts.memory, "memory cap per command or worker; none may ask for more");
  add_pids_cap(scope_create, scope_opts.pids, "process cap per command or worker; none may ask for more");
  scope_create->add_option("--cpu-time", scope_opts.cpu_time_ms, "CPU time cap per command; none may ask for more")
      ->type_name("DURATION")->transform(duration_in(cap_limits::kMinCpuTime, milliseconds::max()));
  add_cpus_cap(scope_create, scope_opts.cpus, "CPU rate cap per command or worker; none may ask for more");
  scope_create->add_option("--max-file-size", scope_opts.max_file_size, "file size cap per command; none may ask for more")
      ->type_name("SIZE")->transform(size_in(1, cap_limits::kMaxFileSize));
  auto* scope_close = scope->add_subcommand("close", "Close a scope: end everything in it and in its children, remove their temp dirs.");
  scope_close->add_option("--socket", scope_opts.socket, kSocketHelp);
  scope_close->add_option("id", scope_opts.id, "the scope")->required();
  auto* scope_list = scope->add_subcommand("list", "List your scopes: id, parent, policy, temp dir.");
  scope_list->add_option("--socket", scope_opts.socket, kSocketHelp);
  scope_list->add_flag("--json", scope_opts.json, "print as JSON");
  auto o = scope_opts_ptr;
  runners.emplace_back(scope_create, [o, detach_flag] { return cli::run_scope_create(*o); });
  runners.emplace_back(scope_close, [o] { return cli::run_scope_close(*o); });
  runners.emplace_back(scope_list, [o] { return cli::run_scope_list(*o); });
}

void add_poll(CLI::App& app, Runners& runners) {
  auto o = std::make_shared<BackgroundOptions>();
  o->socket = proto::default_socket_path();
  auto* poll = app.add_subcommand("poll", "Print what a background command wrote since the last poll, and its state "
                                          "(running, exited CODE, failed, stopped) on stderr.");
  poll->add_option("--socket", o->socket, kSocketHelp);
  poll->add_flag("--json", o->json, "print {id, state, stdout, stderr, exit_code, status} as JSON");
  poll->add_option("id", o->id, "the background command's id")->required();
  runners.emplace_back(poll, [o] { return cli::run_poll(*o); });
}

void add_stop(CLI::App& app, Runners& runners) {
  auto o = std::make_shared<BackgroundOptions>();
  o->socket = proto::default_socket_path();
  auto* stop = app.add_subcommand("stop", "End a background command: SIGTERM, grace, SIGKILL (or SIGKILL now with --force).");
  stop->add_option("--socket", o->socket, kSocketHelp);
  stop->add_flag("--force", o->force, "SIGKILL now");
  stop->add_option("id", o->id, "the background command's id")->required();
  runners.emplace_back(stop, [o] { return cli::run_stop(*o); });
}

void add_worker(CLI::App& app, Runners& runners) {
  auto w_opts_ptr = std::make_shared<WorkerOptions>();
  WorkerOptions& w_opts = *w_opts_ptr;
  w_opts.socket = proto::default_socket_path();
  auto* worker = app.add_subcommand("worker", "Persistent framed workers (e.g. a Python interpreter) inside the sandbox.");
  worker->require_subcommand(1);
  auto worker_sub = [&](const char* name, const char* help, bool needs_name) {
    auto* sub = worker->add_subcommand(name, help);
    sub->add_option("--socket", w_opts.socket, kSocketHelp);
    sub->add_option("--scope", w_opts.scope, "the worker's scope (default: your uid's detached scope)");
    if (needs_name) sub->add_option("name", w_opts.name, "the worker's name (unique in its scope)")->required();
    return sub;
  };
  auto* w_start = worker_sub("start", "Start a worker: `corral worker start NAME [OPTIONS] -- /ABS/PATH/RUNTIME ARGS...` "
                                      "or `--python` for the shipped Python evaluation worker. Frames travel on fd "
                                      "$CORRAL_WORKER_FD; stdout/stderr go to `corral worker logs`.", true);
  w_start->add_flag("--python", w_opts.python,
                    "the shipped Python worker: /usr/bin/python3 -I -B -u DIR/corral_eval_worker.py DIR, where DIR is "
                    "share/corral/python beside corral's bin/ directory; requests {\"code\": ...}, replies {ok, stdout, "
                    "stderr, result, error}");
  w_start->add_option("--mode", w_opts.mode, "isolation mode, as for exec")->type_name("MODE")->transform(mode_name());
  w_start->add_option("--net", w_opts.net, "network policy, as for exec")->type_name("NET")->transform(network_name());
  add_repeatable(w_start, "--workspace", w_opts.workspaces, "a workspace root");
  add_repeatable(w_start, "--allow-socket", w_opts.allow_sockets,
                 "PATH of a host Unix socket the worker may connect to, as for exec (audited)");
  add_memory_cap(w_start, w_opts.memory, "memory cap for the worker's tree; default as for exec");
  add_pids_cap(w_start, w_opts.pids, "cap on the worker's processes and threads; default as for exec");
  add_cpus_cap(w_start, w_opts.cpus, "CPU rate for the worker, e.g. 0.5");
  w_start->add_option("--idle-timeout", w_opts.idle_timeout_ms, "stop it after this long without evaluations (default 10m)")
      ->type_name("DURATION")->transform(any_duration());
  w_start->add_option("program", w_opts.argv, "/ABS/PATH/RUNTIME ARGS... (after --)");
  auto* w_eval = worker_sub("eval", "Evaluate one request (from --request or stdin) and print the reply. Evaluations on "
                                    "one worker are serialized; a deadline, cancel or crash loses the worker's state.", true);
  w_eval->add_option("--request", w_opts.request, "the request (default: read stdin)");
  w_eval->add_option("--timeout", w_opts.timeout_ms, "evaluation deadline (default 2m); past it the worker is killed")
      ->type_name("DURATION")->transform(duration_in(milliseconds(1), limits::kMaxTimeout));
  w_eval->add_flag("--reset", w_opts.reset, "start a fresh worker first (after its state was lost), then evaluate");
  w_eval->add_option("--host-cmd", w_opts.host_cmd,
                     "serve the evaluation's host calls: run CMD with the call on stdin; its stdout is the reply, a "
                     "non-zero exit an error (without it, host calls get an error)");
  auto* w_stop = worker_sub("stop", "Stop a worker (SIGTERM and close its channel; --force: SIGKILL).", true);
  w_stop->add_flag("--force", w_opts.force, "SIGKILL now");
  auto* w_list = worker_sub("list", "List your workers: name, scope, state, evaluations.", false);
  w_list->add_flag("--json", w_opts.json, "print as JSON");
  auto* w_logs = worker_sub("logs", "Print a worker's stdout and stderr (the latest 256 KiB).", true);
  auto o = w_opts_ptr;
  runners.emplace_back(w_start, [o] { return cli::run_worker_start(*o); });
  runners.emplace_back(w_eval, [o] { return cli::run_worker_eval(*o); });
  runners.emplace_back(w_stop, [o] { return cli::run_worker_stop(*o); });
  runners.emplace_back(w_list, [o] { return cli::run_worker_list(*o); });
  runners.emplace_back(w_logs, [o] { return cli::run_worker_logs(*o); });
}

void add_mcp(CLI::App& app, Runners& runners) {
  auto mcp_opts_ptr = std::make_shared<McpOptions>();
  McpOptions& mcp_opts = *mcp_opts_ptr;
  mcp_opts.socket = proto::default_socket_path();
  auto* mcp = app.add_subcommand(
      "mcp",
      "Serve the Model Context Protocol on stdin/stdout (JSON-RPC 2.0, one message per line) for an agent host: "
      "tools exec, read_file, write_file, list_dir, python, background_start/poll/stop. One scope per session, "
      "with the policy given here (the model cannot widen it); once stdin closes and the calls in flight are "
      "answered, the session ends with everything it started. See README, 'MCP'.");
  mcp->add_option("--socket", mcp_opts.socket, kSocketHelp);
  mcp->add_option("--mode", mcp_opts.mode, "read-only | workspace-write | danger-full-access (default workspace-write)")
      ->type_name("MODE")->transform(mode_name());
  mcp->add_option("--net", mcp_opts.net, "denied | allowed (default denied)")->type_name("NET")->transform(network_name());
  add_repeatable(mcp, "--workspace", mcp_opts.workspaces,
                 "a workspace root: writable in workspace-write mode; relative paths of the file tools start at the first");
  add_repeatable(mcp, "--deny-read", mcp_opts.deny_read, "PATH masked inside every command");
  add_repeatable(mcp, "--protect", mcp_opts.protect, "PATH kept read-only even inside a writable root");
  add_memory_cap(mcp, mcp_opts.memory, "memory cap for each command's tree; default as for exec");
  add_pids_cap(mcp, mcp_opts.pids, "cap on each command's processes and threads; default as for exec");
  mcp->add_option("--cpu-time", mcp_opts.cpu_time_ms, "CPU time of each command's tree (e.g. 10m)")
      ->type_name("DURATION")->transform(duration_in(cap_limits::kMinCpuTime, milliseconds::max()));
  add_cpus_cap(mcp, mcp_opts.cpus, "CPU rate for each command, e.g. 0.5");
  mcp->add_option("--timeout", mcp_opts.default_timeout_ms, "a command's deadline when the model names none (default 2m)")
      ->type_name("DURATION")->transform(duration_in(milliseconds(1), limits::kMaxTimeout));
  mcp->add_option("--max-timeout", mcp_opts.max_timeout_ms, "the longest deadline the model may ask for (default 1h)")
      ->type_name("DURATION")->transform(duration_in(milliseconds(1), limits::kMaxTimeout));
  mcp->add_option("--max-output", mcp_opts.max_output, "output kept per command, stdout and stderr together (default 1M)")
      ->type_name("SIZE")->transform(size_in(1, limits::kMaxOutput));
  mcp->add_option("--max-message", mcp_opts.max_message, "largest JSON-RPC message read from stdin (default 8M)")
      ->type_name("SIZE")->transform(size_in(4096, std::uint64_t{256} << 20));
  auto no_python = std::make_shared<bool>(false);
  mcp->add_flag("--no-python", *no_python, "do not offer the python tool");
  runners.emplace_back(mcp, [mcp_opts_ptr, no_python] {
    McpOptions& o = *mcp_opts_ptr;
    if (o.default_timeout_ms > o.max_timeout_ms) return cli::complain(cli::kUsage, "--timeout is over --max-timeout");
    o.python = !*no_python;
    for (auto* paths : {&o.workspaces, &o.deny_read, &o.protect})
      for (auto& path : *paths) path = cli::absolute(path);
    return cli::run_mcp(o);
  });
}

// In the order `corral --help` lists them.
struct Subcommand {
  const char* name;
  void (*add)(CLI::App& app, Runners& runners);
};
constexpr Subcommand kSubcommands[] = {
    {"serve", add_serve},   {"exec", add_exec},   {"read", add_read},   {"write", add_write},
    {"ls", add_ls},         {"status", add_status}, {"call", add_call}, {"scope", add_scope},
    {"poll", add_poll},     {"stop", add_stop},   {"worker", add_worker}, {"mcp", add_mcp},
};

// Whether `name` ("--x" or "-x") is an option of `app` or of any of its subcommands.
bool known_option(const CLI::App& app, const std::string& name) {
  for (const CLI::Option* o : app.get_options())
    if (o->check_name(name)) return true;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    if (known_option(*sub, name)) return true;
  return false;
}

// The first word before `--` that looks like an option (--x, --x=v, -x; not a negative number)
// and is nobody's: what a parse that found extra arguments should name.
std::string unknown_option(const CLI::App& app, int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") break;
    if (a.size() < 2 || a[0] != '-' || (a[1] >= '0' && a[1] <= '9') || a[1] == '.') continue;
    const std::string name = a.substr(0, a.find('='));
    if (!known_option(app, name)) return name;
  }
  return {};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"corral: a sandbox supervisor for AI agents' commands and workers.\n"
               "Start the supervisor with `corral serve`; every other command is its client."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "corral 0.1.0");

  Runners runners;
  const Subcommand* named = nullptr;
  if (argc > 1)
    for (const Subcommand& s : kSubcommands)
      if (std::strcmp(argv[1], s.name) == 0) named = &s;
  if (named) {
    if (std::strcmp(named->name, "serve") == 0) sandbox::register_command_line(argc, argv);
    named->add(app, runners);
  } else {
    for (const Subcommand& s : kSubcommands) s.add(app, runners);
  }

  // exec runs a program whose own status it returns, so its usage errors are "corral failed"
  // (125, as with timeout(1) and env(1)): a script cannot mistake them for the program's 2.
  const int usage = named && std::strcmp(named->name, "exec") == 0 ? cli::kExecCorralFailed : cli::kUsage;
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);  // --help, --version (CallForHelp derives from Success)
  } catch (const CLI::ExtrasError& e) {
    if (std::string name = unknown_option(app, argc, argv); !name.empty())
      return cli::complain(usage, "unknown option " + name + " (a program's own arguments go after `--`; see --help)");
    return cli::complain(usage, std::string(e.what()) + " (a program's own arguments go after `--`; see --help)");
  } catch (const CLI::ParseError& e) {
    return cli::complain(usage, std::string(e.what()) + " (see --help)");
  }
  for (auto& [command, run] : runners)
    if (*command) return run();
  return usage;
}
