#include "worker_proto/json.h"

#include <flatbuffers/idl.h>

#include <cstring>

namespace corral::proto {

struct JsonCodec::Impl {
  explicit Impl(const flatbuffers::IDLOptions& opts) : parser(opts) {}
  flatbuffers::Parser parser;
  bool strict_output = false;
};

JsonCodec::JsonCodec(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
JsonCodec::~JsonCodec() = default;

Result<std::unique_ptr<JsonCodec>> JsonCodec::create(bool strict) {
  flatbuffers::IDLOptions opts;
  opts.strict_json = false;  // input may quote keys or not; `strict` applies to output
  opts.indent_step = -1;  // one line per message
  opts.output_default_scalars_in_json = true;  // show "status": "exited", not nothing
  auto impl = std::make_unique<Impl>(opts);
  impl->strict_output = strict;
  std::string schema(embedded_schema());
  if (!impl->parser.Parse(schema.c_str()))
    return Failure{Failure::Kind::invalid, "embedded schema: " + impl->parser.error_};
  return std::unique_ptr<JsonCodec>(new JsonCodec(std::move(impl)));
}

Result<Frame> JsonCodec::to_frame(std::string_view json) {
  auto& p = impl_->parser;
  p.builder_.Clear();
  std::string text(json);
  if (!p.ParseJson(text.c_str())) return Failure{Failure::Kind::invalid, p.error_};
  return make_frame({p.builder_.GetBufferPointer(), p.builder_.GetSize()});
}

Result<std::string> JsonCodec::to_json(std::span<const std::uint8_t> payload) {
  std::string json;
  // The parser's options drive both directions; strictness only matters when printing.
  impl_->parser.opts.strict_json = impl_->strict_output;
  bool ok = flatbuffers::GenerateText(impl_->parser, payload.data(), &json);
  impl_->parser.opts.strict_json = false;
  if (!ok) return Failure{Failure::Kind::invalid, "cannot print the message as JSON"};
  while (!json.empty() && (json.back() == '\n' || json.back() == ' ')) json.pop_back();
  return json;
}

}  // namespace corral::proto
