// The JSON that corral writes for people and programs to read: the CLI's --json outputs, the
// audit log's launch records and authorization descriptions. nlohmann-json builds it; text is
// UTF-8 whatever bytes a command printed (invalid bytes become U+FFFD), so every line parses.
// Keys keep the order they were added in (ordered_json). `corral call` uses FlatBuffers' own
// JSON support instead (worker_proto/json.h).
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace corral {

using Json = nlohmann::ordered_json;

// One line of JSON text; never throws on invalid UTF-8.
inline std::string json_text(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace corral
