// Replays the frame fuzzer's corpus (tests/fuzz/corpus/) through the fuzzer's own body
// (tests/fuzz/decode_input.h): nothing may crash, the splitter must agree with a plain walk of
// the length prefixes, and the named seeds must give their exact outcome.
// The seeds are written by tests/fuzz/make_corpus.cc.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "tests/fuzz/decode_input.h"

namespace {

using corral::fuzz::DecodeOutcome;
using corral::proto::Body;
using corral::proto::ErrorCode;

const std::filesystem::path kCorpus = std::filesystem::path(CORRAL_SOURCE_DIR) / "tests/fuzz/corpus";

std::vector<std::uint8_t> read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

DecodeOutcome replay(const std::string& name) {
  const auto path = kCorpus / name;
  REQUIRE_MESSAGE(std::filesystem::is_regular_file(path), path.string() << " is missing");
  const auto bytes = read_bytes(path);
  return corral::fuzz::decode_input(bytes, corral::fuzz::fuzz_json_codec());
}

// One complete payload's expected fate: verified with this body and request id (and whether
// it prints as JSON), or refused by verify_payload with this code.
struct Expect {
  bool verified;
  Body body = Body::NONE;
  std::uint64_t request_id = 0;
  bool json_ok = true;
  ErrorCode error = ErrorCode::malformed;
};
Expect ok(Body body, std::uint64_t id, bool json_ok = true) { return {true, body, id, json_ok, {}}; }
Expect refused(ErrorCode code) { return {false, Body::NONE, 0, false, code}; }

void check_frames(const DecodeOutcome& out, const std::vector<Expect>& want) {
  REQUIRE(out.frames.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    CAPTURE(i);
    const auto& got = out.frames[i];
    CHECK(got.verified == want[i].verified);
    if (want[i].verified) {
      CHECK(got.body == want[i].body);
      CHECK(got.request_id == want[i].request_id);
      CHECK(got.json_ok == want[i].json_ok);
    } else {
      CHECK(got.error == want[i].error);
    }
  }
}

}  // namespace

TEST_CASE("every corpus file replays through the fuzz body") {
  REQUIRE(std::filesystem::is_directory(kCorpus));
  std::size_t count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kCorpus)) {
    if (!entry.is_regular_file()) continue;
    ++count;
    CAPTURE(entry.path().filename().string());
    const auto bytes = read_bytes(entry.path());
    CHECK(bytes.size() < 4096);
    const DecodeOutcome out = corral::fuzz::decode_input(bytes, corral::fuzz::fuzz_json_codec());
    // The invariants frame_fuzzer.cc aborts on.
    CHECK(out.frames.size() == out.walked_frames);
    CHECK(out.stream_refused == (out.stream_error.code == ErrorCode::frame_too_large));
    for (const auto& f : out.frames) CHECK_FALSE((!f.verified && f.error == ErrorCode::frame_too_large));
  }
  CHECK(count > 10);
}

TEST_CASE("the fuzz body reads every union member of the schema") {
  // A new member appended to `union Body` in corral.fbs needs its reads in
  // tests/fuzz/decode_input.h (read_message), a seed in make_corpus.cc and a line below.
  CHECK_MESSAGE(Body::MAX == corral::fuzz::kLastWalkedBody,
                "tests/fuzz/decode_input.h does not read the newest union member yet");
}

TEST_CASE("valid frames of every message type verify and print") {
  struct Case {
    const char* name;
    Expect want;
  };
  const Case cases[] = {
      {"hello", ok(Body::Hello, 0)},
      {"hello_reply", ok(Body::HelloReply, 0)},
      {"hello_reply_40_layers", ok(Body::HelloReply, 0)},
      {"exec_argv", ok(Body::ExecRequest, 7)},
      {"exec_shell", ok(Body::ExecRequest, 8)},
      {"exec_stdin_3k", ok(Body::ExecRequest, 9)},
      {"output_stdout_64", ok(Body::OutputChunk, 7)},
      {"output_stderr", ok(Body::OutputChunk, 7)},
      {"exec_result", ok(Body::ExecResult, 7)},
      {"exec_result_setup_error", ok(Body::ExecResult, 11)},
      {"cancel", ok(Body::Cancel, 7)},
      {"cancel_force", ok(Body::Cancel, 7)},
      {"status_request", ok(Body::StatusRequest, 12)},
      {"status_reply", ok(Body::StatusReply, 12)},
      {"error", ok(Body::Error, 7)},
      {"exec_isolation", ok(Body::ExecRequest, 15)},
      {"read_request", ok(Body::ReadRequest, 16)},
      {"write_request", ok(Body::WriteRequest, 17)},
      {"list_request", ok(Body::ListRequest, 18)},
      {"read_result", ok(Body::ReadResult, 16)},
      {"write_result", ok(Body::WriteResult, 17)},
      {"list_result", ok(Body::ListResult, 18)},
      {"scope_create", ok(Body::ScopeCreate, 19)},
      {"scope_created", ok(Body::ScopeCreated, 19)},
      {"scope_close", ok(Body::ScopeClose, 20)},
      {"ack", ok(Body::Ack, 20)},
      {"scope_list_request", ok(Body::ScopeListRequest, 21)},
      {"scope_list", ok(Body::ScopeList, 21)},
      {"poll", ok(Body::Poll, 22)},
      {"poll_reply", ok(Body::PollReply, 22)},
      {"background_stop", ok(Body::BackgroundStop, 23)},
      {"exec_background", ok(Body::ExecRequest, 24)},
      {"background_started", ok(Body::BackgroundStarted, 24)},
      {"worker_start", ok(Body::WorkerStart, 25)},
      {"worker_started", ok(Body::WorkerStarted, 25)},
      {"worker_eval", ok(Body::WorkerEval, 26)},
      {"host_call", ok(Body::HostCall, 26)},
      {"host_reply", ok(Body::HostReply, 26)},
      {"worker_eval_result", ok(Body::WorkerEvalResult, 26)},
      {"evaluate", ok(Body::Evaluate, 1)},
      {"eval_reply", ok(Body::EvalReply, 1)},
      {"worker_stop", ok(Body::WorkerStop, 27)},
      {"worker_list_request", ok(Body::WorkerListRequest, 28)},
      {"worker_list", ok(Body::WorkerList, 28)},
      {"worker_logs_request", ok(Body::WorkerLogsRequest, 29)},
      {"worker_logs", ok(Body::WorkerLogs, 29)},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    const DecodeOutcome out = replay(c.name);
    CHECK_FALSE(out.stream_refused);
    CHECK(out.undecoded_bytes == 0);
    check_frames(out, {c.want});
  }
}

