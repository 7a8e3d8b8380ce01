#include <doctest/doctest.h>

#include <cstring>

#include "worker_proto/codec.h"
#include "worker_proto/json.h"
#include "worker_proto/messages.h"

using namespace corral::proto;

namespace {

std::span<const std::uint8_t> payload_of(const Frame& f) {
  return {f.data() + kHeaderBytes, f.size() - kHeaderBytes};
}

}  // namespace

TEST_CASE("round trip: an ExecRequest keeps every field") {
  ExecArgs a;
  a.argv = {"echo", "hi there"};
  a.env = {{"A", "1"}, {"B", ""}};
  a.cwd = "/tmp";
  a.stdin_data = std::string("in\0put", 6);
  a.timeout_ms = 1500;
  a.grace_ms = 20;
  a.max_output_bytes = 4096;
  Frame f = make_exec(42, a);
  REQUIRE(f.size() > kHeaderBytes);
  CHECK(read_length(f.data()) == f.size() - kHeaderBytes);

  DecodeError err;
  const Message* m = verify_payload(payload_of(f), kDefaultMaxFrame, err);
  REQUIRE(m != nullptr);
  CHECK(m->request_id() == 42);
  const ExecRequest* r = m->body_as_ExecRequest();
  REQUIRE(r != nullptr);
  REQUIRE(r->argv()->size() == 2);
  CHECK(r->argv()->Get(1)->str() == "hi there");
  CHECK(r->shell() == nullptr);
  REQUIRE(r->env()->size() == 2);
  CHECK(r->env()->Get(0)->name()->str() == "A");
  CHECK(r->cwd()->str() == "/tmp");
  CHECK(std::string(reinterpret_cast<const char*>(r->stdin()->data()), r->stdin()->size()) == std::string("in\0put", 6));
  CHECK(r->timeout_ms() == 1500);
  CHECK(r->grace_ms() == 20);
  CHECK(r->max_output_bytes() == 4096);
}

TEST_CASE("round trip: output chunks, errors, cancel, hello") {
  DecodeError err;
  Frame out = make_output(7, Stream::err, std::string(70000, 'x'));
  const Message* m = verify_payload(payload_of(out), kDefaultMaxFrame, err);
  REQUIRE(m);
  CHECK(m->body_as_OutputChunk()->stream() == Stream::err);
  CHECK(m->body_as_OutputChunk()->data()->size() == 70000);

  Frame e = make_error(3, ErrorCode::duplicate_request_id, "dup");
  m = verify_payload(payload_of(e), kDefaultMaxFrame, err);
  REQUIRE(m);
  CHECK(m->body_as_Error()->code() == ErrorCode::duplicate_request_id);
  CHECK(m->body_as_Error()->message()->str() == "dup");

  // The message points into its frame: keep the frame alive while reading it.
  Frame cancel = make_cancel(9, true);
  m = verify_payload(payload_of(cancel), kDefaultMaxFrame, err);
  REQUIRE(m);
  CHECK(m->request_id() == 9);
  CHECK(m->body_as_Cancel()->force());

  Frame hello = make_hello("t");
  m = verify_payload(payload_of(hello), kDefaultMaxFrame, err);
  REQUIRE(m);
  CHECK(m->body_as_Hello()->protocol_version() == kProtocolVersion);
}

TEST_CASE("truncated payloads never verify into wrong content") {
  ExecArgs args;
  args.argv = {"echo", "hi"};
  Frame f = make_exec(1, args);
  auto p = payload_of(f);
  std::size_t verified = 0;
  for (std::size_t n = 0; n < p.size(); ++n) {
    CAPTURE(n);
    DecodeError err;
    const Message* m = verify_payload(p.first(n), kDefaultMaxFrame, err);
    if (m == nullptr) {
      CHECK(err.code == ErrorCode::malformed);
      continue;
    }
    // Only trailing alignment padding (< 8 bytes) may go without changing the message.
    ++verified;
    CHECK(n + 8 > p.size());
    CHECK(m->body_as_ExecRequest()->argv()->Get(1)->str() == "hi");
  }
  CHECK(verified < 8);
}

