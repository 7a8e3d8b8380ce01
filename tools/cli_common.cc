#include <fcntl.h>
#include <sys/stat.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

#include <cerrno>
#include <cstring>
#include <optional>
#include <iostream>

#include "runtime/policy.h"
#include "runtime/unique_fd.h"
#include "runtime/units.h"
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

// Reads `name` ("-": our own stdin) up to `limit` bytes and no further: an endless source is
// refused once past the limit, not read to the end of memory. The message names `what`.
std::optional<std::string> read_input(const std::string& name, std::size_t limit, const std::string& what,
                                      std::string& error) {
  const bool own = name == "-";
  const std::string shown = own ? std::string("stdin") : name;
  UniqueFd opened(own ? -1 : ::open(name.c_str(), O_RDONLY | O_CLOEXEC));  // ours to close; stdin is not
  const int fd = own ? 0 : opened.get();
  if (fd < 0) return error = what + ": cannot open " + name + ": " + std::strerror(errno), std::nullopt;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) return error = what + ": " + shown + " is a directory", std::nullopt;
  std::string data;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return error = what + ": reading " + shown + ": " + std::strerror(errno), std::nullopt;
    if (n == 0) return data;
    data.append(buf, static_cast<std::size_t>(n));
    if (data.size() > limit)
      return error = what + ": more than " + format_size(limit) + " (the limit); nothing was done", std::nullopt;
  }
}

std::string absolute(const std::string& p) {
  if (p.empty() || p[0] == '/') return p;
  char buf[4096];
  return ::getcwd(buf, sizeof buf) ? std::string(buf) + "/" + p : p;
}

std::optional<proto::Mode> wire_mode(std::optional<Mode> mode) {
  if (!mode) return std::nullopt;
  switch (*mode) {
    case Mode::read_only: return proto::Mode::read_only;
    case Mode::danger_full_access: return proto::Mode::danger_full_access;
    case Mode::workspace_write: break;
  }
  return proto::Mode::workspace_write;
}

std::optional<proto::Network> wire_network(std::optional<Network> net) {
  if (!net) return std::nullopt;
  return *net == Network::allowed ? proto::Network::allowed : proto::Network::denied;
}

bool run_shell(const std::string& cmd, std::string_view input, std::string& output, std::string& error) {
  int in[2], out[2];
  if (::pipe2(in, O_CLOEXEC) < 0) return error = "pipe failed", false;
  if (::pipe2(out, O_CLOEXEC) < 0) {
    ::close(in[0]);
    ::close(in[1]);
    return error = "pipe failed", false;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  const char* argv[] = {"/bin/sh", "-c", cmd.c_str(), nullptr};
  pid_t pid = -1;
  int rc = posix_spawn(&pid, "/bin/sh", &fa, nullptr, const_cast<char**>(argv), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(in[0]);
  ::close(out[1]);
  if (rc != 0) {
    ::close(in[1]);
    ::close(out[0]);
    return error = "cannot run /bin/sh", false;
  }
  // Small inputs: write all, then read all (a command that reads nothing still gets EOF).
  ::signal(SIGPIPE, SIG_IGN);
  write_all(in[1], input);
  ::close(in[1]);
  char buf[65536];
  ssize_t n;
  while ((n = ::read(out[0], buf, sizeof buf)) > 0) output.append(buf, static_cast<std::size_t>(n));
  ::close(out[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    error = "failed (" + (WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status)) : std::string("killed")) + ")";
    return false;
  }
  return true;
}

int request(const std::string& socket, const proto::Frame& frame, proto::Received& reply) {
  auto client = proto::Client::connect(socket, "corral-cli");
  if (!client) return complain(kFailed, client.error().message);
  auto got = (*client)->call(1, frame);
  if (!got) return complain(kFailed, got.error().message);
  reply = std::move(*got);
  if (const proto::Error* e = reply.msg->body_as_Error()) return complain(kFailed, proto::str(e->message()));
  return kOk;
}

}  // namespace corral::cli
