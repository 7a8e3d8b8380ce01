#include "worker_proto/json.h"

#include <flatbuffers/idl.h>

#include <cstring>

namespace corral::proto {

namespace {

// Length of the valid UTF-8 sequence at s[i], or 0 if invalid (overlongs, surrogates and
// code points past U+10FFFF are invalid).
std::size_t utf8_len(std::string_view s, std::size_t i) {
  auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = b(i);
  std::size_t n;
  std::uint32_t cp;
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) n = 2, cp = c & 0x1F;
  else if ((c & 0xF0) == 0xE0) n = 3, cp = c & 0x0F;
  else if ((c & 0xF8) == 0xF0) n = 4, cp = c & 0x07;
  else return 0;
  if (i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3F);
  }
  static constexpr std::uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

}  // namespace

void append_json_string(std::string& out, std::string_view s) {
  out.push_back('"');
  for (std::size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      std::size_t n = utf8_len(s, i);
      if (n == 0) {
        out.append("\xEF\xBF\xBD");  // U+FFFD
        ++i;
      } else {
        out.append(s.substr(i, n));
        i += n;
      }
      continue;
    }
    switch (c) {
      case '"': out.append("\\\""); break;
      case '\\': out.append("\\\\"); break;
      case '\n': out.append("\\n"); break;
      case '\r': out.append("\\r"); break;
      case '\t': out.append("\\t"); break;
      default:
        if (c < 0x20 || c == 0x7f) {
          static constexpr char kHex[] = "0123456789abcdef";
          out.append("\\u00");
          out.push_back(kHex[c >> 4]);
          out.push_back(kHex[c & 15]);
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
    ++i;
  }
  out.push_back('"');
}


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
