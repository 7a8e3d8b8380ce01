// Limits: every default and maximum corral applies, with its unit and the reason for it.
// These are the documented defaults of docs/design.md "Units, defaults and limits"; a request asks
// for its own values within [minimum, maximum], anything else is refused by name.
#pragma once

#include <chrono>
#include <cstdint>

namespace corral::limits {

using std::chrono::milliseconds;
inline constexpr std::uint64_t KiB = 1024;
inline constexpr std::uint64_t MiB = 1024 * KiB;
inline constexpr std::uint64_t GiB = 1024 * MiB;

// Foreground deadline. 120 s suits a build step; the maximum keeps a forgotten request
// from pinning a slot for a day (configurable with `serve --max-timeout`).
inline constexpr milliseconds kDefaultTimeout{120'000};
inline constexpr milliseconds kMaxTimeout{24 * 3600 * 1000};
// SIGTERM -> SIGKILL delay when a command is stopped (timeout or graceful cancel).
inline constexpr milliseconds kDefaultGrace{2'000};
inline constexpr milliseconds kMaxGrace{60'000};

// Output kept per command, stdout and stderr counted together in read order.
inline constexpr std::uint64_t kDefaultMaxOutput = 1 * MiB;
inline constexpr std::uint64_t kMaxOutput = 64 * MiB;
// stdin bytes a request may carry; bounded by the frame limit anyway.
inline constexpr std::uint64_t kMaxStdin = 8 * MiB;

// Pipes are enlarged to this (F_SETPIPE_SZ): 2.5x the throughput of the 64 KiB default.
inline constexpr int kPipeBytes = 1 * MiB;
// One read from a command's pipe, and so the largest output chunk sent to a client.
inline constexpr std::size_t kReadChunk = 64 * KiB;

// Prepared sandboxes (docs/design.md "Prepared sandboxes"): at most this many per scope (the
// least recently used goes) and in all; a policy's view is prepared at its second command in a
// scope (serve --prepare-after).
inline constexpr std::size_t kPreparedPerScope = 4;
inline constexpr std::size_t kMaxPreparedSandboxes = 64;
inline constexpr unsigned kDefaultPrepareAfter = 2;

// Authorized launch: how long a prepared command waits for its client's grant.
inline constexpr milliseconds kAuthorizationDeadline{30'000};

// Supervisor resources (`serve` flags of the same names).
inline constexpr std::uint32_t kDefaultMaxFrame = 16 * MiB;   // --max-frame
inline constexpr unsigned kDefaultMaxConnections = 256;       // --max-connections
inline constexpr unsigned kDefaultMaxInFlight = 64;           // --max-in-flight, per connection
// Bytes queued for one client before its commands' output is paused and its requests are
// no longer read (--max-queued).
inline constexpr std::uint64_t kDefaultMaxQueued = 4 * MiB;
// Connections one peer uid may hold (--max-connections-per-uid): a quarter of the default
// total, so that one allowed uid cannot lock out the others (root included).
inline constexpr unsigned kDefaultMaxConnectionsPerUid = 64;
// How long a new connection may take to say hello before it is closed (--hello-timeout):
// a client's hello follows its connect at once; a few seconds forgive a loaded host.
inline constexpr milliseconds kDefaultHelloTimeout{5'000};
// Bytes waiting to be written to one worker (evaluations, host replies) before the
// supervisor stops reading that worker and its evaluating client (--max-worker-queued).
inline constexpr std::uint64_t kDefaultMaxWorkerQueued = 4 * MiB;
// Processes (and threads) one command may have when it asks for no --pids cap
// (--default-pids): RLIMIT_NPROC in its own user namespace, counted per sandbox since Linux
// 5.14, so it holds without cgroups (non-root supervisors too). Enough for make -j and
// compilers; a fork bomb ends at it. 0: none.
inline constexpr std::uint64_t kDefaultPids = 2048;
// Size of each scope's temp dir (--temp-size): a root supervisor mounts it as a tmpfs of this
// size. 0: plain host directories, unbounded (also what a non-root supervisor gets).
inline constexpr std::uint64_t kDefaultTempSize = 2 * GiB;
// Memory of one command's whole tree when it asks for no --memory cap (--default-memory):
// the smaller of 8 GiB and half the host's RAM, so that one command cannot take the host
// down, while compilers, `make -j` and installs fit. Enforced by a memory cgroup per command,
// where the host has one. A scope's tmpfs pages count against the command that wrote them.
inline constexpr std::uint64_t kDefaultMemoryCeiling = 8 * GiB;
constexpr std::uint64_t default_memory_for(std::uint64_t host_ram) {
  return host_ram / 2 < kDefaultMemoryCeiling ? host_ram / 2 : kDefaultMemoryCeiling;
}
// The longest a launch waits for its sandbox's setup (clone to exec, or to a prepared
// sandbox's view): far beyond a real setup (milliseconds), and what bounds a launcher thread
// against an init that a host process of the sandbox uid stopped. The init is then killed.
inline constexpr milliseconds kSetupDeadline{10'000};
// Such cgroups the host keeps made ahead of the commands that take them
// (SandboxHost::refill_default_groups).
inline constexpr std::size_t kSpareDefaultGroups = 2;
inline constexpr std::uint64_t kMaxTempSize = 1024 * GiB;

}  // namespace corral::limits

// Bounds for caps, the one definition the CLI (tools/options.h), normalize()
// (runtime/policy.h) and the cgroups (runtime/cgroup.h) all check against: below the minimum
// nothing useful runs (or the kernel refuses: a CPU quota under 1 ms per 100 ms period); above
// the maximum is a typo.
namespace corral::cap_limits {
inline constexpr std::uint64_t kMinMemory = 4ULL << 20;     // 4 MiB
inline constexpr std::uint64_t kMaxMemory = 1ULL << 40;     // 1 TiB
inline constexpr std::uint64_t kMaxPids = 1'000'000;
inline constexpr double kMinCpus = 0.01;
inline constexpr double kMaxCpus = 1024;
inline constexpr std::chrono::milliseconds kMinCpuTime{10};
inline constexpr std::uint64_t kMaxFileSize = 1ULL << 50;
}  // namespace corral::cap_limits
