// The fuzz body of the inbound frame decoder, shared by the libFuzzer target
// (tests/fuzz/frame_fuzzer.cc) and the corpus replay test (tests/fuzz_corpus_test.cc), so the
// test replays exactly the path the fuzzer explores.
//
// decode_input() treats its input as bytes arriving on a connection, and does to them what the
// supervisor's reader does (supervisor/connection.cc): refuse a length prefix over the frame
// limit as soon as the header is complete (the stream then stops), pass every complete payload
// through verify_payload(), and read a verified message in full: every field of every body
// type, as dispatch and to_spec() read them. It also prints each verified message as JSON, as
// `corral call` does with every frame it receives.
//
// The input is fed in three pieces (cut at 1/3 and 2/3 of its length) so headers and payloads
// straddle reads, and complete payloads are drained after each piece, as a reader would.
#pragma once

#include <bit>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <span>
#include <string>
#include <vector>

#include "worker_proto/codec.h"
#include "worker_proto/json.h"

namespace corral::fuzz {

// Frame limit for fuzzing, bytes. Smaller than the supervisor's 16 MiB default so the fuzzer
// reaches "too large" with short inputs; the code path is the same.
inline constexpr std::uint32_t kFuzzMaxFrame = 1u << 20;

// The last union member read_message() knows; fuzz_corpus_test checks it is the schema's last,
// so a new member cannot go unread by the fuzzer unnoticed.
inline constexpr proto::Body kLastWalkedBody = proto::Body::Authorization;

// What happened to one complete payload.
struct FrameOutcome {
  bool verified = false;
  proto::Body body = proto::Body::NONE;               // when verified
  std::uint64_t request_id = 0;                       // when verified
  proto::ErrorCode error = proto::ErrorCode::malformed;  // when refused by verify_payload
  std::string error_message;                          // its message, when refused
  bool json_ok = false;                               // when verified: printed as JSON
};

struct DecodeOutcome {
  std::vector<FrameOutcome> frames;  // every complete payload, in stream order
  bool stream_refused = false;       // FrameSplitter::feed returned false (oversized prefix)
  proto::DecodeError stream_error;   // why, when stream_refused
  // Cross-check by a plain walk of the length prefixes over the bytes fed: how many frames
  // it finds (must equal frames.size()) and how many bytes trail them (an incomplete frame,
  // or the refused header and what follows it).
  std::size_t walked_frames = 0;
  std::size_t undecoded_bytes = 0;
  std::uint64_t digest = 0;          // folds in every field read, so no read is optimised away
};

namespace detail {

inline void mix(std::uint64_t& d, std::uint64_t v) { d = (d ^ v) * 0x100000001b3ull; }
// An optional scalar (a cap where 0 says "unlimited"): absent mixes apart from every value.
inline void mix(std::uint64_t& d, flatbuffers::Optional<std::uint64_t> v) {
  mix(d, v.has_value());
  mix(d, v.value_or(0));
}
// An enum field, optional or not; absent mixes as a value no enum has.
template <class E>
std::uint64_t opt(flatbuffers::Optional<E> v) { return v.has_value() ? static_cast<std::uint64_t>(*v) : 0x100; }
template <class E>
std::uint64_t opt(E v) { return static_cast<std::uint64_t>(v); }

inline void read_string(std::uint64_t& d, const flatbuffers::String* s) {
  if (!s) return mix(d, 1);
  const std::string copy = s->str();  // the supervisor copies strings out of the buffer
  mix(d, copy.size());
  for (unsigned char c : copy) mix(d, c);
}

inline void read_bytes(std::uint64_t& d, const flatbuffers::Vector<std::uint8_t>* v) {
  if (!v) return mix(d, 2);
  mix(d, v->size());
  for (std::uint8_t b : *v) mix(d, b);
}

inline void read_strings(std::uint64_t& d,
                         const flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>>* v) {
  if (!v) return mix(d, 3);
  mix(d, v->size());
  for (const flatbuffers::String* s : *v) read_string(d, s);
}

inline void read_layers(std::uint64_t& d, const flatbuffers::Vector<flatbuffers::Offset<proto::Layer>>* v) {
  if (!v) return mix(d, 4);
  mix(d, v->size());
  for (const proto::Layer* l : *v) {
    if (!l) continue;
    read_string(d, l->name());
    mix(d, l->available());
    read_string(d, l->reason());
  }
}

inline void read_env(std::uint64_t& d, const flatbuffers::Vector<flatbuffers::Offset<proto::EnvVar>>* v) {
  if (!v) return mix(d, 8);
  mix(d, v->size());
  for (const proto::EnvVar* e : *v) {
    if (!e) continue;
    read_string(d, e->name());
    read_string(d, e->value());
  }
}

inline void read_exec_result(std::uint64_t& d, const proto::ExecResult* b) {
  if (!b) return mix(d, 7);
  mix(d, static_cast<std::uint64_t>(b->status()));
  const auto code = b->exit_code();
  mix(d, code.has_value() ? static_cast<std::uint64_t>(static_cast<std::uint32_t>(*code)) : 5);
  mix(d, static_cast<std::uint32_t>(b->signal()));
  mix(d, b->timed_out());
  mix(d, b->output_truncated());
  mix(d, b->wall_ms());
  mix(d, b->user_cpu_ms());
  mix(d, b->sys_cpu_ms());
  mix(d, b->max_rss_kb());
  const auto peak = b->memory_peak_kb();
  mix(d, peak.has_value() ? *peak : 6);
  read_strings(d, b->enforced());
  read_string(d, b->temp_dir());
  read_string(d, b->setup_step());
  mix(d, static_cast<std::uint32_t>(b->setup_errno()));
  read_string(d, b->message());
  mix(d, b->stdout_bytes());
  mix(d, b->stderr_bytes());
  if (auto launched = b->launched()) mix(d, *launched);
}

// Every field of every body type. Unknown body types (a newer peer's) are named and skipped.
// A new union member or field in corral.fbs gets its reads added here.
inline void read_message(std::uint64_t& d, const proto::Message& m) {
  mix(d, m.request_id());
  mix(d, static_cast<std::uint64_t>(m.body_type()));
  const char* name = proto::body_name(m.body_type());
  mix(d, std::strlen(name));
  switch (m.body_type()) {
    case proto::Body::Hello: {
      const auto* b = m.body_as_Hello();
      mix(d, b->protocol_version());
      read_string(d, b->client_name());
      break;
    }
    case proto::Body::HelloReply: {
      const auto* b = m.body_as_HelloReply();
      mix(d, b->protocol_version());
      read_string(d, b->server_version());
      read_layers(d, b->layers());
      mix(d, b->max_frame_bytes());
      break;
    }
    case proto::Body::ExecRequest: {
      const auto* b = m.body_as_ExecRequest();
      read_strings(d, b->argv());
      read_string(d, b->shell());
      read_env(d, b->env());
      read_string(d, b->cwd());
      read_bytes(d, b->stdin());
      mix(d, b->timeout_ms());
      mix(d, b->grace_ms());
      mix(d, b->max_output_bytes());
      mix(d, opt(b->mode()));
      mix(d, opt(b->network()));
      read_strings(d, b->workspaces());
      read_strings(d, b->deny_read());
      read_strings(d, b->protect());
      if (const auto* binds = b->binds()) {
        mix(d, binds->size());
        for (const proto::Bind* bind : *binds) {
          if (!bind) continue;
          read_string(d, bind->source());
          read_string(d, bind->target());
          mix(d, bind->writable());
        }
      }
      mix(d, b->memory_bytes());
      mix(d, b->pids());
      mix(d, b->cpu_time_ms());
      mix(d, std::bit_cast<std::uint64_t>(b->cpus()));
      mix(d, b->max_file_size());
      read_string(d, b->scope());
      mix(d, b->background());
      mix(d, b->authorize());
      break;
    }
    case proto::Body::OutputChunk: {
      const auto* b = m.body_as_OutputChunk();
      mix(d, static_cast<std::uint64_t>(b->stream()));
      read_bytes(d, b->data());
      break;
    }
    case proto::Body::ExecResult:
      read_exec_result(d, m.body_as_ExecResult());
      break;
    case proto::Body::Cancel:
      mix(d, m.body_as_Cancel()->force());
      break;
    case proto::Body::StatusRequest:
      mix(d, m.body_as_StatusRequest() != nullptr);
      break;
    case proto::Body::StatusReply: {
      const auto* b = m.body_as_StatusReply();
      read_string(d, b->server_version());
      mix(d, b->protocol_version());
      read_layers(d, b->layers());
      mix(d, b->pid());
      mix(d, b->uptime_ms());
      mix(d, b->connections());
      mix(d, b->running_commands());
      read_string(d, b->socket_path());
      break;
    }
    case proto::Body::Error: {
      const auto* b = m.body_as_Error();
      mix(d, static_cast<std::uint64_t>(b->code()));
      read_string(d, b->message());
      break;
    }
    case proto::Body::ReadRequest: {
      const auto* b = m.body_as_ReadRequest();
      read_string(d, b->path());
      read_strings(d, b->workspaces());
      mix(d, b->offset());
      mix(d, b->max_bytes());
      mix(d, b->binary());
      mix(d, opt(b->mode()));
      read_string(d, b->scope());
      break;
    }
    case proto::Body::ReadResult: {
      const auto* b = m.body_as_ReadResult();
      read_bytes(d, b->data());
      mix(d, b->offset());
      mix(d, b->file_size());
      mix(d, b->truncated());
      break;
    }
    case proto::Body::WriteRequest: {
      const auto* b = m.body_as_WriteRequest();
      read_string(d, b->path());
      read_strings(d, b->workspaces());
      read_bytes(d, b->data());
      mix(d, b->binary());
      mix(d, opt(b->mode()));
      read_string(d, b->scope());
      break;
    }
    case proto::Body::WriteResult:
      mix(d, m.body_as_WriteResult()->bytes());
      break;
    case proto::Body::ListRequest: {
      const auto* b = m.body_as_ListRequest();
      read_string(d, b->path());
      read_strings(d, b->workspaces());
      mix(d, b->max_entries());
      mix(d, opt(b->mode()));
      read_string(d, b->scope());
      break;
    }
    case proto::Body::ListResult: {
      const auto* b = m.body_as_ListResult();
      if (const auto* entries = b->entries()) {
        mix(d, entries->size());
        for (const proto::DirEntry* e : *entries) {
          if (!e) continue;
          read_string(d, e->name());
          read_string(d, e->type());
          mix(d, e->size());
          mix(d, static_cast<std::uint64_t>(e->mtime_ms()));
        }
      }
      mix(d, b->truncated());
      break;
    }
    case proto::Body::ScopeCreate: {
      const auto* b = m.body_as_ScopeCreate();
      read_string(d, b->parent());
      mix(d, b->detach());
      mix(d, opt(b->mode()));
      mix(d, opt(b->network()));
      read_strings(d, b->workspaces());
      break;
    }
    case proto::Body::ScopeCreated: {
      const auto* b = m.body_as_ScopeCreated();
      read_string(d, b->id());
      read_string(d, b->temp_dir());
      break;
    }
    case proto::Body::ScopeClose:
      read_string(d, m.body_as_ScopeClose()->id());
      break;
    case proto::Body::ScopeListRequest:
      mix(d, m.body_as_ScopeListRequest() != nullptr);
      break;
    case proto::Body::ScopeList: {
      const auto* scopes = m.body_as_ScopeList()->scopes();
      if (!scopes) break;
      mix(d, scopes->size());
      for (const proto::ScopeInfo* i : *scopes) {
        if (!i) continue;
        read_string(d, i->id());
        read_string(d, i->parent());
        mix(d, i->owner_uid());
        mix(d, i->detached());
        mix(d, opt(i->mode()));
        mix(d, opt(i->network()));
        read_strings(d, i->workspaces());
        read_string(d, i->temp_dir());
        mix(d, i->background());
        mix(d, i->workers());
      }
      break;
    }
    case proto::Body::Ack:
      mix(d, m.body_as_Ack() != nullptr);
      break;
    case proto::Body::BackgroundStarted: {
      const auto* b = m.body_as_BackgroundStarted();
      read_string(d, b->id());
      read_string(d, b->scope());
      break;
    }
    case proto::Body::Poll:
      read_string(d, m.body_as_Poll()->id());
      break;
    case proto::Body::PollReply: {
      const auto* b = m.body_as_PollReply();
      read_string(d, b->id());
      read_string(d, b->state());
      read_bytes(d, b->stdout());
      read_bytes(d, b->stderr());
      read_exec_result(d, b->result());
      break;
    }
    case proto::Body::BackgroundStop: {
      const auto* b = m.body_as_BackgroundStop();
      read_string(d, b->id());
      mix(d, b->force());
      break;
    }
    case proto::Body::WorkerStart: {
      const auto* b = m.body_as_WorkerStart();
      read_string(d, b->name());
      read_string(d, b->scope());
      read_strings(d, b->argv());
      read_env(d, b->env());
      mix(d, opt(b->mode()));
      mix(d, opt(b->network()));
      read_strings(d, b->workspaces());
      mix(d, b->memory_bytes());
      mix(d, b->pids());
      mix(d, std::bit_cast<std::uint64_t>(b->cpus()));
      mix(d, b->idle_timeout_ms());
      mix(d, b->python());
      break;
    }
    case proto::Body::WorkerStarted: {
      const auto* b = m.body_as_WorkerStarted();
      read_string(d, b->name());
      read_string(d, b->scope());
      break;
    }
    case proto::Body::WorkerEval: {
      const auto* b = m.body_as_WorkerEval();
      read_string(d, b->name());
      read_string(d, b->scope());
      read_bytes(d, b->request());
      mix(d, b->timeout_ms());
      mix(d, b->reset());
      mix(d, b->serve_host_calls());
      break;
    }
    case proto::Body::WorkerEvalResult: {
      const auto* b = m.body_as_WorkerEvalResult();
      read_bytes(d, b->reply());
      mix(d, b->host_calls());
      break;
    }
    case proto::Body::HostCall: {
      const auto* b = m.body_as_HostCall();
      mix(d, b->call_id());
      read_bytes(d, b->data());
      break;
    }
    case proto::Body::HostReply: {
      const auto* b = m.body_as_HostReply();
      mix(d, b->call_id());
      read_bytes(d, b->data());
      read_string(d, b->error());
      break;
    }
    case proto::Body::Evaluate:
      read_bytes(d, m.body_as_Evaluate()->data());
      break;
    case proto::Body::EvalReply:
      read_bytes(d, m.body_as_EvalReply()->data());
      break;
    case proto::Body::WorkerStop: {
      const auto* b = m.body_as_WorkerStop();
      read_string(d, b->name());
      read_string(d, b->scope());
      mix(d, b->force());
      break;
    }
    case proto::Body::WorkerListRequest:
      read_string(d, m.body_as_WorkerListRequest()->scope());
      break;
    case proto::Body::WorkerList: {
      const auto* workers = m.body_as_WorkerList()->workers();
      if (!workers) break;
      mix(d, workers->size());
      for (const proto::WorkerInfo* w : *workers) {
        if (!w) continue;
        read_string(d, w->name());
        read_string(d, w->scope());
        read_string(d, w->state());
        mix(d, w->evaluations());
        read_strings(d, w->argv());
        mix(d, w->pid());
      }
      break;
    }
    case proto::Body::WorkerLogsRequest: {
      const auto* b = m.body_as_WorkerLogsRequest();
      read_string(d, b->name());
      read_string(d, b->scope());
      break;
    }
    case proto::Body::WorkerLogs:
      read_bytes(d, m.body_as_WorkerLogs()->data());
      break;
    case proto::Body::AuthorizationRequest: {
      const auto* b = m.body_as_AuthorizationRequest();
      read_string(d, b->description());
      mix(d, b->deadline_ms());
      break;
    }
    case proto::Body::Authorization: {
      const auto* b = m.body_as_Authorization();
      mix(d, b->grant());
      read_string(d, b->reason());
      break;
    }
    default:
      break;
  }
}

inline void decode_payload(const std::vector<std::uint8_t>& payload, proto::JsonCodec& json,
                           DecodeOutcome& out) {
  FrameOutcome f;
  proto::DecodeError err;
  const proto::Message* msg = proto::verify_payload(payload, kFuzzMaxFrame, err);
  if (!msg) {
    f.error = err.code;
    f.error_message = std::move(err.message);
    out.frames.push_back(f);
    return;
  }
  f.verified = true;
  f.body = msg->body_type();
  f.request_id = msg->request_id();
  read_message(out.digest, *msg);
  auto text = json.to_json(payload);
  f.json_ok = text.ok();
  mix(out.digest, text ? text->size() : 0);
  out.frames.push_back(f);
}

}  // namespace detail

// The JSON codec the fuzz body prints with: created once per process (parsing the embedded
// schema is far slower than one decode). Aborts if the embedded schema does not parse.
inline proto::JsonCodec& fuzz_json_codec() {
  static proto::JsonCodec* codec = [] {
    auto c = proto::JsonCodec::create(/*strict=*/false);
    if (!c) std::abort();
    return c->release();  // lives as long as the process
  }();
  return *codec;
}

// Decodes `data` as one inbound byte stream; see the top of this file. Never throws on any
// input; a crash or sanitizer report here is a bug in the decoder.
inline DecodeOutcome decode_input(std::span<const std::uint8_t> data, proto::JsonCodec& json) {
  DecodeOutcome out;
  proto::FrameSplitter splitter(kFuzzMaxFrame);
  std::vector<std::uint8_t> payload;
  const std::size_t cuts[] = {0, data.size() / 3, data.size() * 2 / 3, data.size()};
  std::size_t fed = 0;
  for (std::size_t i = 0; i + 1 < std::size(cuts); ++i) {
    const bool ok = splitter.feed(data.subspan(cuts[i], cuts[i + 1] - cuts[i]), out.stream_error);
    fed = cuts[i + 1];
    // Frames completed before an oversized prefix are still handled, as the supervisor does
    // with frames it read before that header.
    while (splitter.next(payload)) detail::decode_payload(payload, json, out);
    if (!ok) {
      out.stream_refused = true;
      break;
    }
  }
  std::size_t decoded = 0;
  while (fed - decoded >= proto::kHeaderBytes) {
    const std::uint32_t n = proto::read_length(data.data() + decoded);
    if (n > kFuzzMaxFrame || fed - decoded - proto::kHeaderBytes < n) break;
    decoded += proto::kHeaderBytes + n;
    ++out.walked_frames;
  }
  out.undecoded_bytes = fed - decoded;
  return out;
}

}  // namespace corral::fuzz
