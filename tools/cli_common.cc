#include <unistd.h>

#include <cerrno>
#include <iostream>

#include "runtime/policy.h"
#include "tools/commands.h"
#include "worker_proto/client.h"

namespace corral::cli {

int complain(int code, const std::string& message) {
  std::cerr << "corral: " << message << "\n";
  return code;
}

void write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return;  // a closed stdout must not stop us from reporting the exit status
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
}

std::string absolute(const std::string& p) {
  if (p.empty() || p[0] == '/') return p;
  char buf[4096];
  return ::getcwd(buf, sizeof buf) ? std::string(buf) + "/" + p : p;
}

bool parse_mode_arg(const std::string& text, proto::Mode& mode, std::string& error) {
  auto m = parse_mode(text);
  if (!m.ok()) return error = "--mode: " + m.status().message(), false;
  mode = *m == Mode::read_only            ? proto::Mode::read_only
         : *m == Mode::danger_full_access ? proto::Mode::danger_full_access
                                          : proto::Mode::workspace_write;
  return true;
}

bool parse_net_arg(const std::string& text, proto::Network& net, std::string& error) {
  auto n = parse_network(text);
  if (!n.ok()) return error = "--net: " + n.status().message(), false;
  net = *n == Network::allowed ? proto::Network::allowed : proto::Network::denied;
  return true;
}

int request(const std::string& socket, const proto::Frame& frame, proto::Received& reply) {
  std::string error;
  auto client = proto::Client::connect(socket, error, "corral-cli");
  if (!client) return complain(kFailed, error);
  if (!client->call(1, frame, reply)) return complain(kFailed, client->error());
  if (const proto::Error* e = reply.msg->body_as_Error()) return complain(kFailed, proto::str(e->message()));
  return kOk;
}

}  // namespace corral::cli
