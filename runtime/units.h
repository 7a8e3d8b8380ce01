// Parsing of the units corral's users type: sizes and durations (docs/design.md "Units, defaults and limits").
// Sizes: a bare number is bytes; K, M, G (optionally KiB/MiB/GiB or KB..) are 1024-based.
// Durations: a bare number is seconds; ms, s, m, h suffixes.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "runtime/status.h"

namespace corral {

// "64K" -> 65536. Refuses empty, negative, fractional bytes, unknown suffixes and overflow.
StatusOr<std::uint64_t> parse_size(std::string_view text);
// "500ms" -> 500 ms, "2" -> 2 s, "1.5s" -> 1500 ms. Refuses negative and unknown suffixes.
StatusOr<std::chrono::milliseconds> parse_duration(std::string_view text);

std::string format_size(std::uint64_t bytes);               // 1048576 -> "1M"
std::string format_duration(std::chrono::milliseconds d);   // 120000 -> "2m", 1500 -> "1500ms"
std::string format_rate(double cpus);                       // 0.5 -> "0.5", 2.0 -> "2"

}  // namespace corral
