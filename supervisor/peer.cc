#include "supervisor/peer.h"

#include <fstream>
#include <string>

namespace corral::supervisor {

bool descends_from(pid_t pid, pid_t ancestor) {
  // Bounded: a pid chain is never deeper than the pid space, and a racing exit ends it.
  for (int depth = 0; pid > 1 && depth < 4096; ++depth) {
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    pid_t ppid = 0;
    for (std::string line; std::getline(status, line);)
      if (line.rfind("PPid:", 0) == 0) ppid = static_cast<pid_t>(std::stol(line.substr(5)));
    if (ppid == ancestor) return true;
    pid = ppid;
  }
  return false;
}

}  // namespace corral::supervisor
