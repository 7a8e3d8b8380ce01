#include "tools/options.h"

#include "runtime/policy.h"
#include "runtime/units.h"

namespace corral::cli {

CLI::Validator size_in(std::uint64_t min, std::uint64_t max, const char* zero) {
  return CLI::Validator(
      [min, max, zero](std::string& text) -> std::string {
        auto v = parse_size(text);
        if (!v.ok()) return v.status().message();
        if (*v < min && !(zero && *v == 0))
          return "'" + text + "' is under the minimum " + format_size(min) + (zero ? std::string(" (0 = ") + zero + ")" : "");
        if (*v > max) return "'" + text + "' is over the maximum " + format_size(max);
        text = std::to_string(*v);
        return {};
      },
      "");
}

CLI::Option* add_memory_cap(CLI::App* app, std::optional<std::uint64_t>& value, const std::string& help) {
  const std::uint64_t min = cap_limits::kMinMemory, max = cap_limits::kMaxMemory;
  return app->add_option("--memory", value, help + " (" + format_size(min) + " to " + format_size(max) + "; 0 = unlimited)")
      ->type_name("SIZE")
      ->transform(size_in(min, max, "unlimited"));
}

CLI::Option* add_pids_cap(CLI::App* app, std::optional<std::uint64_t>& value, const std::string& help) {
  return app->add_option("--pids", value, help + " (1 to " + std::to_string(cap_limits::kMaxPids) + "; 0 = unlimited)")
      ->type_name("N")
      ->check(CLI::Range(std::uint64_t{0}, cap_limits::kMaxPids).description(""));
}

CLI::Option* add_cpus_cap(CLI::App* app, std::optional<double>& value, const std::string& help) {
  return app->add_option("--cpus", value, help + " (" + format_rate(cap_limits::kMinCpus) + " to " +
                                              format_rate(cap_limits::kMaxCpus) + ")")
      ->type_name("RATE")
      ->check(CLI::Validator(
          [](const std::string& text) -> std::string {
            double v = 0;
            try {
              std::size_t used = 0;
              v = std::stod(text, &used);
              if (used != text.size()) return "'" + text + "' is not a number";
            } catch (const std::exception&) {
              return "'" + text + "' is not a number";
            }
            if (!(v >= cap_limits::kMinCpus)) return "'" + text + "' is under the minimum " + format_rate(cap_limits::kMinCpus);
            if (v > cap_limits::kMaxCpus) return "'" + text + "' is over the maximum " + format_rate(cap_limits::kMaxCpus);
            return {};
          },
          ""));
}

CLI::Validator duration_in(std::chrono::milliseconds min, std::chrono::milliseconds max) {
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        auto v = parse_duration(text);
        if (!v.ok()) return v.status().message();
        if (*v < min) return "'" + text + "' is under the minimum " + format_duration(min);
        if (*v > max) return "'" + text + "' is over the maximum " + format_duration(max);
        text = std::to_string(v->count());
        return {};
      },
      "");
}

CLI::Validator mode_name() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        auto m = parse_mode(text);
        if (!m.ok()) return m.status().message();
        text = std::to_string(static_cast<int>(*m));
        return {};
      },
      "");
}

CLI::Validator network_name() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        auto n = parse_network(text);
        if (!n.ok()) return n.status().message();
        text = std::to_string(static_cast<int>(*n));
        return {};
      },
      "");
}

CLI::Validator env_entry() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        auto eq = text.find('=');
        if (eq == std::string::npos || eq == 0) return "needs NAME=VALUE, got '" + text + "'";
        return {};
      },
      "");
}

}  // namespace corral::cli
