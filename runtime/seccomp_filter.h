// The seccomp layer: a deny-list BPF filter compiled by libseccomp in the parent and installed
// by the child between clone and exec with one prctl and one seccomp syscall, no allocation.
//
// The filter allows by default and refuses the syscalls a sandboxed command has no business
// making: kernel modules and kexec, other processes' memory (ptrace, process_vm_*), mounts and
// namespaces (so the mount view and namespaces the engine built stay as built), keyrings, bpf,
// perf, userfaultfd, io_uring (its opcodes are never seen by seccomp), raw I/O ports, file
// handles, TIOCSTI. Socket families: with deny_network an allowlist (AF_UNIX, AF_INET,
// AF_INET6, AF_NETLINK with NETLINK_ROUTE); with deny_vsock, AF_VSOCK is refused.
// Needs Linux >= 3.17 (seccomp syscall); the kernel default here is 6.x.
#pragma once

#include <linux/filter.h>

#include <cstddef>
#include <vector>

#include "runtime/status.h"

namespace corral {

struct SeccompPolicy {
  // Network denied: socket() and socketpair() accept only AF_UNIX, AF_INET, AF_INET6 and
  // AF_NETLINK with protocol NETLINK_ROUTE; every other family (today's and any the kernel
  // adds later) fails with EAFNOSUPPORT. IP stays usable because the network namespace is the
  // barrier: servers on the command's own loopback work, nothing else is reachable. The
  // allowlist keeps the command off the kernel's other socket families (packet, vsock,
  // bluetooth, other netlink families, ...).
  bool deny_network = true;
  // AF_VSOCK (the hypervisor's agents; not behind any network namespace) fails with
  // EAFNOSUPPORT. Set in every mode but danger-full-access, whatever the network.
  bool deny_vsock = true;
  // true (the confining modes): every connect() stops for the sandbox's broker
  // (SECCOMP_RET_USER_NOTIF, see runtime/connect_broker.h), which performs it and returns its
  // result; AF_UNIX datagram sockets (SOCK_DGRAM, and SOCK_RAW, which AF_UNIX turns into
  // SOCK_DGRAM) cannot be created: a datagram socket names its destination on every
  // sendto/sendmsg/sendmmsg, inside memory the filter cannot read. docs/threat-model.md, "Host IPC".
  bool broker_connect = false;
};

// A compiled classic-BPF program for SECCOMP_SET_MODE_FILTER. Move-only; prog() points into
// this object and stays valid while it lives (moving transfers the buffer).
class SeccompProgram {
 public:
  SeccompProgram() = default;
  SeccompProgram(SeccompProgram&& other) noexcept;
  SeccompProgram& operator=(SeccompProgram&& other) noexcept;
  SeccompProgram(const SeccompProgram&) = delete;
  SeccompProgram& operator=(const SeccompProgram&) = delete;
  ~SeccompProgram() = default;

  // What the child passes to install_seccomp(); nullptr for a default-constructed program.
  const struct sock_fprog* prog() const { return filter_.empty() ? nullptr : &fprog_; }
  // Number of BPF instructions (the kernel caps a program at 4096).
  std::size_t instructions() const { return filter_.size(); }

 private:
  friend StatusOr<SeccompProgram> build_seccomp_program(const struct SeccompPolicy& policy);
  explicit SeccompProgram(std::vector<struct sock_filter> filter);

  std::vector<struct sock_filter> filter_;
  struct sock_fprog fprog_ {};
};

// Parent side: builds the filter for the native architecture and exports it to BPF.
// Syscalls this libseccomp version does not know, or that the native architecture lacks, are
// skipped. Fails (step "seccomp") only if libseccomp or the export fails.
StatusOr<SeccompProgram> build_seccomp_program(const SeccompPolicy& policy);

// Child side, async-signal-safe, no allocation: sets no_new_privs, then installs `prog` for the
// calling thread. Returns 0, or the errno of the failing prctl/seccomp call (EINVAL for a null
// prog). The filter is inherited by every descendant and survives exec.
int install_seccomp(const struct sock_fprog* prog) noexcept;

// The same, for a program with SECCOMP_RET_USER_NOTIF rules: installs it with
// SECCOMP_FILTER_FLAG_NEW_LISTENER and stores the listener fd (close-on-exec, owned by the
// caller) in *listener. EBUSY: a filter above us already has a listener (Linux refuses a second).
int install_seccomp_with_listener(const struct sock_fprog* prog, int* listener) noexcept;

// Host probe for the host-IPC layer: in a forked child, installs a filter that sends connect()
// to a listener and checks that a connect() made there is seen, answered, and fails with the
// answer's errno. Ok, or the step and errno that say why not (EBUSY: nested listener).
Status probe_seccomp_notify();

// Host probe: builds the default filter here, installs it in a forked child and checks there
// that a denied syscall (unshare) fails with EPERM, socket(AF_PACKET) with EAFNOSUPPORT and
// socket(AF_INET) works.
// Ok, or the step ("seccomp", "fork", "install", "verify") and errno that say why not.
Status probe_seccomp();

}  // namespace corral
