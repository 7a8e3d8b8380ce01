#include <iomanip>
#include <iostream>

#include "runtime/units.h"
#include "tools/commands.h"
#include "supervisor/json_text.h"
#include "worker_proto/client.h"

namespace corral::cli {

namespace {

// How a request's policy is decided (docs/threat-model.md "Scopes narrow"), as status prints it.
constexpr const char* kPolicyRules[] = {
    "an explicit --mode/--net always holds; left out, a request gets its scope's (outside a named scope: "
    "workspace-write, denied)",
    "a named scope is a ceiling for everything in it (commands, background commands, workers, authorized "
    "launches, file tools, child scopes): read-only < workspace-write < danger-full-access, denied < allowed, "
    "workspaces beneath the scope's, ro binds only in a read-only scope, caps never above the scope's "
    "(no cap asked: the scope's)",
    "the scope's --deny-read and --protect always apply, added to the request's; file tools obey them too",
    "a request over its ceiling is refused, naming both sides; a connection's own scope and a uid's default "
    "scope have no ceiling",
    "network denied: the command's own network namespace (servers on its own loopback work); socket families "
    "AF_UNIX, AF_INET, AF_INET6 and NETLINK_ROUTE only; AF_VSOCK refused in every mode but danger-full-access",
    "a layer a request needs and this host lacks, or never probed, refuses the request (nothing fails open)",
};

}  // namespace

int run_status(const StatusOptions& o) {
  auto client = proto::Client::connect(o.socket, "corral-status");
  if (!client) return complain(kFailed, client.error().message);
  if (auto sent = (*client)->send(proto::make_status_request(1)); !sent) return complain(kFailed, sent.error().message);
  auto r = (*client)->receive();
  if (!r) return complain(kFailed, r.error().message);
  if (const proto::Error* e = r->msg->body_as_Error()) return complain(kFailed, proto::str(e->message()));
  const proto::StatusReply* s = r->msg->body_as_StatusReply();
  if (!s) return complain(kFailed, "unexpected reply to a status request");
  auto layers = proto::read_layers(s->layers());
  auto defaults = proto::read_bounds(s->defaults());
  // A bound's value as its option takes it (0: none).
  auto shown = [](const proto::BoundInfo& d) -> std::string {
    if (d.value == 0) return "none";
    if (d.name == "memory" || d.name == "temp-size" || d.name == "max-output") return format_size(d.value);
    if (d.name == "timeout") return format_duration(std::chrono::milliseconds(d.value));
    return std::to_string(d.value);
  };

  if (o.json) {
    Json j = Json::object();
    j["server_version"] = proto::str(s->server_version());
    j["protocol_version"] = s->protocol_version();
    j["pid"] = s->pid();
    j["socket"] = proto::str(s->socket_path());
    j["uptime_ms"] = s->uptime_ms();
    j["connections"] = s->connections();
    j["running_commands"] = s->running_commands();
    Json list = Json::array();
    for (const auto& l : layers) list.push_back({{"name", l.name}, {"available", l.available}, {"reason", l.reason}});
    j["layers"] = std::move(list);
    Json bounds = Json::array();
    for (const auto& d : defaults)
      bounds.push_back({{"name", d.name}, {"value", d.value}, {"shown", shown(d)}, {"enforced", d.enforced}, {"how", d.how}});
    j["defaults"] = std::move(bounds);
    j["policy_rules"] = Json::array();
    for (const char* rule : kPolicyRules) j["policy_rules"].push_back(rule);
    std::cout << json_text(j) << "\n";
    return kOk;
  }
  std::cout << proto::str(s->server_version()) << " (protocol " << s->protocol_version() << "), pid " << s->pid()
            << ", up " << format_duration(std::chrono::milliseconds(s->uptime_ms() / 1000 * 1000)) << "\n"
            << "socket: " << proto::str(s->socket_path()) << "\n"
            << "connections: " << s->connections() << ", running commands: " << s->running_commands() << "\n"
            << "layers (what this supervisor enforces on this host):\n";
  for (const auto& l : layers)
    std::cout << "  " << std::left << std::setw(17) << l.name << (l.available ? "yes  " : "no   ") << l.reason << "\n";
  std::cout << "default bounds (a request without the cap gets these; 0 asks for none):\n";
  for (const auto& d : defaults)
    std::cout << "  " << std::left << std::setw(11) << d.name << std::setw(8) << shown(d)
              << (d.enforced ? "yes  " : "no   ") << d.how << "\n";
  std::cout << "policy rules:\n";
  for (const char* rule : kPolicyRules) std::cout << "  - " << rule << "\n";
  return kOk;
}

}  // namespace corral::cli