TEST_CASE("oversized payloads are refused before anything is read") {
  Frame f = make_output(1, Stream::out, std::string(5000, 'y'));
  DecodeError err;
  CHECK(verify_payload(payload_of(f), 4096, err) == nullptr);
  CHECK(err.code == ErrorCode::frame_too_large);
  CHECK(err.message.find("4096") != std::string::npos);

  // A stream whose header announces 4 GiB stops at the header.
  FrameSplitter s(1 << 20);
  std::uint8_t header[4] = {0xff, 0xff, 0xff, 0xff};
  CHECK_FALSE(s.feed(header, err));
  CHECK(err.code == ErrorCode::frame_too_large);
}

TEST_CASE("a wrong file identifier is refused") {
  Frame f = make_hello("t");
  std::memcpy(f.data() + kHeaderBytes + 4, "XXXX", 4);  // the identifier follows the root offset
  DecodeError err;
  CHECK(verify_payload(payload_of(f), kDefaultMaxFrame, err) == nullptr);
  CHECK(err.code == ErrorCode::malformed);
  CHECK(err.message.find("identifier") != std::string::npos);
}

TEST_CASE("garbage with a valid identifier fails verification") {
  std::vector<std::uint8_t> g(64, 0xAB);
  std::memcpy(g.data() + 4, "CRL1", 4);
  DecodeError err;
  CHECK(verify_payload(g, kDefaultMaxFrame, err) == nullptr);
  CHECK(err.code == ErrorCode::malformed);

  // A table offset pointing outside the buffer.
  std::vector<std::uint8_t> bad = {0xF0, 0xFF, 0x00, 0x00, 'C', 'R', 'L', '1', 0, 0, 0, 0};
  CHECK(verify_payload(bad, kDefaultMaxFrame, err) == nullptr);
}

TEST_CASE("the splitter yields frames as they complete, byte by byte") {
  Frame a = make_hello("a"), b = make_status_request(5);
  std::vector<std::uint8_t> stream(a.begin(), a.end());
  stream.insert(stream.end(), b.begin(), b.end());
  FrameSplitter s(kDefaultMaxFrame);
  std::vector<std::vector<std::uint8_t>> got;
  for (std::uint8_t byte : stream) {
    DecodeError err;
    REQUIRE(s.feed({&byte, 1}, err));
    std::vector<std::uint8_t> p;
    while (s.next(p)) got.push_back(p);
  }
  REQUIRE(got.size() == 2);
  DecodeError err;
  CHECK(verify_payload(got[1], kDefaultMaxFrame, err)->body_type() == Body::StatusRequest);
}

TEST_CASE("JSON: a request written as JSON becomes the same message, and back") {
  auto created = JsonCodec::create(true);
  REQUIRE_MESSAGE(created, (created ? "" : created.error().message));
  JsonCodec& codec = **created;
  auto f = codec.to_frame(R"({request_id: 3, body_type: "ExecRequest", body: {argv: ["echo", "hi"], timeout_ms: 500}})");
  REQUIRE_MESSAGE(f, (f ? "" : f.error().message));
  DecodeError err;
  const Message* m = verify_payload(payload_of(*f), kDefaultMaxFrame, err);
  REQUIRE(m);
  CHECK(m->request_id() == 3);
  CHECK(m->body_as_ExecRequest()->argv()->Get(0)->str() == "echo");
  CHECK(m->body_as_ExecRequest()->timeout_ms() == 500);

  auto json = codec.to_json(payload_of(make_error(4, ErrorCode::invalid_request, "no")));
  REQUIRE(json);
  CHECK(json->find("\"body_type\": \"Error\"") != std::string::npos);
  CHECK(json->find("\"code\": \"invalid_request\"") != std::string::npos);

  auto bad = codec.to_frame("{request_id: 1, body_type: \"Nope\"}");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().kind == Failure::Kind::invalid);
  CHECK(!bad.error().message.empty());
}
