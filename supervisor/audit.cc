#include "supervisor/audit.h"

#include <fcntl.h>
#include <unistd.h>

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <memory>

namespace corral::supervisor {

namespace {

// Not in spdlog's registry, so spdlog::set_level() (and so `--log-level`) never reaches it.
std::shared_ptr<spdlog::logger>& audit_logger() {
  static std::shared_ptr<spdlog::logger> logger;
  return logger;
}

std::shared_ptr<spdlog::logger> make_logger(spdlog::sink_ptr sink) {
  auto logger = std::make_shared<spdlog::logger>("corral-audit", std::move(sink));
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %l %v");  // the ordinary log's, so one stream reads as one
  logger->set_level(spdlog::level::info);
  logger->flush_on(spdlog::level::info);
  return logger;
}

}  // namespace

Status open_audit_log(const std::string& path) {
  if (path.empty()) {
    audit_logger() = make_logger(std::make_shared<spdlog::sinks::stderr_sink_mt>());
    return Status();
  }
  // spdlog would create missing parent directories; a mistyped path is refused instead.
  const std::filesystem::path parent = std::filesystem::absolute(path).parent_path();
  std::error_code ec;
  if (!std::filesystem::is_directory(parent, ec))
    return Status::invalid("cannot open the audit log " + path + ": no directory " + parent.string());
  // Created private (command lines and paths are in it), and never through a symlink.
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return Status::from_errno("open", errno, "the audit log " + path);
  ::close(fd);
  try {
    audit_logger() = make_logger(std::make_shared<spdlog::sinks::basic_file_sink_mt>(path, /*truncate=*/false));
  } catch (const spdlog::spdlog_ex& e) {
    return Status::invalid("cannot open the audit log " + path + ": " + e.what());
  }
  return Status();
}

void audit(std::string_view line) {
  auto& logger = audit_logger();
  if (!logger) logger = make_logger(std::make_shared<spdlog::sinks::stderr_sink_mt>());
  logger->info("{}", line);
}

}  // namespace corral::supervisor
