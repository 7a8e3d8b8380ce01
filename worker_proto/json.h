// JSON <-> Message, with FlatBuffers' own JSON support and the schema embedded in the
// binary (corral.fbs). Lets every message be driven from a shell (`corral call`). The other
// JSON corral writes (--json outputs, the audit log) is nlohmann-json's: supervisor/json_text.h.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "worker_proto/codec.h"
#include "worker_proto/result.h"

namespace corral::proto {

// The schema text compiled into the binary.
std::string_view embedded_schema();

class JsonCodec {
 public:
  // Parses the embedded schema. `strict` prints quoted keys (valid JSON for jq & co).
  static Result<std::unique_ptr<JsonCodec>> create(bool strict);
  ~JsonCodec();

  // A Message written as JSON -> a frame. The failure is the parser's message.
  Result<Frame> to_frame(std::string_view json);
  // A verified payload -> JSON text (one line).
  Result<std::string> to_json(std::span<const std::uint8_t> payload);

  struct Impl;

 private:
  explicit JsonCodec(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace corral::proto
