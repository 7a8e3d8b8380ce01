#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <iostream>

#include "tools/commands.h"

namespace corral::cli {

int complain(int code, const std::string& message) {
  std::cerr << "corral: " << message << "\n";
  return code;
}

int run_serve(supervisor::ServerOptions options, const std::string& log_level) {
  auto level = spdlog::level::from_str(log_level);
  if (level == spdlog::level::off && log_level != "off")
    return complain(kUsage, "unknown --log-level '" + log_level + "'");
  // Logs (the audit log among them) go to stderr, one line each, flushed as written.
  auto logger = spdlog::stderr_logger_mt("corral");
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %l %v");
  logger->set_level(level);
  logger->flush_on(spdlog::level::trace);
  spdlog::set_default_logger(logger);

  Status st = supervisor::serve(options);
  if (!st.ok()) return complain(kFailed, st.message());
  return kOk;
}

}  // namespace corral::cli
