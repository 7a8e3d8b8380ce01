#include "runtime/units.h"

#include <charconv>
#include <cmath>
#include <limits>

namespace corral {
namespace {

// Splits "12.5ms" into the number and its suffix; rejects signs and empty numbers.
bool split_number(std::string_view text, double& value, std::string_view& suffix) {
  std::size_t i = 0;
  while (i < text.size() && ((text[i] >= '0' && text[i] <= '9') || text[i] == '.')) ++i;
  if (i == 0) return false;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + i, value);
  if (ec != std::errc() || ptr != text.data() + i) return false;
  suffix = text.substr(i);
  return std::isfinite(value);
}

}  // namespace

StatusOr<std::uint64_t> parse_size(std::string_view text) {
  double value = 0;
  std::string_view suffix;
  if (!split_number(text, value, suffix))
    return Status::invalid("not a size: '" + std::string(text) + "' (examples: 1000, 64K, 1M, 2G)");
  std::uint64_t unit = 1;
  if (suffix.empty() || suffix == "B") unit = 1;
  else if (suffix == "K" || suffix == "k" || suffix == "KiB" || suffix == "KB") unit = 1ULL << 10;
  else if (suffix == "M" || suffix == "m" || suffix == "MiB" || suffix == "MB") unit = 1ULL << 20;
  else if (suffix == "G" || suffix == "g" || suffix == "GiB" || suffix == "GB") unit = 1ULL << 30;
  else
    return Status::invalid("unknown size suffix '" + std::string(suffix) + "' in '" +
                           std::string(text) + "' (use K, M or G)");
  double bytes = value * static_cast<double>(unit);
  if (bytes != std::floor(bytes))
    return Status::invalid("size '" + std::string(text) + "' is not a whole number of bytes");
  if (bytes >= 18446744073709551616.0)  // 2^64
    return Status::invalid("size '" + std::string(text) + "' is too large");
  return static_cast<std::uint64_t>(bytes);
}

StatusOr<std::chrono::milliseconds> parse_duration(std::string_view text) {
  double value = 0;
  std::string_view suffix;
  if (!split_number(text, value, suffix))
    return Status::invalid("not a duration: '" + std::string(text) +
                           "' (examples: 500ms, 2s, 1.5, 1m, 1h)");
  double ms_per = 1000;
  if (suffix.empty() || suffix == "s") ms_per = 1000;
  else if (suffix == "ms") ms_per = 1;
  else if (suffix == "m") ms_per = 60'000;
  else if (suffix == "h") ms_per = 3'600'000;
  else
    return Status::invalid("unknown duration suffix '" + std::string(suffix) + "' in '" +
                           std::string(text) + "' (use ms, s, m or h)");
  double ms = value * ms_per;
  if (ms > 1e15) return Status::invalid("duration '" + std::string(text) + "' is too large");
  return std::chrono::milliseconds(static_cast<std::int64_t>(std::llround(ms)));
}

std::string format_size(std::uint64_t bytes) {
  static constexpr const char* kSuffix[] = {"G", "M", "K"};
  static constexpr unsigned kShift[] = {30, 20, 10};
  for (int i = 0; i < 3; ++i) {
    std::uint64_t unit = 1ULL << kShift[i];
    if (bytes != 0 && bytes % unit == 0) return std::to_string(bytes / unit) + kSuffix[i];
  }
  return std::to_string(bytes);
}

std::string format_rate(double cpus) {
  std::string s = std::to_string(cpus);
  s.erase(s.find_last_not_of('0') + 1);
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

std::string format_duration(std::chrono::milliseconds d) {
  auto ms = d.count();
  if (ms != 0 && ms % 3'600'000 == 0) return std::to_string(ms / 3'600'000) + "h";
  if (ms != 0 && ms % 60'000 == 0) return std::to_string(ms / 60'000) + "m";
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  return std::to_string(ms) + "ms";
}

}  // namespace corral
