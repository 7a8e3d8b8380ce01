#include <iostream>

#include "runtime/units.h"
#include "tools/commands.h"
#include "worker_proto/client.h"
#include "worker_proto/json.h"

namespace corral::cli {
namespace {

// Replies that end an exchange: every request gets exactly one of these.
bool is_final(proto::Body b) {
  return b == proto::Body::ExecResult || b == proto::Body::StatusReply || b == proto::Body::HelloReply ||
         b == proto::Body::Error;
}

}  // namespace

int run_call(const CallOptions& o) {
  int timeout_ms = -1;
  if (o.timeout_ms) timeout_ms = static_cast<int>(std::min<std::uint64_t>(*o.timeout_ms, 1 << 30));
  std::string error;
  auto codec = proto::JsonCodec::create(/*strict=*/true, error);
  if (!codec) return complain(kFailed, error);

  proto::Frame frame;
  if (!codec->to_frame(o.json, frame, error)) return complain(kUsage, "cannot parse the message: " + error);
  proto::DecodeError derr;
  std::span<const std::uint8_t> payload(frame.data() + proto::kHeaderBytes, frame.size() - proto::kHeaderBytes);
  const proto::Message* msg = proto::verify_payload(payload, proto::kMaxMaxFrame, derr);
  if (!msg) return complain(kUsage, "the message does not verify: " + derr.message);
  // A request without an id gets id 1 (0 is reserved for connection-level errors).
  if (msg->request_id() == 0 && msg->body_type() != proto::Body::Hello) {
    std::string with_id = o.json;
    auto brace = with_id.find('{');
    if (brace != std::string::npos) with_id.insert(brace + 1, "request_id: 1, ");
    if (!codec->to_frame(with_id, frame, error))
      return complain(kUsage, "request_id 0 is reserved; give a request_id of 1 or more");
    payload = {frame.data() + proto::kHeaderBytes, frame.size() - proto::kHeaderBytes};
    msg = proto::verify_payload(payload, proto::kMaxMaxFrame, derr);
  }
  const std::uint64_t id = msg->request_id();
  const proto::Body type = msg->body_type();

  auto client = type == proto::Body::Hello ? proto::Client::connect_raw(o.socket, error)
                                           : proto::Client::connect(o.socket, error, "corral-call");
  if (!client) return complain(kFailed, error);
  if (!client->send(frame)) return complain(kFailed, client->error());

  // A cancel has no reply of its own: wait briefly for an error about it.
  if (type == proto::Body::Cancel && timeout_ms < 0) timeout_ms = 500;
  for (;;) {
    proto::Received r;
    if (!client->receive(r, timeout_ms)) {
      if (type == proto::Body::Cancel) return kOk;
      return complain(kFailed, client->error());
    }
    std::string text;
    if (!codec->to_json(r.payload, text, error)) return complain(kFailed, error);
    std::cout << text << std::endl;
    const std::uint64_t rid = r.msg->request_id();
    if (is_final(r.msg->body_type()) && (rid == id || rid == 0))
      return r.msg->body_type() == proto::Body::Error ? kFailed : kOk;
  }
}

}  // namespace corral::cli
