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
  auto codec = proto::JsonCodec::create(/*strict=*/true);
  if (!codec) return complain(kFailed, codec.error().message);

  auto parsed = (*codec)->to_frame(o.json);
  if (!parsed) return complain(kUsage, "cannot parse the message: " + parsed.error().message);
  proto::Frame frame = std::move(*parsed);
  proto::DecodeError derr;
  std::span<const std::uint8_t> payload(frame.data() + proto::kHeaderBytes, frame.size() - proto::kHeaderBytes);
  const proto::Message* msg = proto::verify_payload(payload, proto::kMaxMaxFrame, derr);
  if (!msg) return complain(kUsage, "the message does not verify: " + derr.message);
  // A request without an id gets id 1 (0 is reserved for connection-level errors).
  if (msg->request_id() == 0 && msg->body_type() != proto::Body::Hello) {
    std::string with_id = o.json;
    auto brace = with_id.find('{');
    if (brace != std::string::npos) with_id.insert(brace + 1, "request_id: 1, ");
    auto renumbered = (*codec)->to_frame(with_id);
    if (!renumbered) return complain(kUsage, "request_id 0 is reserved; give a request_id of 1 or more");
    frame = std::move(*renumbered);
    payload = {frame.data() + proto::kHeaderBytes, frame.size() - proto::kHeaderBytes};
    msg = proto::verify_payload(payload, proto::kMaxMaxFrame, derr);
  }
  const std::uint64_t id = msg->request_id();
  const proto::Body type = msg->body_type();

  auto connected = type == proto::Body::Hello ? proto::Client::connect_raw(o.socket)
                                              : proto::Client::connect(o.socket, "corral-call");
  if (!connected) return complain(kFailed, connected.error().message);
  proto::Client& client = **connected;
  if (auto sent = client.send(frame); !sent) return complain(kFailed, sent.error().message);

  // A cancel has no reply of its own: wait briefly for an error about it.
  if (type == proto::Body::Cancel && timeout_ms < 0) timeout_ms = 500;
  for (;;) {
    auto r = client.receive(timeout_ms);
    if (!r) {
      if (type == proto::Body::Cancel) return kOk;
      return complain(kFailed, r.error().message);
    }
    auto text = (*codec)->to_json(r->payload);
    if (!text) return complain(kFailed, text.error().message);
    std::cout << *text << std::endl;
    const std::uint64_t rid = r->msg->request_id();
    if (is_final(r->msg->body_type()) && (rid == id || rid == 0))
      return r->msg->body_type() == proto::Body::Error ? kFailed : kOk;
  }
}

}  // namespace corral::cli
