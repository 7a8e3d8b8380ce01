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

std::unique_ptr<JsonCodec> JsonCodec::create(bool strict, std::string& error) {
  flatbuffers::IDLOptions opts;
  opts.strict_json = false;  // input may quote keys or not; `strict` applies to output
  opts.indent_step = -1;  // one line per message
  opts.output_default_scalars_in_json = true;  // show "status": "exited", not nothing
  auto impl = std::make_unique<Impl>(opts);
  impl->strict_output = strict;
  std::string schema(embedded_schema());
  if (!impl->parser.Parse(schema.c_str())) {
    error = "embedded schema: " + impl->parser.error_;
    return nullptr;
  }
  return std::unique_ptr<JsonCodec>(new JsonCodec(std::move(impl)));
}

bool JsonCodec::to_frame(std::string_view json, Frame& frame, std::string& error) {
  auto& p = impl_->parser;
  p.builder_.Clear();
  std::string text(json);
  if (!p.ParseJson(text.c_str())) {
    error = p.error_;
    return false;
  }
  frame = make_frame({p.builder_.GetBufferPointer(), p.builder_.GetSize()});
  return true;
}

bool JsonCodec::to_json(std::span<const std::uint8_t> payload, std::string& json, std::string& error) {
  json.clear();
  // The parser's options drive both directions; strictness only matters when printing.
  impl_->parser.opts.strict_json = impl_->strict_output;
  bool ok = flatbuffers::GenerateText(impl_->parser, payload.data(), &json);
  impl_->parser.opts.strict_json = false;
  if (!ok) {
    error = "cannot print the message as JSON";
    return false;
  }
  while (!json.empty() && (json.back() == '\n' || json.back() == ' ')) json.pop_back();
  return true;
}

}  // namespace corral::proto
