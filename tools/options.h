// CLI11 building blocks for corral's command line: repeatable options that take exactly one
// value per occurrence, and validators that turn what users type (sizes, durations, mode and
// network names) into typed values with their bounds checked. The units are runtime/units.h's
// (docs/design.md "Units, defaults, limits").
#pragma once

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace corral::cli {

// Each validator below has no description of its own: the option names its type (SIZE,
// DURATION, MODE, NET) with type_name().

// A repeatable option: `--NAME VALUE` may be given any number of times and each occurrence
// takes exactly one value, so the words after it (a positional argument, `--`, the program's
// own arguments) are never swallowed. " (repeatable)" is appended to `help`; the CLI test
// matrix (tests/cli_test.cc) finds every such option through --help.
template <class T>
CLI::Option* add_repeatable(CLI::App* app, const std::string& name, std::vector<T>& values, const std::string& help) {
  return app->add_option(name, values, help + " (repeatable)")->allow_extra_args(false)->take_all();
}

// A size ("1000", "64K", "1M", "2G"; 1024-based) between `min` and `max` bytes, rewritten to its
// byte count so that the option's integer receives it. With `zero` (what 0 means: "unlimited",
// "none") a 0 is taken as well, and the refusal of a small value says so.
CLI::Validator size_in(std::uint64_t min, std::uint64_t max, const char* zero = nullptr);
// A duration ("500ms", "2", "1.5s", "1m", "1h"; a bare number is seconds) between `min` and
// `max`, rewritten to whole milliseconds for the option's integer.
CLI::Validator duration_in(std::chrono::milliseconds min, std::chrono::milliseconds max);
// --memory and --pids, the caps that have a default bound: 0 says "unlimited" explicitly (never
// over a scope's cap); otherwise the value is in the caps' range. `help` says whose cap it is;
// the option appends the range and what 0 means.
CLI::Option* add_memory_cap(CLI::App* app, std::optional<std::uint64_t>& value, const std::string& help);
CLI::Option* add_pids_cap(CLI::App* app, std::optional<std::uint64_t>& value, const std::string& help);
// --cpus, in the caps' range.
CLI::Option* add_cpus_cap(CLI::App* app, std::optional<double>& value, const std::string& help);
// "read-only" | "workspace-write" | "danger-full-access", rewritten to corral::Mode's value.
CLI::Validator mode_name();
// "denied" | "allowed", rewritten to corral::Network's value.
CLI::Validator network_name();
// NAME=VALUE with a non-empty NAME (--env).
CLI::Validator env_entry();

}  // namespace corral::cli
