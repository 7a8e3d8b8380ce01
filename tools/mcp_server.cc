#include "tools/mcp_server.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tools/commands.h"
#include "worker_proto/client.h"
#include "worker_proto/messages.h"

namespace corral::cli {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// Protocol revisions this server speaks, newest first (docs/protocol.md "corral mcp"). A client
// asking for another one gets the newest, as the MCP lifecycle prescribes.
constexpr const char* kProtocolVersions[] = {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05", "2024-10-07"};
constexpr const char* kServerVersion = "0.1.0";
constexpr const char* kWorkerName = "mcp-python";

// JSON-RPC error codes.
constexpr int kParseError = -32700;
constexpr int kInvalidRequest = -32600;
constexpr int kMethodNotFound = -32601;
constexpr int kInvalidParams = -32602;

// How often a long call tells a client that gave a progress token that it is alive: SDK clients
// time a request out after 60 s unless progress resets the clock.
constexpr auto kProgressEvery = 5s;
constexpr std::size_t kReadChunk = 64 * 1024;
constexpr std::uint64_t kDefaultReadLimit = 256 * 1024;  // read_file's window when none is asked
constexpr std::uint64_t kMaxReadLimit = 1u << 20;

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string bytes_of(const flatbuffers::Vector<std::uint8_t>* v) {
  return v ? std::string(reinterpret_cast<const char*>(v->data()), v->size()) : std::string();
}

const char* status_name(proto::ExitStatus s) { return proto::EnumNameExitStatus(s); }

json result_record(const proto::ExecResult& r, const std::string& out, const std::string& err) {
  json j = {{"status", status_name(r.status())},
            {"exit_code", r.exit_code() ? json(*r.exit_code()) : json(nullptr)},
            {"signal", r.signal() ? json(r.signal()) : json(nullptr)},
            {"timed_out", r.timed_out()},
            {"output_truncated", r.output_truncated()},
            {"stdout", out},
            {"stderr", err},
            {"wall_ms", r.wall_ms()},
            {"user_cpu_ms", r.user_cpu_ms()},
            {"sys_cpu_ms", r.sys_cpu_ms()},
            {"max_rss_kb", r.max_rss_kb() ? json(r.max_rss_kb()) : json(nullptr)},  // 0: not measured
            {"memory_peak_kb", r.memory_peak_kb() ? json(*r.memory_peak_kb()) : json(nullptr)},
            {"enforced", json::array()},
            {"temp_dir", proto::str(r.temp_dir())}};
  if (r.enforced())
    for (const auto* e : *r.enforced()) j["enforced"].push_back(e ? e->str() : "");
  if (r.status() == proto::ExitStatus::setup_error) {
    j["setup_step"] = proto::str(r.setup_step());
    j["setup_errno"] = r.setup_errno();
  }
  if (r.message()) j["message"] = r.message()->str();
  return j;
}

// One line a model reads first: how the command ended.
std::string outcome(const json& record) {
  const std::string status = record["status"];
  if (status == "exited") return "exit code " + std::to_string(record["exit_code"].get<int>());
  if (status == "signaled") return "killed by signal " + std::to_string(record["signal"].get<int>());
  if (status == "timed_out") return "timed out (killed)";
  if (status == "output_limit") return "output over the limit (killed; output truncated)";
  std::string s = status;
  if (record.contains("message")) s += ": " + record["message"].get<std::string>();
  return s;
}

json text_content(const std::string& text) { return json::array({{{"type", "text"}, {"text", text}}}); }

json tool_result(const std::string& text, json structured, bool is_error) {
  json r = {{"content", text_content(text)}, {"isError", is_error}};
  if (!structured.is_null()) r["structuredContent"] = std::move(structured);
  return r;
}

// Tool errors (bad arguments, refusals) are results with isError, so the model sees the reason.
json tool_error(const std::string& message, const std::string& code = "invalid_arguments") {
  return tool_result(message, json{{"error", code}, {"message", message}}, true);
}

json command_schema_properties() {
  return {{"command", {{"type", "string"}, {"description", "A shell command line, run by /bin/sh -c."}}},
          {"argv",
           {{"type", "array"},
            {"items", {{"type", "string"}}},
            {"description", "The program and its arguments, run without a shell (instead of command)."}}},
          {"cwd", {{"type", "string"}, {"description", "Working directory (default: the session's private temp dir, also /tmp)."}}},
          {"env",
           {{"type", "object"},
            {"additionalProperties", {{"type", "string"}}},
            {"description", "Environment variables; the command sees only these plus PATH, HOME and TMPDIR."}}}};
}

json result_record_schema() {
  return {{"type", "object"},
          {"properties",
           {{"status", {{"type", "string"}}},
            {"exit_code", {{"type", {"integer", "null"}}}},
            {"stdout", {{"type", "string"}}},
            {"stderr", {{"type", "string"}}},
            {"timed_out", {{"type", "boolean"}}},
            {"output_truncated", {{"type", "boolean"}}},
            {"wall_ms", {{"type", "integer"}}}}}};
}

class Server {
 public:
  Server(const McpOptions& options, std::unique_ptr<proto::Client> client)
      : o_(options), client_(std::move(client)), splitter_(client_->server_max_frame() ? client_->server_max_frame()
                                                                                         : proto::kDefaultMaxFrame) {}

  int run();

 private:
  // A request to the supervisor in flight: what to do with its frames.
  struct Pending {
    json rpc_id;                        // the tools/call it serves
    std::optional<json> progress_token;
    bool cancelled = false;             // the client cancelled: answer nothing
    bool evaluation = false;            // a python evaluation (cancelling it loses the state)
    std::string out, err;               // an exec's output, bounded by max_output
    Clock::time_point last_progress = Clock::now();
    double progress = 0;
    std::function<void(const proto::Message&)> on_final;
  };

  // --- stdio ---
  bool read_stdin();
  void handle_line(std::string_view line);
  void send(const json& message);
  void reply(const json& id, json result) { send({{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}}); }
  void reply_error(const json& id, int code, const std::string& message) {
    send({{"jsonrpc", "2.0"}, {"id", id}, {"error", {{"code", code}, {"message", message}}}});
  }

  // --- supervisor ---
  bool read_supervisor();
  void dispatch(const proto::Message& msg);
  std::uint64_t next_id() { return next_request_++; }
  bool send_frame(const proto::Frame& frame);
  // Sends `frame` (built for `id`) and remembers `p` for its replies.
  void start(std::uint64_t id, const proto::Frame& frame, Pending p);
  void tick();

  // --- MCP ---
  void on_request(const json& id, const std::string& method, const json& params);
  void on_notification(const std::string& method, const json& params);
  json initialize(const json& params);
  json tools_list() const;
  void call_tool(const json& id, const json& params);
  void tool_exec(const json& id, const json& args, std::optional<json> token, bool background);
  void tool_read(const json& id, const json& args);
  void tool_write(const json& id, const json& args);
  void tool_list_dir(const json& id, const json& args);
  void tool_python(const json& id, const json& args, std::optional<json> token);
  void python_eval(const json& id, const std::string& code, bool reset, std::uint64_t timeout_ms, std::optional<json> token);
  void tool_background_poll(const json& id, const json& args);
  void tool_background_stop(const json& id, const json& args);
  // Refusal (an Error frame) as a tool result: the model reads the reason.
  json refusal(const proto::Error& e) const;
  bool open_scope();
  proto::FileArgs file_args(const std::string& path) const;
  std::optional<std::uint64_t> timeout_arg(const json& args, std::string& error) const;

  const McpOptions& o_;
  std::unique_ptr<proto::Client> client_;
  proto::FrameSplitter splitter_;
  std::string scope_;                    // the session's scope id
  std::uint64_t next_request_ = 2;       // 1 was the ScopeCreate
  std::map<std::uint64_t, Pending> pending_;  // by supervisor request id
  std::string stdin_buf_;
  bool discarding_ = false;              // inside a line over max_message: drop until newline
  bool stdin_open_ = true;
  bool supervisor_gone_ = false;
  std::set<std::string> background_;     // background ids this session started
  bool worker_started_ = false;
  bool worker_starting_ = false;
  // python calls that arrived while the worker was starting: evaluated once it runs.
  struct QueuedEval {
    json id;
    std::string code;
    bool reset;
    std::uint64_t timeout_ms;
    std::optional<json> token;
  };
  std::vector<QueuedEval> queued_evals_;
  bool worker_lost_ = false;             // the python worker lost its state: reset before use
};

// ---------------------------------------------------------------------------------------------

bool Server::send_frame(const proto::Frame& frame) {
  if (supervisor_gone_) return false;
  if (!client_->send(frame).ok()) {
    supervisor_gone_ = true;
    return false;
  }
  return true;
}

void Server::send(const json& message) {
  std::string line = dump(message);
  line += '\n';
  write_all(1, line);
}

bool Server::open_scope() {
  proto::ScopeArgs a;
  a.mode = wire_mode(o_.mode);
  a.network = wire_network(o_.net);
  a.workspaces = o_.workspaces;
  a.deny_read = o_.deny_read;
  a.protect = o_.protect;
  a.memory_bytes = o_.memory;
  a.pids = o_.pids;
  a.cpu_time_ms = o_.cpu_time_ms.value_or(0);
  a.cpus = o_.cpus.value_or(0);
  auto reply = client_->call(1, proto::make_scope_create(1, a));
  if (!reply) return complain(kFailed, reply.error().message), false;
  if (const auto* e = reply->msg->body_as_Error()) return complain(kFailed, "cannot create the session's scope: " + proto::str(e->message())), false;
  const auto* created = reply->msg->body_as_ScopeCreated();
  if (!created) return complain(kFailed, "unexpected reply to ScopeCreate"), false;
  scope_ = proto::str(created->id());
  return true;
}

int Server::run() {
  ::signal(SIGPIPE, SIG_IGN);
  if (!open_scope()) return kFailed;
  ::fcntl(0, F_SETFL, ::fcntl(0, F_GETFL) | O_NONBLOCK);
  // After stdin closes, the calls already in flight are still answered (each is bounded by its
  // own deadline; a host in a hurry cancels them or sends SIGTERM), then the session ends.
  auto answering = [&] {
    for (const auto& [rid, p] : pending_)
      if (!p.cancelled) return true;
    return !queued_evals_.empty();
  };
  while (!supervisor_gone_ && (stdin_open_ || answering())) {
    pollfd fds[2] = {{stdin_open_ ? 0 : -1, POLLIN, 0}, {client_->fd(), POLLIN, 0}};
    int n = ::poll(fds, 2, 1000);
    if (n < 0 && errno != EINTR) break;
    if (n > 0 && (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) && !read_supervisor()) supervisor_gone_ = true;
    if (n > 0 && stdin_open_ && (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) && !read_stdin()) stdin_open_ = false;
    tick();
  }
  if (supervisor_gone_) {
    // Every call in flight learns why it ends.
    for (auto& [rid, p] : pending_)
      if (!p.cancelled && !p.rpc_id.is_null()) reply(p.rpc_id, tool_error("the corral supervisor went away", "supervisor_gone"));
    for (auto& q : queued_evals_) reply(q.id, tool_error("the corral supervisor went away", "supervisor_gone"));
    complain(kFailed, "the supervisor closed the connection");
    return kFailed;
  }
  // End of input: closing the connection closes the session's scope and ends everything in it.
  client_.reset();
  return kOk;
}

bool Server::read_stdin() {
  char buf[kReadChunk];
  for (;;) {
    ssize_t n = ::read(0, buf, sizeof buf);
    if (n == 0) {
      if (!stdin_buf_.empty() && !discarding_) handle_line(stdin_buf_);  // a last line without newline
      return false;
    }
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    std::string_view chunk(buf, static_cast<std::size_t>(n));
    while (!chunk.empty()) {
      auto nl = chunk.find('\n');
      std::string_view part = chunk.substr(0, nl);
      if (!discarding_) {
        if (stdin_buf_.size() + part.size() > o_.max_message) {
          reply_error(nullptr, kInvalidRequest,
                      "message over the " + std::to_string(o_.max_message) + "-byte limit (corral mcp --max-message)");
          stdin_buf_.clear();
          discarding_ = true;
        } else {
          stdin_buf_.append(part);
        }
      }
      if (nl == std::string_view::npos) break;
      if (!discarding_) {
        std::string line;
        line.swap(stdin_buf_);
        handle_line(line);
      }
      discarding_ = false;
      chunk.remove_prefix(nl + 1);
    }
  }
}

void Server::handle_line(std::string_view line) {
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.remove_suffix(1);
  if (line.find_first_not_of(" \t\r") == std::string_view::npos) return;
  json msg = json::parse(line, nullptr, false);
  if (msg.is_discarded()) return reply_error(nullptr, kParseError, "parse error: not valid JSON");
  if (msg.is_array()) return reply_error(nullptr, kInvalidRequest, "JSON-RPC batches are not supported");
  if (!msg.is_object() || msg.value("jsonrpc", json()) != "2.0")
    return reply_error(msg.is_object() && msg.contains("id") ? msg["id"] : json(nullptr), kInvalidRequest,
                       "not a JSON-RPC 2.0 message");
  const bool has_id = msg.contains("id");
  json id = has_id ? msg["id"] : json(nullptr);
  if (has_id && !id.is_string() && !id.is_number_integer())
    return reply_error(nullptr, kInvalidRequest, "id must be a string or an integer");
  if (!msg.contains("method")) return;  // a response to us: we send no requests, so ignore it
  if (!msg["method"].is_string()) return reply_error(id, kInvalidRequest, "method must be a string");
  json params = msg.value("params", json::object());
  if (!params.is_object()) {
    if (has_id) reply_error(id, kInvalidParams, "params must be an object");
    return;
  }
  const std::string method = msg["method"];
  if (has_id) on_request(id, method, params);
  else on_notification(method, params);
}

void Server::on_request(const json& id, const std::string& method, const json& params) {
  if (method == "initialize") return reply(id, initialize(params));
  if (method == "ping") return reply(id, json::object());
  if (method == "tools/list") return reply(id, tools_list());
  if (method == "tools/call") return call_tool(id, params);
  reply_error(id, kMethodNotFound, "method not found: " + method);
}

void Server::on_notification(const std::string& method, const json& params) {
  if (method != "notifications/cancelled") return;  // initialized, roots changes, ...: nothing to do
  json target = params.value("requestId", json());
  if (target.is_null()) return;
  std::erase_if(queued_evals_, [&](const QueuedEval& q) { return q.id == target; });
  for (auto& [rid, p] : pending_) {
    if (p.rpc_id != target || p.cancelled) continue;
    p.cancelled = true;
    if (p.evaluation) worker_lost_ = true;  // the supervisor kills a cancelled evaluation's worker
    send_frame(proto::make_cancel(rid, true));
  }
}

json Server::initialize(const json& params) {
  std::string asked = params.value("protocolVersion", std::string());
  std::string version = kProtocolVersions[0];
  for (const char* v : kProtocolVersions)
    if (asked == v) version = v;
  std::string policy = std::string("mode ") + mode_name(o_.mode.value_or(Mode::workspace_write)) + ", network " +
                       network_name(o_.net.value_or(Network::denied));
  std::string roots;
  for (const auto& w : o_.workspaces) roots += (roots.empty() ? "" : ", ") + w;
  return {{"protocolVersion", version},
          {"capabilities", {{"tools", {{"listChanged", false}}}}},
          {"serverInfo", {{"name", "corral"}, {"title", "corral sandbox"}, {"version", kServerVersion}}},
          {"instructions",
           "corral runs commands, file operations and Python in a sandbox (" + policy +
               (roots.empty() ? std::string(", no workspace") : ", workspace " + roots) +
               "). Relative paths are taken beneath the first workspace; /tmp is this session's private "
               "temp dir. Everything ends when the session ends."}};
}

json Server::tools_list() const {
  json tools = json::array();
  auto with_timeout = [&](json props) {
    props["timeout_seconds"] = {{"type", "number"},
                                {"exclusiveMinimum", 0},
                                {"maximum", static_cast<double>(o_.max_timeout_ms) / 1000},
                                {"description", "Kill the command after this many seconds (default " +
                                                    std::to_string(o_.default_timeout_ms / 1000) + ")."}};
    return props;
  };
  json exec_props = with_timeout(command_schema_properties());
  exec_props["stdin"] = {{"type", "string"}, {"description", "Text fed to the command's standard input."}};
  tools.push_back(
      {{"name", "exec"},
       {"title", "Run a command"},
       {"description",
        "Run a shell command (or an argv list) in the sandbox and wait for it: builds, tests, git, grep, "
        "package managers, any CLI tool. Returns stdout, stderr and the exit code. Use background_start "
        "instead for servers or anything that should keep running."},
       {"inputSchema", {{"type", "object"}, {"properties", exec_props}, {"additionalProperties", false}}},
       {"outputSchema", result_record_schema()}});
  tools.push_back(
      {{"name", "read_file"},
       {"title", "Read a text file"},
       {"description",
        "Read a UTF-8 text file, or a window of it (offset and limit in bytes). Use it instead of cat to look "
        "at source files; truncated: true means more follows."},
       {"inputSchema",
        {{"type", "object"},
         {"properties",
          {{"path", {{"type", "string"}, {"description", "Relative to the workspace, or absolute beneath it or /tmp."}}},
           {"offset", {{"type", "integer"}, {"minimum", 0}, {"description", "First byte to read (default 0)."}}},
           {"limit",
            {{"type", "integer"},
             {"minimum", 1},
             {"maximum", kMaxReadLimit},
             {"description", "Bytes to read (default " + std::to_string(kDefaultReadLimit) + ")."}}}}},
         {"required", {"path"}},
         {"additionalProperties", false}}}});
  tools.push_back(
      {{"name", "write_file"},
       {"title", "Write a text file"},
       {"description",
        "Create or replace a whole text file atomically with the given content. Use it to write code or "
        "configuration instead of echo or heredocs."},
       {"inputSchema",
        {{"type", "object"},
         {"properties",
          {{"path", {{"type", "string"}, {"description", "Relative to the workspace, or absolute beneath it or /tmp."}}},
           {"content", {{"type", "string"}, {"description", "The file's complete new content (UTF-8)."}}}}},
         {"required", {"path", "content"}},
         {"additionalProperties", false}}}});
  tools.push_back(
      {{"name", "list_dir"},
       {"title", "List a directory"},
       {"description", "List a directory's entries with their type, size and modification time."},
       {"inputSchema",
        {{"type", "object"},
         {"properties", {{"path", {{"type", "string"}, {"description", "Directory (default: the workspace root)."}}}}},
         {"additionalProperties", false}}}});
  if (o_.python)
    tools.push_back(
        {{"name", "python"},
         {"title", "Evaluate Python"},
         {"description",
          "Evaluate Python code in a persistent interpreter (variables, imports and functions are kept between "
          "calls in this session). The value of a final expression is returned, with printed output. Use it for "
          "calculations, data processing and quick experiments. reset: true starts a fresh interpreter."},
         {"inputSchema",
          {{"type", "object"},
           {"properties",
            with_timeout({{"code", {{"type", "string"}, {"description", "Python source to run."}}},
                          {"reset", {{"type", "boolean"}, {"description", "Start a fresh interpreter first."}}}})},
           {"additionalProperties", false}}}});
  json bg_props = command_schema_properties();
  tools.push_back(
      {{"name", "background_start"},
       {"title", "Start a background command"},
       {"description",
        "Start a long-running command (a dev server, a watcher, a long build) without waiting for it. Returns "
        "an id for background_poll and background_stop. It ends with the session at the latest."},
       {"inputSchema", {{"type", "object"}, {"properties", bg_props}, {"additionalProperties", false}}}});
  json id_prop = {{"id", {{"type", "string"}, {"description", "The id background_start returned."}}}};
  tools.push_back({{"name", "background_poll"},
                   {"title", "Poll a background command"},
                   {"description",
                    "Get what a background command wrote since the last poll and whether it is still running (with "
                    "its result once it has ended)."},
                   {"inputSchema", {{"type", "object"}, {"properties", id_prop}, {"required", {"id"}}, {"additionalProperties", false}}}});
  json stop_props = id_prop;
  stop_props["force"] = {{"type", "boolean"}, {"description", "Kill at once instead of SIGTERM, grace, SIGKILL."}};
  tools.push_back({{"name", "background_stop"},
                   {"title", "Stop a background command"},
                   {"description", "Stop a background command started in this session."},
                   {"inputSchema", {{"type", "object"}, {"properties", stop_props}, {"required", {"id"}}, {"additionalProperties", false}}}});
  return {{"tools", tools}};
}

std::optional<std::uint64_t> Server::timeout_arg(const json& args, std::string& error) const {
  if (!args.contains("timeout_seconds")) return o_.default_timeout_ms;
  const json& t = args["timeout_seconds"];
  if (!t.is_number() || t.get<double>() <= 0) return error = "timeout_seconds must be a positive number", std::nullopt;
  double ms = t.get<double>() * 1000;
  if (ms > static_cast<double>(o_.max_timeout_ms))
    return error = "timeout_seconds is over this session's maximum of " + std::to_string(o_.max_timeout_ms / 1000) + " s",
           std::nullopt;
  return std::max<std::uint64_t>(1, static_cast<std::uint64_t>(ms));
}

void Server::call_tool(const json& id, const json& params) {
  if (!params.contains("name") || !params["name"].is_string()) return reply_error(id, kInvalidParams, "tools/call needs a name");
  const std::string name = params["name"];
  json args = params.value("arguments", json::object());
  if (!args.is_object()) return reply(id, tool_error("arguments must be an object"));
  std::optional<json> token;
  if (params.contains("_meta") && params["_meta"].is_object() && params["_meta"].contains("progressToken"))
    token = params["_meta"]["progressToken"];
  if (name == "exec") return tool_exec(id, args, token, false);
  if (name == "background_start") return tool_exec(id, args, token, true);
  if (name == "read_file") return tool_read(id, args);
  if (name == "write_file") return tool_write(id, args);
  if (name == "list_dir") return tool_list_dir(id, args);
  if (name == "python" && o_.python) return tool_python(id, args, token);
  if (name == "background_poll") return tool_background_poll(id, args);
  if (name == "background_stop") return tool_background_stop(id, args);
  reply_error(id, kInvalidParams, "unknown tool: " + name);
}

json Server::refusal(const proto::Error& e) const {
  const char* code = proto::EnumNameErrorCode(e.code());
  std::string message = proto::str(e.message());
  return tool_result("refused (" + std::string(code && *code ? code : "error") + "): " + message,
                     json{{"error", code && *code ? code : "error"}, {"message", message}}, true);
}

void Server::start(std::uint64_t id, const proto::Frame& frame, Pending p) {
  json rpc_id = p.rpc_id;
  pending_.emplace(id, std::move(p));
  if (!send_frame(frame)) {
    pending_.erase(id);
    if (!rpc_id.is_null()) reply(rpc_id, tool_error("the corral supervisor went away", "supervisor_gone"));
  }
}

void Server::tool_exec(const json& id, const json& args, std::optional<json> token, bool background) {
  proto::ExecArgs a;
  const bool has_command = args.contains("command"), has_argv = args.contains("argv");
  if (has_command == has_argv) return reply(id, tool_error("give exactly one of command (a string) or argv (an array)"));
  if (has_command) {
    if (!args["command"].is_string() || args["command"].get<std::string>().empty())
      return reply(id, tool_error("command must be a non-empty string"));
    a.shell = args["command"].get<std::string>();
  } else {
    if (!args["argv"].is_array() || args["argv"].empty()) return reply(id, tool_error("argv must be a non-empty array of strings"));
    for (const auto& s : args["argv"]) {
      if (!s.is_string()) return reply(id, tool_error("argv must be a non-empty array of strings"));
      a.argv.push_back(s);
    }
  }
  if (args.contains("cwd")) {
    if (!args["cwd"].is_string()) return reply(id, tool_error("cwd must be a string"));
    a.cwd = args["cwd"];
  }
  if (args.contains("env")) {
    if (!args["env"].is_object()) return reply(id, tool_error("env must be an object of strings"));
    for (const auto& [k, v] : args["env"].items()) {
      if (!v.is_string() || k.empty() || k.find('=') != std::string::npos)
        return reply(id, tool_error("env must map names (without '=') to strings"));
      a.env.emplace_back(k, v.get<std::string>());
    }
  }
  if (!background) {
    std::string error;
    auto timeout = timeout_arg(args, error);
    if (!timeout) return reply(id, tool_error(error));
    a.timeout_ms = *timeout;
    if (args.contains("stdin")) {
      if (!args["stdin"].is_string()) return reply(id, tool_error("stdin must be a string"));
      a.stdin_data = args["stdin"].get<std::string>();
    }
  } else if (args.contains("timeout_seconds") || args.contains("stdin")) {
    return reply(id, tool_error("background commands take no timeout_seconds or stdin"));
  }
  // The session's policy, never the model's.
  a.mode = wire_mode(o_.mode);
  a.network = wire_network(o_.net);
  a.workspaces = o_.workspaces;
  a.deny_read = o_.deny_read;
  a.protect = o_.protect;
  a.memory_bytes = o_.memory;
  a.pids = o_.pids;
  a.cpu_time_ms = o_.cpu_time_ms.value_or(0);
  a.cpus = o_.cpus.value_or(0);
  a.max_output_bytes = o_.max_output;
  a.scope = scope_;
  a.background = background;

  const std::uint64_t rid = next_id();
  Pending p;
  p.rpc_id = id;
  p.progress_token = std::move(token);
  p.on_final = [this, rid, background](const proto::Message& m) {
    Pending& self = pending_.at(rid);
    if (const auto* e = m.body_as_Error()) return reply(self.rpc_id, refusal(*e));
    if (background) {
      const auto* started = m.body_as_BackgroundStarted();
      if (!started) return reply(self.rpc_id, tool_error("unexpected reply from the supervisor", "internal"));
      std::string bid = proto::str(started->id());
      background_.insert(bid);
      return reply(self.rpc_id, tool_result("started background command " + bid, json{{"id", bid}}, false));
    }
    const auto* r = m.body_as_ExecResult();
    if (!r) return reply(self.rpc_id, tool_error("unexpected reply from the supervisor", "internal"));
    json record = result_record(*r, self.out, self.err);
    std::string text = self.out;
    if (!self.err.empty()) text += (text.empty() || text.back() == '\n' ? "" : "\n") + std::string("[stderr]\n") + self.err;
    if (!text.empty() && text.back() != '\n') text += '\n';
    text += "[" + outcome(record) + "]";
    const bool ok = r->status() == proto::ExitStatus::exited && r->exit_code() && *r->exit_code() == 0;
    reply(self.rpc_id, tool_result(text, std::move(record), !ok));
  };
  start(rid, proto::make_exec(rid, a), std::move(p));
}

proto::FileArgs Server::file_args(const std::string& path) const {
  proto::FileArgs f;
  f.path = path;
  f.workspaces = o_.workspaces;
  f.mode = wire_mode(o_.mode);
  f.scope = scope_;
  return f;
}

void Server::tool_read(const json& id, const json& args) {
  if (!args.contains("path") || !args["path"].is_string()) return reply(id, tool_error("path must be a string"));
  const std::string path = args["path"];
  proto::FileArgs f = file_args(path);
  if (args.contains("offset")) {
    if (!args["offset"].is_number_unsigned()) return reply(id, tool_error("offset must be a non-negative integer"));
    f.offset = args["offset"];
  }
  f.max_bytes = kDefaultReadLimit;
  if (args.contains("limit")) {
    if (!args["limit"].is_number_unsigned() || args["limit"].get<std::uint64_t>() == 0 ||
        args["limit"].get<std::uint64_t>() > kMaxReadLimit)
      return reply(id, tool_error("limit must be an integer from 1 to " + std::to_string(kMaxReadLimit)));
    f.max_bytes = args["limit"];
  }
  const std::uint64_t rid = next_id();
  Pending p;
  p.rpc_id = id;
  p.on_final = [this, rid, path](const proto::Message& m) {
    Pending& self = pending_.at(rid);
    if (const auto* e = m.body_as_Error()) return reply(self.rpc_id, refusal(*e));
    const auto* r = m.body_as_ReadResult();
    if (!r) return reply(self.rpc_id, tool_error("unexpected reply from the supervisor", "internal"));
    std::string content = bytes_of(r->data());
    json s = {{"path", path}, {"content", content}, {"offset", r->offset()}, {"file_size", r->file_size()}, {"truncated", r->truncated()}};
    std::string text = content;
    if (r->truncated())
      text += "\n[truncated: bytes " + std::to_string(r->offset()) + "-" + std::to_string(r->offset() + content.size()) +
              " of " + std::to_string(r->file_size()) + "; read on with offset " +
              std::to_string(r->offset() + content.size()) + "]";
    reply(self.rpc_id, tool_result(text, std::move(s), false));
  };
  start(rid, proto::make_read(rid, f), std::move(p));
}

void Server::tool_write(const json& id, const json& args) {
  if (!args.contains("path") || !args["path"].is_string()) return reply(id, tool_error("path must be a string"));
  if (!args.contains("content") || !args["content"].is_string()) return reply(id, tool_error("content must be a string"));
  const std::string path = args["path"];
  proto::FileArgs f = file_args(path);
  f.data = args["content"].get<std::string>();
  const std::uint64_t rid = next_id();
  Pending p;
  p.rpc_id = id;
  p.on_final = [this, rid, path](const proto::Message& m) {
    Pending& self = pending_.at(rid);
    if (const auto* e = m.body_as_Error()) return reply(self.rpc_id, refusal(*e));
    const auto* r = m.body_as_WriteResult();
    if (!r) return reply(self.rpc_id, tool_error("unexpected reply from the supervisor", "internal"));
    reply(self.rpc_id, tool_result("wrote " + std::to_string(r->bytes()) + " bytes to " + path,
                                   json{{"path", path}, {"bytes", r->bytes()}}, false));
  };
  start(rid, proto::make_write(rid, f), std::move(p));
}

void Server::tool_list_dir(const json& id, const json& args) {
  std::string path = o_.workspaces.empty() ? "/tmp" : ".";
  if (args.contains("path")) {
    if (!args["path"].is_string()) return reply(id, tool_error("path must be a string"));
    path = args["path"];
  }
  const std::uint64_t rid = next_id();
  Pending p;
  p.rpc_id = id;
  p.on_final = [this, rid, path](const proto::Message& m) {
    Pending& self = pending_.at(rid);
    if (const auto* e = m.body_as_Error()) return reply(self.rpc_id, refusal(*e));
    const auto* r = m.body_as_ListResult();
    if (!r) return reply(self.rpc_id, tool_error("unexpected reply from the supervisor", "internal"));
    json entries = json::array();
    std::string text;
    if (r->entries())
      for (const auto* e : *r->entries()) {
        entries.push_back({{"name", proto::str(e->name())}, {"type", proto::str(e->type())}, {"size", e->size()}, {"mtime_ms", e->mtime_ms()}});
        text += proto::str(e->name()) + (proto::str(e->type()) == "dir" ? "/" : "") + "\t" + proto::str(e->type()) + "\t" +
                std::to_string(e->size()) + "\n";
      }
    if (r->truncated()) text += "[listing truncated]\n";
    if (text.empty()) text = "(empty directory)\n";
    reply(self.rpc_id, tool_result(text, json{{"path", path}, {"entries", entries}, {"truncated", r->truncated()}}, false));
  };
  start(rid, proto::make_list(rid, file_args(path)), std::move(p));
}

void Server::tool_python(const json& id, const json& args, std::optional<json> token) {
  const bool reset = args.contains("reset") && args["reset"].is_boolean() && args["reset"].get<bool>();
  if (args.contains("reset") && !args["reset"].is_boolean()) return reply(id, tool_error("reset must be a boolean"));
  if (args.contains("code") && !args["code"].is_string()) return reply(id, tool_error("code must be a string"));
  if (!args.contains("code") && !reset) return reply(id, tool_error("give code to evaluate (or reset: true)"));
  std::string code = args.value("code", std::string("None"));
  std::string error;
  auto timeout = timeout_arg(args, error);
  if (!timeout) return reply(id, tool_error(error));
  if (worker_started_) return python_eval(id, code, reset || worker_lost_, *timeout, std::move(token));
  queued_evals_.push_back({id, code, reset, *timeout, std::move(token)});
  if (worker_starting_) return;
  worker_starting_ = true;

  proto::WorkerStartArgs w;
  w.name = kWorkerName;
  w.scope = scope_;
  w.python = true;
  w.mode = wire_mode(o_.mode);
  w.network = wire_network(o_.net);
  w.workspaces = o_.workspaces;
  w.memory_bytes = o_.memory;
  w.pids = o_.pids;
  w.cpus = o_.cpus.value_or(0);
  const std::uint64_t rid = next_id();
  Pending p;
  p.rpc_id = nullptr;  // serves every queued call; a cancel reaches them once they are evaluations
  p.on_final = [this](const proto::Message& m) {
    worker_starting_ = false;
    auto waiting = std::move(queued_evals_);
    queued_evals_.clear();
    if (const auto* e = m.body_as_Error()) {
      for (auto& q : waiting) reply(q.id, refusal(*e));
      return;
    }
    worker_started_ = true;
    for (auto& q : waiting) python_eval(q.id, q.code, false, q.timeout_ms, std::move(q.token));
  };
  start(rid, proto::make_worker_start(rid, w), std::move(p));
}

void Server::python_eval(const json& id, const std::string& code, bool reset, std::uint64_t timeout_ms,
                         std::optional<json> token) {
  proto::WorkerEvalArgs e;
  e.name = kWorkerName;
  e.scope = scope_;
  e.request = dump(json{{"code", code}});
  e.timeout_ms = timeout_ms;
  e.reset = reset;
  const std::uint64_t rid = next_id();
  Pending p;
  p.rpc_id = id;
  p.progress_token = std::move(token);
  p.evaluation = true;
  p.on_final = [this, rid](const proto::Message& m) {
    Pending& self = pending_.at(rid);
    if (const auto* err = m.body_as_Error()) {
      const auto ec = err->code();
      if (ec == proto::ErrorCode::state_lost || ec == proto::ErrorCode::eval_timeout || ec == proto::ErrorCode::cancelled)
        worker_lost_ = true;  // the next call resets it
      json r = refusal(*err);
      if (worker_lost_)
        r["content"][0]["text"] = r["content"][0]["text"].get<std::string>() +
                                  "\nThe interpreter's state is lost; the next python call starts a fresh one.";
      return reply(self.rpc_id, r);
    }
    worker_lost_ = false;
    const auto* r = m.body_as_WorkerEvalResult();
    if (!r) return reply(self.rpc_id, tool_error("unexpected reply from the supervisor", "internal"));
    json answer = json::parse(bytes_of(r->reply()), nullptr, false);
    if (!answer.is_object()) return reply(self.rpc_id, tool_error(bytes_of(r->reply()), "worker_error"));
    const bool ok = answer.value("ok", false);
    std::string text = answer.value("stdout", std::string());
    std::string err = answer.value("stderr", std::string());
    if (!err.empty()) text += "[stderr]\n" + err;
    if (!ok && answer["error"].is_string()) text += answer["error"].get<std::string>();
    else if (answer.contains("result") && answer["result"].is_string()) text += answer["result"].get<std::string>();
    if (text.empty()) text = ok ? "(no output)" : "(failed)";
    json s = {{"ok", ok},
              {"value", answer.value("result", json())},
              {"stdout", answer.value("stdout", std::string())},
              {"stderr", err},
              {"error", answer.value("error", json())}};
    reply(self.rpc_id, tool_result(text, std::move(s), !ok));
  };
  start(rid, proto::make_worker_eval(rid, e), std::move(p));
}

void Server::tool_background_poll(const json& id, const json& args) {
  if (!args.contains("id") || !args["id"].is_string()) return reply(id, tool_error("id must be a string"));
  const std::string bid = args["id"];
  if (!background_.count(bid)) return reply(id, tool_error("no background command " + bid + " in this session", "not_found"));
  const std::uint64_t rid = next_id();
  Pending p;
  p.rpc_id = id;
  p.on_final = [this, rid, bid](const proto::Message& m) {
    Pending& self = pending_.at(rid);
    if (const auto* e = m.body_as_Error()) return reply(self.rpc_id, refusal(*e));
    const auto* r = m.body_as_PollReply();
    if (!r) return reply(self.rpc_id, tool_error("unexpected reply from the supervisor", "internal"));
    std::string out = bytes_of(r->stdout()), err = bytes_of(r->stderr());
    json s = {{"id", bid}, {"state", proto::str(r->state())}, {"stdout", out}, {"stderr", err}};
    std::string text = out + (err.empty() ? "" : "[stderr]\n" + err);
    if (!text.empty() && text.back() != '\n') text += '\n';
    if (const auto* res = r->result()) {
      json record = result_record(*res, "", "");
      record.erase("stdout");
      record.erase("stderr");
      text += "[ended: " + outcome(record) + "]";
      s["result"] = std::move(record);
      background_.erase(bid);  // the supervisor forgets it after this poll
    } else {
      text += "[" + proto::str(r->state()) + "]";
    }
    reply(self.rpc_id, tool_result(text, std::move(s), false));
  };
  start(rid, proto::make_poll(rid, bid), std::move(p));
}

void Server::tool_background_stop(const json& id, const json& args) {
  if (!args.contains("id") || !args["id"].is_string()) return reply(id, tool_error("id must be a string"));
  if (args.contains("force") && !args["force"].is_boolean()) return reply(id, tool_error("force must be a boolean"));
  const std::string bid = args["id"];
  if (!background_.count(bid)) return reply(id, tool_error("no background command " + bid + " in this session", "not_found"));
  const std::uint64_t rid = next_id();
  Pending p;
  p.rpc_id = id;
  p.on_final = [this, rid, bid](const proto::Message& m) {
    Pending& self = pending_.at(rid);
    if (const auto* e = m.body_as_Error()) return reply(self.rpc_id, refusal(*e));
    reply(self.rpc_id, tool_result("stopping " + bid + "; poll it for its result", json{{"id", bid}, {"stopping", true}}, false));
  };
  start(rid, proto::make_background_stop(rid, bid, args.value("force", false)), std::move(p));
}

bool Server::read_supervisor() {
  std::uint8_t buf[kReadChunk];
  for (;;) {
    ssize_t n = ::recv(client_->fd(), buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0) return false;
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno == EAGAIN || errno == EWOULDBLOCK;
    }
    proto::DecodeError error;
    if (!splitter_.feed({buf, static_cast<std::size_t>(n)}, error)) return complain(kFailed, error.message), false;
    std::vector<std::uint8_t> payload;
    while (splitter_.next(payload)) {
      const proto::Message* msg = proto::verify_payload(payload, client_->server_max_frame() ? client_->server_max_frame() : proto::kDefaultMaxFrame, error);
      if (!msg) return complain(kFailed, "bad frame from the supervisor: " + error.message), false;
      dispatch(*msg);
    }
  }
}

void Server::dispatch(const proto::Message& msg) {
  if (msg.request_id() == 0) {
    if (const auto* e = msg.body_as_Error()) complain(kFailed, "supervisor: " + proto::str(e->message()));
    return;
  }
  auto it = pending_.find(msg.request_id());
  if (it == pending_.end()) return;
  Pending& p = it->second;
  switch (msg.body_type()) {
    case proto::Body::OutputChunk: {
      const auto* c = msg.body_as_OutputChunk();
      std::string& into = c->stream() == proto::Stream::err ? p.err : p.out;
      // The supervisor already caps output at max_output in total; this guards our memory anyway.
      if (p.out.size() + p.err.size() < o_.max_output) into += bytes_of(c->data());
      if (p.progress_token && Clock::now() - p.last_progress >= 1s) {
        p.last_progress = Clock::now();
        p.progress += 1;
        send({{"jsonrpc", "2.0"},
              {"method", "notifications/progress"},
              {"params", {{"progressToken", *p.progress_token}, {"progress", p.progress}, {"message", "output received"}}}});
      }
      return;
    }
    case proto::Body::HostCall:  // the python tool serves no host calls
      send_frame(proto::make_host_reply(msg.request_id(), msg.body_as_HostCall()->call_id(), {}, "corral mcp serves no host calls"));
      return;
    case proto::Body::AuthorizationRequest:
      send_frame(proto::make_authorization(msg.request_id(), false, "corral mcp does not authorize launches"));
      return;
    default: break;
  }
  Pending done = std::move(p);
  // on_final looks itself up by id: keep the entry until it returns, then drop it.
  if (!done.cancelled) {
    auto on_final = std::move(done.on_final);
    it->second = std::move(done);
    on_final(msg);
  }
  pending_.erase(msg.request_id());
}

void Server::tick() {
  const auto now = Clock::now();
  for (auto& [rid, p] : pending_) {
    if (!p.progress_token || p.cancelled || now - p.last_progress < kProgressEvery) continue;
    p.last_progress = now;
    p.progress += 1;
    send({{"jsonrpc", "2.0"},
          {"method", "notifications/progress"},
          {"params", {{"progressToken", *p.progress_token}, {"progress", p.progress}, {"message", "still running"}}}});
  }
}

}  // namespace

int run_mcp(const McpOptions& options) {
  auto client = proto::Client::connect(options.socket, "corral-mcp");
  if (!client) return complain(kFailed, client.error().message);
  Server server(options, std::move(*client));
  return server.run();
}

}  // namespace corral::cli
