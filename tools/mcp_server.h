// `corral mcp`: a Model Context Protocol server on stdio that is a client of the supervisor.
//
// JSON-RPC 2.0, one message per line (docs/protocol.md "corral mcp"). One session holds one
// supervisor connection and one scope whose policy comes from the command line (McpOptions):
// the model chooses commands, never the policy. When stdin closes, the calls in flight are
// answered (each bounded by its deadline), then the scope ends with everything the model
// started in it (background commands, the Python worker). The loop is single-threaded and never blocks on a command: while
// one runs, ping and notifications/cancelled are answered.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/policy.h"

namespace corral::cli {

struct McpOptions {
  std::string socket;
  // The session's policy; the same on every request the session sends.
  std::optional<Mode> mode;
  std::optional<Network> net;
  std::vector<std::string> workspaces, deny_read, protect;
  std::optional<std::uint64_t> memory, pids, cpu_time_ms;  // bytes, count, ms
  std::optional<double> cpus;
  std::uint64_t default_timeout_ms = 120'000;    // exec/python when the call names none
  std::uint64_t max_timeout_ms = 3'600'000;      // the largest a call may ask for
  std::uint64_t max_output = 1u << 20;           // bytes kept per command (stdout + stderr)
  std::uint64_t max_message = 8u << 20;          // bytes in one inbound JSON-RPC line
  bool python = true;                            // offer the python tool
};

// Serves MCP on fds 0/1 until stdin closes and the calls in flight are answered. Returns the process exit status: 0 after a clean
// end of input, 1 when the supervisor cannot be reached or goes away.
int run_mcp(const McpOptions& options);

}  // namespace corral::cli
