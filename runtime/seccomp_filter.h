// The seccomp layer: a deny-list BPF filter compiled by libseccomp in the parent and installed
// by the child between clone and exec with one prctl and one seccomp syscall, no allocation.
//
// The filter allows by default and refuses the syscalls a sandboxed command has no business
// making: kernel modules and kexec, other processes' memory (ptrace, process_vm_*), mounts and
// namespaces (so the mount view and namespaces the engine built stay as built), keyrings, bpf,
// perf, userfaultfd, io_uring (its opcodes are never seen by seccomp), raw I/O ports, file
// handles, TIOCSTI. With deny_network, socket()/socketpair() accept only AF_UNIX.
// Needs Linux >= 3.17 (seccomp syscall); the kernel default here is 6.x.
#pragma once

#include <linux/filter.h>

#include <cstddef>
#include <vector>

#include "runtime/status.h"

namespace corral {

struct SeccompPolicy {
  // true: socket() and socketpair() with a domain other than AF_UNIX fail with EAFNOSUPPORT.
  // This is defence in depth; the network namespace is what actually denies the network.
  bool deny_network = true;
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

// Host probe: builds the default filter here, installs it in a forked child and checks there
// that a denied syscall (unshare) fails with EPERM and socket(AF_INET) with EAFNOSUPPORT.
// Ok, or the step ("seccomp", "fork", "install", "verify") and errno that say why not.
Status probe_seccomp();

}  // namespace corral
