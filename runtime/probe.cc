#include "runtime/probe.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/unique_fd.h"

namespace corral {

StatusOr<ProbeReport> probe_in_child(ProbeReport (*attempt)(const void* arg), const void* arg) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return Status::from_errno("pipe", errno);
  UniqueFd rd(fds[0]), wr(fds[1]);
  pid_t pid = ::fork();
  if (pid < 0) return Status::from_errno("fork", errno);
  if (pid == 0) {
    ProbeReport r = attempt(arg);
    [[maybe_unused]] ssize_t n = ::write(wr.get(), &r, sizeof r);
    ::_exit(0);
  }
  wr.reset();
  ProbeReport r{-1, 0};
  ssize_t n;
  do n = ::read(rd.get(), &r, sizeof r);
  while (n < 0 && errno == EINTR);
  int wstatus = 0;
  while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  if (n != static_cast<ssize_t>(sizeof r))
    return Status::error("verify", 0, "probe child died before reporting (wait status " + std::to_string(wstatus) + ")");
  return r;
}

const LayerReport* find_layer(const std::vector<LayerReport>& reports, Layer layer) {
  for (const auto& r : reports)
    if (r.layer == layer) return &r;
  return nullptr;
}

Status require_layers(const std::vector<LayerReport>& reports, const std::vector<Layer>& needed) {
  for (Layer layer : needed) {
    const LayerReport* found = find_layer(reports, layer);
    if (!found)
      return Status::error("layer", ENOTSUP,
                           std::string("layer ") + layer_name(layer) +
                               " was never probed on this host (refusing rather than running with less isolation)");
    if (!found->available)
      return Status::error("layer", ENOTSUP,
                           std::string("this host cannot enforce ") + found->name + ": " + found->reason +
                               " (refusing rather than running with less isolation)");
  }
  return {};
}

// The engine's own guarantees; the isolation layers are probed by SandboxHost (sandbox.h).
std::vector<LayerReport> probe_host() {
  return {
      layer_report(Layer::process_tree, true,
       "each command runs under its own init in a PID namespace (or its own process group); stop, "
       "terminate and exit end the whole tree"),
      layer_report(Layer::scrubbed_env, true, "the command sees only the request's environment plus PATH, HOME, TMPDIR"),
      layer_report(Layer::private_tmp, true,
                   "each scope gets its own 0700 temp dir, seen as /tmp inside, removed when it closes"),
  };
}

}  // namespace corral
