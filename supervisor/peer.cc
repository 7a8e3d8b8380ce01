#include <sys/socket.h>
#include "supervisor/peer.h"

#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <string>

namespace corral::supervisor {

namespace {

// `name` and `nspid` as /proc/PID/status prints them after "Name:" and "NSpid:".
bool is_corral_init(const std::string& name, const std::string& nspid) {
  auto trim = [](const std::string& s) {
    const auto b = s.find_first_not_of(" \t");
    const auto e = s.find_last_not_of(" \t");
    return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
  };
  if (trim(name) != "corral-init") return false;
  const std::string ids = trim(nspid);
  // At least two ids (a namespace below the reader's), the innermost 1.
  const auto last = ids.find_last_of(" \t");
  return last != std::string::npos && ids.substr(last + 1) == "1";
}

}  // namespace

Lineage lineage(pid_t pid, pid_t ancestor, int pidfd) {
  // 0: the peer lives in a PID namespace we cannot see into; nothing can be vouched for.
  if (pid <= 0) return Lineage::unverifiable;
  const pid_t peer = pid;
  Lineage answer = Lineage::stranger;
  // Bounded: a chain is never deeper than the pid space.
  for (int depth = 0; pid > 1 && depth < 4096; ++depth) {
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    pid_t ppid = -1;
    std::string name, nspid;
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("PPid:", 0) == 0) ppid = static_cast<pid_t>(std::stol(line.substr(5)));
      else if (line.rfind("Name:", 0) == 0) name = line.substr(5);
      else if (line.rfind("NSpid:", 0) == 0) nspid = line.substr(6);
    }
    if (ppid < 0) return Lineage::unverifiable;  // gone mid-walk
    if (is_corral_init(name, nspid)) {
      answer = Lineage::sandboxed;
      break;
    }
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

namespace corral::supervisor {

int refuse_descriptors(int socket_fd) {
#ifndef SO_PASSRIGHTS
  constexpr int SO_PASSRIGHTS = 83;  // include/uapi/asm-generic/socket.h (the headers here predate it)
#endif
  const int off = 0;
  return ::setsockopt(socket_fd, SOL_SOCKET, SO_PASSRIGHTS, &off, sizeof off) == 0 ? 0 : errno;
}

std::vector<gid_t> peer_groups(int socket_fd) {
  std::vector<gid_t> groups(64);
  for (int attempt = 0; attempt < 4; ++attempt) {
    socklen_t len = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
    if (::getsockopt(socket_fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &len) == 0) {
      groups.resize(len / sizeof(gid_t));
      return groups;
    }
    if (errno != ERANGE) break;
    groups.resize(len / sizeof(gid_t) + 1);
  }
  groups.clear();
  return groups;
}

}  // namespace corral::supervisor
