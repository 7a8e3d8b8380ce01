#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <pwd.h>

#include <iostream>

#include "supervisor/audit.h"
#include "tools/commands.h"

namespace corral::cli {

StatusOr<std::pair<uid_t, gid_t>> lookup_sandbox_user(const std::string& text) {
  char* end = nullptr;
  unsigned long n = std::strtoul(text.c_str(), &end, 10);
  const struct passwd* pw = nullptr;
  if (!text.empty() && *end == '\0') {
    pw = ::getpwuid(static_cast<uid_t>(n));
    if (n == 0) return Status::invalid("commands never run as uid 0");
    if (n > 0xfffffffeUL) return Status::invalid("uid " + text + " is out of range");
    if (!pw) return std::make_pair(static_cast<uid_t>(n), static_cast<gid_t>(n));  // a bare uid: same gid
  } else {
    pw = ::getpwnam(text.c_str());
    if (!pw) return Status::invalid("no user named '" + text + "'");
    if (pw->pw_uid == 0) return Status::invalid("commands never run as uid 0");
  }
  return std::make_pair(pw->pw_uid, pw->pw_gid);
}

int run_serve(supervisor::ServerOptions options, const std::string& log_level, const std::string& audit_log) {
  auto level = spdlog::level::from_str(log_level);
  if (level == spdlog::level::off && log_level != "off")
    return complain(kUsage, "unknown --log-level '" + log_level + "'");
  // The audit lines have their own logger (supervisor/audit.h), which the level never reaches.
  if (Status st = supervisor::open_audit_log(audit_log); !st.ok()) return complain(kUsage, st.message());
  // The ordinary log goes to stderr, one line each, flushed as written.
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