TEST_CASE("several frames in one input decode in order") {
  const DecodeOutcome out = replay("session_hello_exec_cancel_status");
  CHECK_FALSE(out.stream_refused);
  CHECK(out.undecoded_bytes == 0);
  check_frames(out, {ok(Body::Hello, 0), ok(Body::ExecRequest, 7), ok(Body::Cancel, 7), ok(Body::StatusRequest, 12)});
}

TEST_CASE("truncated input decodes only its complete frames") {
  DecodeOutcome out = replay("truncated_header");
  CHECK(out.frames.empty());
  CHECK(out.undecoded_bytes == 3);
  CHECK_FALSE(out.stream_refused);

  out = replay("truncated_payload");
  CHECK(out.frames.empty());
  CHECK(out.undecoded_bytes == 287);
  CHECK_FALSE(out.stream_refused);

  out = replay("hello_then_truncated_exec");
  check_frames(out, {ok(Body::Hello, 0)});
  CHECK(out.undecoded_bytes == 20);
  CHECK_FALSE(out.stream_refused);
}

TEST_CASE("an oversized length prefix stops the stream with frame_too_large") {
  DecodeOutcome out = replay("oversized_length");
  CHECK(out.stream_refused);
  CHECK(out.stream_error.code == ErrorCode::frame_too_large);
  CHECK(out.stream_error.message.find("4294967295") != std::string::npos);
  CHECK(out.frames.empty());

  // The frame before the oversized header is still handled, as the supervisor does.
  out = replay("hello_then_oversized");
  CHECK(out.stream_refused);
  CHECK(out.stream_error.code == ErrorCode::frame_too_large);
  check_frames(out, {ok(Body::Hello, 0)});
  CHECK(out.undecoded_bytes == 12);
}

TEST_CASE("malformed payloads are refused with malformed, and the stream goes on") {
  struct Case {
    const char* name;
    const char* reason;  // a substring of verify_payload's message
  };
  const Case cases[] = {
      {"wrong_identifier", "wrong file identifier"},
      {"empty_payload", "too short"},
      {"short_payload", "too short"},
      {"bad_root_offset", "failed verification"},
      {"no_body", "no body"},
      {"body_type_mismatch", "failed verification"},
      {"garbage", "wrong file identifier"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    const DecodeOutcome out = replay(c.name);
    CHECK_FALSE(out.stream_refused);
    CHECK(out.undecoded_bytes == 0);
    check_frames(out, {refused(ErrorCode::malformed)});
    if (out.frames.size() == 1) CHECK(out.frames[0].error_message.find(c.reason) != std::string::npos);
  }
  const DecodeOutcome out = replay("empty_then_hello");
  CHECK_FALSE(out.stream_refused);
  check_frames(out, {refused(ErrorCode::malformed), ok(Body::Hello, 0)});
}

TEST_CASE("the verified messages the JSON printer cannot show") {
  // A union type from a newer schema verifies (the generated verifier accepts unknown members)
  // and dispatch refuses it by name; FlatBuffers' text printer cannot print it.
  DecodeOutcome out = replay("unknown_body_type");
  check_frames(out, {ok(static_cast<Body>(42), 13, false)});
  // Strings are not checked for UTF-8 by the verifier; the printer refuses invalid UTF-8.
  out = replay("exec_non_utf8_arg");
  check_frames(out, {ok(Body::ExecRequest, 10, false)});
}
