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

// Verifies `f` and checks its request id and body type. The message points into `f`.
const Message* decode(const Frame& f, std::uint64_t id, Body type) {
  REQUIRE(f.size() > kHeaderBytes);
  CHECK(read_length(f.data()) == f.size() - kHeaderBytes);
  DecodeError err;
  const Message* m = verify_payload(payload_of(f), kDefaultMaxFrame, err);
  REQUIRE_MESSAGE(m != nullptr, err.message);
  CHECK(m->request_id() == id);
  REQUIRE(m->body_type() == type);
  return m;
}

std::string bytes(const flatbuffers::Vector<std::uint8_t>* v) {
  REQUIRE(v != nullptr);
  return {reinterpret_cast<const char*>(v->data()), v->size()};
}

std::vector<std::string> strings(const flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>>* v) {
  REQUIRE(v != nullptr);
  std::vector<std::string> out;
  for (const auto* s : *v) out.push_back(s->str());
  return out;
}

ExecResultInfo sample_result() {
  ExecResultInfo r;
  r.status = ExitStatus::exited;
  r.exit_code = 3;
  r.signal = 0;
  r.timed_out = true;
  r.output_truncated = true;
  r.wall_ms = 11;
  r.user_cpu_ms = 12;
  r.sys_cpu_ms = 13;
  r.max_rss_kb = 14;
  r.memory_peak_kb = 15;
  r.enforced = {"landlock", "seccomp"};
  r.temp_dir = "/tmp/t";
  r.setup_step = "chdir";
  r.setup_errno = 2;
  r.message = "detail";
  r.stdout_bytes = 16;
  r.stderr_bytes = 17;
  r.launched = true;
  r.policy = ExecResultInfo::PolicyInfo{Mode::read_only, Network::allowed, {"/w"}, {"/d"}, {"/p"}};
  return r;
}

