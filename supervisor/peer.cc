#include "supervisor/peer.h"

#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <string>

namespace corral::supervisor {

Lineage lineage(pid_t pid, pid_t ancestor, int pidfd) {
  // 0: the peer lives in a PID namespace we cannot see into; nothing can be vouched for.
  if (pid <= 0) return Lineage::unverifiable;
  const pid_t peer = pid;
  Lineage answer = Lineage::stranger;
  // Bounded: a chain is never deeper than the pid space.
  for (int depth = 0; pid > 1 && depth < 4096; ++depth) {
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    pid_t ppid = -1;
    for (std::string line; std::getline(status, line);)
      if (line.rfind("PPid:", 0) == 0) ppid = static_cast<pid_t>(std::stol(line.substr(5)));
    if (ppid < 0) return Lineage::unverifiable;  // gone mid-walk
    if (ppid == ancestor) {
      answer = Lineage::ours;
      break;
    }
    pid = ppid;
  }
  if (answer == Lineage::stranger) {
    // The pid we walked from must still be the peer: a dead peer's pid may have been reused.
    if (pidfd >= 0) {
      if (::syscall(SYS_pidfd_send_signal, pidfd, 0, nullptr, 0) < 0) return Lineage::unverifiable;
    } else if (::kill(peer, 0) < 0 && errno == ESRCH) {
      return Lineage::unverifiable;
    }
  }
  return answer;
}

bool descends_from(pid_t pid, pid_t ancestor) { return lineage(pid, ancestor) == Lineage::ours; }

}  // namespace corral::supervisor
