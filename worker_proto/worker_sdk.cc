#include "worker_proto/worker_sdk.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>

#include "worker_proto/messages.h"

namespace corral::proto {
namespace {

std::string text(const flatbuffers::Vector<std::uint8_t>* v) {
  return v ? std::string(reinterpret_cast<const char*>(v->data()), v->size()) : std::string();
}

std::string protocol_error(const Error* e) {
  return "the supervisor reported a protocol error (" + std::string(EnumNameErrorCode(e->code())) +
         "): " + (e->message() ? e->message()->str() : std::string());
}

// Logs go to stderr, which the supervisor keeps as the worker's log.
void log(const std::string& line) { std::fprintf(stderr, "corral worker: %s\n", line.c_str()); }

}  // namespace

Result<std::unique_ptr<WorkerConnection>> WorkerConnection::from_env() {
  const char* value = std::getenv("CORRAL_WORKER_FD");
  if (!value || !*value)
    return Failure{Failure::Kind::invalid,
                   "CORRAL_WORKER_FD is not set: this program is a corral worker, started by the supervisor"};
  char* end = nullptr;
  errno = 0;
  long fd = std::strtol(value, &end, 10);
  if (errno || *end || fd < 0 || fd > 1'000'000)
    return Failure{Failure::Kind::invalid, std::string("CORRAL_WORKER_FD is not an fd number: ") + value};
  int flags = ::fcntl(static_cast<int>(fd), F_GETFD);
  if (flags < 0)
    return Failure{Failure::Kind::invalid,
                   "CORRAL_WORKER_FD=" + std::string(value) + " is not open: " + std::strerror(errno)};
  ::fcntl(static_cast<int>(fd), F_SETFD, flags | FD_CLOEXEC);
  ::unsetenv("CORRAL_WORKER_FD");
  return std::make_unique<WorkerConnection>(static_cast<int>(fd));
}

WorkerConnection::WorkerConnection(int fd) : fd_(fd) {}

WorkerConnection::~WorkerConnection() {
  if (fd_ >= 0) ::close(fd_);
}

void WorkerConnection::fail(Failure why, bool eof) {
  if (broken_) return;
  broken_ = std::move(why);
  eof_ = eof;
}

Result<std::optional<WorkerConnection::Payload>> WorkerConnection::read_frame() {
  FrameIn in = proto::read_frame(fd_, kMaxFrame);
  switch (in.end) {
    case FrameIn::End::frame: return std::optional<Payload>(std::move(in.payload));
    case FrameIn::End::eof: return std::optional<Payload>();
    case FrameIn::End::truncated:
      return Failure{Failure::Kind::closed, in.in_header ? "the supervisor closed the channel inside a frame header"
                                                         : "the supervisor closed the channel inside a frame"};
    case FrameIn::End::oversized:
      return Failure{Failure::Kind::protocol, "frame of " + std::to_string(in.length) + " bytes is over the " +
                                                  std::to_string(kMaxFrame) + "-byte limit"};
    case FrameIn::End::timeout:
    case FrameIn::End::io: break;
  }
  return Failure{Failure::Kind::io, std::string("read from the supervisor failed: ") + std::strerror(in.err)};
}

Result<void> WorkerConnection::write_frame(const Frame& frame) {
  if (const int err = write_all(fd_, frame.data(), frame.size()))
    return Failure{write_failure_kind(err), std::string("write to the supervisor failed: ") + std::strerror(err)};
  return {};
}

Result<void> WorkerConnection::serve(const Handler& handler) {
  while (!broken_) {
    auto payload = read_frame();
    if (!payload) return payload.error();
    if (!*payload) return {};  // the supervisor left: the worker's work is done
    DecodeError de;
    const Message* msg = verify_payload(**payload, kMaxFrame, de);
    if (!msg) return Failure{Failure::Kind::protocol, "bad frame from the supervisor: " + de.message};
    if (const Evaluate* ev = msg->body_as_Evaluate()) {
      const std::string request = text(ev->data());
      eval_id_ = msg->request_id();
      in_eval_ = true;
      pending_.clear();
      answers_.clear();
      std::string reply;
      try {
        reply = handler(request, *this);
      } catch (const std::exception& e) {
        reply = std::string("corral worker error: ") + e.what();
      } catch (...) {
        reply = "corral worker error: the handler threw a non-standard exception";
      }
      in_eval_ = false;
      if (broken_) break;  // nobody to reply to
      Frame frame = make_eval_reply(eval_id_, reply);
      if (frame.size() - kHeaderBytes > kMaxFrame)
        frame = make_eval_reply(eval_id_, "corral worker error: the reply of " + std::to_string(reply.size()) +
                                              " bytes is over the frame limit");
      if (auto written = write_frame(frame); !written) return written;
    } else if (const Error* e = msg->body_as_Error()) {
      return Failure{Failure::Kind::protocol, protocol_error(e)};
    } else if (msg->body_type() == Body::HostReply) {
      // A late reply for an evaluation that has ended: the supervisor should not send it.
      log("ignored a HostReply outside any evaluation (request " + std::to_string(msg->request_id()) + ")");
    } else {
      return Failure{Failure::Kind::protocol,
                     std::string("unexpected ") + body_name(msg->body_type()) + " from the supervisor"};
    }
  }
  if (eof_) return {};
  return *broken_;
}

Result<std::uint64_t> WorkerConnection::start_host_call(std::string_view data) {
  if (!in_eval_)
    return Failure{Failure::Kind::invalid, "host calls are only possible while an evaluation runs (inside the handler)"};
  if (broken_) return *broken_;
  const std::uint64_t call_id = next_call_id_++;
  Frame frame = make_host_call(eval_id_, call_id, data);
  if (frame.size() - kHeaderBytes > kMaxFrame)
    return Failure{Failure::Kind::invalid,
                   "host call of " + std::to_string(data.size()) + " bytes is over the frame limit"};
  if (auto written = write_frame(frame); !written) {
    fail(written.error());
    return written.error();
  }
  pending_.insert(call_id);
  return call_id;
}

Result<std::string> WorkerConnection::wait_host_call(std::uint64_t call_id) {
  if (!pending_.contains(call_id) && !answers_.contains(call_id))
    return Failure{Failure::Kind::invalid, "no host call " + std::to_string(call_id) + " is in flight"};
  while (!answers_.contains(call_id) && !broken_) {
    auto payload = read_frame();
    if (!payload) {
      fail(payload.error());
      break;
    }
    if (!*payload) {
      fail({Failure::Kind::closed, "the supervisor closed the channel"}, /*eof=*/true);
      break;
    }
    DecodeError de;
    const Message* msg = verify_payload(**payload, kMaxFrame, de);
    if (!msg) {
      fail({Failure::Kind::protocol, "bad frame from the supervisor: " + de.message});
    } else if (const HostReply* hr = msg->body_as_HostReply()) {
      if (msg->request_id() != eval_id_ || !pending_.contains(hr->call_id())) {
        log("ignored a HostReply for call " + std::to_string(hr->call_id()) + " of request " +
            std::to_string(msg->request_id()) + ": not in flight");
        continue;
      }
      pending_.erase(hr->call_id());
      const bool failed = hr->error() && hr->error()->size() > 0;
      answers_.insert_or_assign(hr->call_id(), failed ? Result<std::string>(Failure{Failure::Kind::refused, hr->error()->str()})
                                                      : Result<std::string>(text(hr->data())));
    } else if (const Error* e = msg->body_as_Error()) {
      fail({Failure::Kind::protocol, protocol_error(e)});
    } else {
      fail({Failure::Kind::protocol,
            std::string("unexpected ") + body_name(msg->body_type()) + " from the supervisor during an evaluation"});
    }
  }
  auto it = answers_.find(call_id);
  if (it == answers_.end()) return *broken_;
  Result<std::string> answer = std::move(it->second);
  answers_.erase(it);
  return answer;
}

Result<std::string> WorkerConnection::host_call(std::string_view data) {
  auto id = start_host_call(data);
  if (!id) return id.error();
  return wait_host_call(*id);
}

}  // namespace corral::proto