void check_sample_result(const ExecResult* r) {
  REQUIRE(r != nullptr);
  CHECK(r->status() == ExitStatus::exited);
  CHECK(r->exit_code() == 3);
  CHECK(r->signal() == 0);
  CHECK(r->timed_out());
  CHECK(r->output_truncated());
  CHECK(r->wall_ms() == 11);
  CHECK(r->user_cpu_ms() == 12);
  CHECK(r->sys_cpu_ms() == 13);
  CHECK(r->max_rss_kb() == 14);
  CHECK(r->memory_peak_kb() == 15);
  CHECK(strings(r->enforced()) == std::vector<std::string>{"landlock", "seccomp"});
  CHECK(str(r->temp_dir()) == "/tmp/t");
  CHECK(str(r->setup_step()) == "chdir");
  CHECK(r->setup_errno() == 2);
  CHECK(str(r->message()) == "detail");
  CHECK(r->stdout_bytes() == 16);
  CHECK(r->stderr_bytes() == 17);
  CHECK(r->launched() == true);
  CHECK(r->mode() == Mode::read_only);
  CHECK(r->network() == Network::allowed);
  CHECK(strings(r->workspaces()) == std::vector<std::string>{"/w"});
  CHECK(strings(r->deny_read()) == std::vector<std::string>{"/d"});
  CHECK(strings(r->protect()) == std::vector<std::string>{"/p"});
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

TEST_CASE("builders: worker requests from a client") {
  const Message* m;
  Frame stop = make_worker_stop(5, "w", "s1", true);
  m = decode(stop, 5, Body::WorkerStop);
  CHECK(str(m->body_as_WorkerStop()->name()) == "w");
  CHECK(str(m->body_as_WorkerStop()->scope()) == "s1");
  CHECK(m->body_as_WorkerStop()->force());

  Frame list = make_worker_list(6, "s2");
  m = decode(list, 6, Body::WorkerListRequest);
  CHECK(str(m->body_as_WorkerListRequest()->scope()) == "s2");

  Frame logs = make_worker_logs(7, "w", "s3");
  m = decode(logs, 7, Body::WorkerLogsRequest);
  CHECK(str(m->body_as_WorkerLogsRequest()->name()) == "w");
  CHECK(str(m->body_as_WorkerLogsRequest()->scope()) == "s3");
}

TEST_CASE("builders: ack, scopes and background commands") {
  const Message* m;
  Frame ack = make_ack(8);
  m = decode(ack, 8, Body::Ack);
  CHECK(m->body_as_Ack() != nullptr);

  Frame created = make_scope_created(9, "s1", "/tmp/s1");
  m = decode(created, 9, Body::ScopeCreated);
  CHECK(str(m->body_as_ScopeCreated()->id()) == "s1");
  CHECK(str(m->body_as_ScopeCreated()->temp_dir()) == "/tmp/s1");

  ScopeListEntry full;
  full.id = "s1";
  full.parent = "s0";
  full.owner_uid = 1000;
  full.detached = true;
  full.mode = Mode::read_only;
  full.network = Network::allowed;
  full.workspaces = {"/w1", "/w2"};
  full.deny_read = {"/d"};
  full.protect = {"/p"};
  full.temp_dir = "/tmp/s1";
  full.background = 2;
  full.workers = 3;
  full.memory_bytes = 0;
  full.pids = 64;
  full.cpu_time_ms = 500;
  full.cpus = 1.5;
  full.max_file_size = 4096;
  full.ceiling = true;
  ScopeListEntry bare;
  bare.id = "s2";
  Frame scopes = make_scope_list_reply(10, {full, bare});
  m = decode(scopes, 10, Body::ScopeList);
  const auto* v = m->body_as_ScopeList()->scopes();
  REQUIRE(v);
  REQUIRE(v->size() == 2);
  const ScopeInfo* a = v->Get(0);
  CHECK(str(a->id()) == "s1");
  CHECK(str(a->parent()) == "s0");
  CHECK(a->owner_uid() == 1000);
  CHECK(a->detached());
  CHECK(a->mode() == Mode::read_only);
  CHECK(a->network() == Network::allowed);
  CHECK(strings(a->workspaces()) == std::vector<std::string>{"/w1", "/w2"});
  CHECK(strings(a->deny_read()) == std::vector<std::string>{"/d"});
  CHECK(strings(a->protect()) == std::vector<std::string>{"/p"});
  CHECK(str(a->temp_dir()) == "/tmp/s1");
  CHECK(a->background() == 2);
  CHECK(a->workers() == 3);
  CHECK(a->memory_bytes() == 0u);  // present: an explicit "unlimited"
  CHECK(a->pids() == 64u);
  CHECK(a->cpu_time_ms() == 500);
  CHECK(a->cpus() == 1.5);
  CHECK(a->max_file_size() == 4096);
  CHECK(a->ceiling());
  const ScopeInfo* b = v->Get(1);
  CHECK(str(b->id()) == "s2");
  CHECK(str(b->parent()).empty());
  CHECK(!b->memory_bytes().has_value());
  CHECK(!b->pids().has_value());
  CHECK(!b->ceiling());

  Frame started = make_background_started(11, "bg-1", "s1");
  m = decode(started, 11, Body::BackgroundStarted);
  CHECK(str(m->body_as_BackgroundStarted()->id()) == "bg-1");
  CHECK(str(m->body_as_BackgroundStarted()->scope()) == "s1");

  Frame running = make_poll_reply(12, {"bg-1", "running", "out", std::string_view("e\0rr", 4), std::nullopt});
  m = decode(running, 12, Body::PollReply);
  CHECK(str(m->body_as_PollReply()->id()) == "bg-1");
  CHECK(str(m->body_as_PollReply()->state()) == "running");
  CHECK(bytes(m->body_as_PollReply()->stdout()) == "out");
  CHECK(bytes(m->body_as_PollReply()->stderr()) == std::string("e\0rr", 4));
  CHECK(m->body_as_PollReply()->result() == nullptr);

  Frame ended = make_poll_reply(13, {"bg-1", "exited", "", "", sample_result()});
  m = decode(ended, 13, Body::PollReply);
  CHECK(str(m->body_as_PollReply()->state()) == "exited");
  CHECK(bytes(m->body_as_PollReply()->stdout()).empty());
  check_sample_result(m->body_as_PollReply()->result());
}

TEST_CASE("builders: exec results and authorization requests") {
  const Message* m;
  Frame full = make_exec_result(14, sample_result());
  m = decode(full, 14, Body::ExecResult);
  check_sample_result(m->body_as_ExecResult());

  // What is absent in the struct is absent on the wire.
  ExecResultInfo bare;
  bare.status = ExitStatus::signaled;
  bare.signal = 9;
  Frame killed = make_exec_result(15, bare);
  m = decode(killed, 15, Body::ExecResult);
  const ExecResult* r = m->body_as_ExecResult();
  CHECK(r->status() == ExitStatus::signaled);
  CHECK(r->signal() == 9);
  CHECK(!r->exit_code().has_value());
  CHECK(!r->memory_peak_kb().has_value());
  CHECK(!r->launched().has_value());
  CHECK(!r->mode().has_value());
  CHECK(!r->network().has_value());
  CHECK(r->workspaces() == nullptr);
  CHECK(r->setup_step() == nullptr);
  CHECK(r->message() == nullptr);
  CHECK(strings(r->enforced()).empty());
  CHECK(str(r->temp_dir()).empty());

  Frame ask = make_authorization_request(16, R"({"argv":["ls"]})", 30000);
  m = decode(ask, 16, Body::AuthorizationRequest);
  CHECK(str(m->body_as_AuthorizationRequest()->description()) == R"({"argv":["ls"]})");
  CHECK(m->body_as_AuthorizationRequest()->deadline_ms() == 30000);
}

TEST_CASE("builders: file tool results") {
  const Message* m;
  Frame read = make_read_result(17, std::string_view("a\0b", 3), 100, 4096, true);
  m = decode(read, 17, Body::ReadResult);
  CHECK(bytes(m->body_as_ReadResult()->data()) == std::string("a\0b", 3));
  CHECK(m->body_as_ReadResult()->offset() == 100);
  CHECK(m->body_as_ReadResult()->file_size() == 4096);
  CHECK(m->body_as_ReadResult()->truncated());

  Frame write = make_write_result(18, 42);
  m = decode(write, 18, Body::WriteResult);
  CHECK(m->body_as_WriteResult()->bytes() == 42);

  Frame list = make_list_result(19, {{"a", "file", 10, -5}, {"b", "dir", 0, 1700000000000}}, true);
  m = decode(list, 19, Body::ListResult);
  const auto* entries = m->body_as_ListResult()->entries();
  REQUIRE(entries);
  REQUIRE(entries->size() == 2);
  CHECK(str(entries->Get(0)->name()) == "a");
  CHECK(str(entries->Get(0)->type()) == "file");
  CHECK(entries->Get(0)->size() == 10);
  CHECK(entries->Get(0)->mtime_ms() == -5);
  CHECK(str(entries->Get(1)->name()) == "b");
  CHECK(str(entries->Get(1)->type()) == "dir");
  CHECK(entries->Get(1)->mtime_ms() == 1700000000000);
  CHECK(m->body_as_ListResult()->truncated());

  Frame empty = make_list_result(20, {}, false);
  m = decode(empty, 20, Body::ListResult);
  REQUIRE(m->body_as_ListResult()->entries());
  CHECK(m->body_as_ListResult()->entries()->size() == 0);
  CHECK(!m->body_as_ListResult()->truncated());
}

TEST_CASE("builders: worker replies and the worker channel") {
  const Message* m;
  Frame started = make_worker_started(21, "w", "s1");
  m = decode(started, 21, Body::WorkerStarted);
  CHECK(str(m->body_as_WorkerStarted()->name()) == "w");
  CHECK(str(m->body_as_WorkerStarted()->scope()) == "s1");

  Frame list = make_worker_list_reply(22, {{"w", "s1", "busy", 7, {"/bin/w", "-x"}, 1234}});
  m = decode(list, 22, Body::WorkerList);
  const auto* workers = m->body_as_WorkerList()->workers();
  REQUIRE(workers);
  REQUIRE(workers->size() == 1);
  const WorkerInfo* w = workers->Get(0);
  CHECK(str(w->name()) == "w");
  CHECK(str(w->scope()) == "s1");
  CHECK(str(w->state()) == "busy");
  CHECK(w->evaluations() == 7);
  CHECK(strings(w->argv()) == std::vector<std::string>{"/bin/w", "-x"});
  CHECK(w->pid() == 1234);

  Frame logs = make_worker_logs_reply(23, "line\n");
  m = decode(logs, 23, Body::WorkerLogs);
  CHECK(bytes(m->body_as_WorkerLogs()->data()) == "line\n");

  Frame result = make_worker_eval_result(24, "reply", 3);
  m = decode(result, 24, Body::WorkerEvalResult);
  CHECK(bytes(m->body_as_WorkerEvalResult()->reply()) == "reply");
  CHECK(m->body_as_WorkerEvalResult()->host_calls() == 3);

  Frame evaluate = make_evaluate(25, "req");
  m = decode(evaluate, 25, Body::Evaluate);
  CHECK(bytes(m->body_as_Evaluate()->data()) == "req");

  Frame call = make_host_call(26, 4, "ping");
  m = decode(call, 26, Body::HostCall);
  CHECK(m->body_as_HostCall()->call_id() == 4);
  CHECK(bytes(m->body_as_HostCall()->data()) == "ping");

  Frame reply = make_eval_reply(27, "");
  m = decode(reply, 27, Body::EvalReply);
  CHECK(bytes(m->body_as_EvalReply()->data()).empty());

  Frame host_error = make_host_reply(28, 5, "", "no channel");
  m = decode(host_error, 28, Body::HostReply);
  CHECK(m->body_as_HostReply()->call_id() == 5);
  CHECK(bytes(m->body_as_HostReply()->data()).empty());
  CHECK(str(m->body_as_HostReply()->error()) == "no channel");
}
