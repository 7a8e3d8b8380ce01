#include "tools/json_writer.h"

#include "worker_proto/json.h"

namespace corral::cli {

void JsonWriter::comma() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!first_.empty()) {
    if (!first_.back()) out_.push_back(',');
    first_.back() = false;
  }
}

JsonWriter& JsonWriter::begin_object() {
  comma();
  out_.push_back('{');
  first_.push_back(true);
  return *this;
}
JsonWriter& JsonWriter::end_object() {
  out_.push_back('}');
  first_.pop_back();
  return *this;
}
JsonWriter& JsonWriter::begin_array(std::string_view k) {
  if (!k.empty()) key(k);
  comma();
  out_.push_back('[');
  first_.push_back(true);
  return *this;
}
JsonWriter& JsonWriter::end_array() {
  out_.push_back(']');
  first_.pop_back();
  return *this;
}
JsonWriter& JsonWriter::key(std::string_view k) {
  comma();
  proto::append_json_string(out_, k);
  out_.push_back(':');
  after_key_ = true;
  return *this;
}
JsonWriter& JsonWriter::value(std::string_view s) {
  comma();
  proto::append_json_string(out_, s);
  return *this;
}
JsonWriter& JsonWriter::value(std::uint64_t n) {
  comma();
  out_.append(std::to_string(n));
  return *this;
}
JsonWriter& JsonWriter::value(std::int64_t n) {
  comma();
  out_.append(std::to_string(n));
  return *this;
}
JsonWriter& JsonWriter::value(bool b) {
  comma();
  out_.append(b ? "true" : "false");
  return *this;
}
JsonWriter& JsonWriter::null() {
  comma();
  out_.append("null");
  return *this;
}

}  // namespace corral::cli
