#include <iomanip>
#include <iostream>

#include "runtime/units.h"
#include "tools/commands.h"
#include "tools/json_writer.h"
#include "worker_proto/client.h"

namespace corral::cli {

int run_status(const StatusOptions& o) {
  std::string error;
  auto client = proto::Client::connect(o.socket, error, "corral-status");
  if (!client) return complain(kFailed, error);
  if (!client->send(proto::make_status_request(1))) return complain(kFailed, client->error());
  proto::Received r;
  if (!client->receive(r)) return complain(kFailed, client->error());
  if (const proto::Error* e = r.msg->body_as_Error()) return complain(kFailed, proto::str(e->message()));
  const proto::StatusReply* s = r.msg->body_as_StatusReply();
  if (!s) return complain(kFailed, "unexpected reply to a status request");
  auto layers = proto::read_layers(s->layers());

  if (o.json) {
    JsonWriter j;
    j.begin_object();
    j.field("server_version", proto::str(s->server_version()));
    j.field("protocol_version", static_cast<std::uint64_t>(s->protocol_version()));
    j.field("pid", static_cast<std::uint64_t>(s->pid()));
    j.field("socket", proto::str(s->socket_path()));
    j.field("uptime_ms", s->uptime_ms());
    j.field("connections", static_cast<std::uint64_t>(s->connections()));
    j.field("running_commands", static_cast<std::uint64_t>(s->running_commands()));
    j.begin_array("layers");
    for (const auto& l : layers) {
      j.begin_object().field("name", l.name).field("available", l.available).field("reason", l.reason).end_object();
    }
    j.end_array();
    j.end_object();
    std::cout << j.str() << "\n";
    return kOk;
  }
  std::cout << proto::str(s->server_version()) << " (protocol " << s->protocol_version() << "), pid " << s->pid()
            << ", up " << format_duration(std::chrono::milliseconds(s->uptime_ms() / 1000 * 1000)) << "\n"
            << "socket: " << proto::str(s->socket_path()) << "\n"
            << "connections: " << s->connections() << ", running commands: " << s->running_commands() << "\n"
            << "layers (what this supervisor enforces on this host):\n";
  for (const auto& l : layers)
    std::cout << "  " << std::left << std::setw(17) << l.name << (l.available ? "yes  " : "no   ") << l.reason << "\n";
  return kOk;
}

}  // namespace corral::cli
