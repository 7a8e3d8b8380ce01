// The `corral` subcommands. main.cc parses arguments (CLI11) into these option structs;
// each run_* returns the process exit status (DESIGN.md "Results and exit codes").
#pragma once

#include <string>
#include <vector>

#include "supervisor/server.h"

namespace corral::cli {

// Exit statuses of every command but exec.
inline constexpr int kOk = 0;
inline constexpr int kFailed = 1;
inline constexpr int kUsage = 2;
// exec: corral itself failed (no supervisor, request refused).
inline constexpr int kExecCorralFailed = 125;

struct ExecOptions {
  std::string socket;
  std::vector<std::string> argv;
  std::string shell;
  bool has_shell = false;
  std::string timeout, grace, max_output;  // as typed; parsed with units.h
  std::vector<std::string> env;            // K=V
  std::string cwd;
  std::string stdin_file;                  // "-" reads corral's own stdin
  bool json = false;
};

struct StatusOptions {
  std::string socket;
  bool json = false;
};

struct CallOptions {
  std::string socket;
  std::string json;
  std::string timeout;
};

int run_serve(supervisor::ServerOptions options, const std::string& log_level);
int run_exec(const ExecOptions& options);
int run_status(const StatusOptions& options);
int run_call(const CallOptions& options);

// Prints "corral: MESSAGE" to stderr and returns `code`.
int complain(int code, const std::string& message);

}  // namespace corral::cli
