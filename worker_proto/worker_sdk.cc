#include "worker_proto/worker_sdk.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>

namespace corral::proto {
namespace {

using Bytes = flatbuffers::Offset<flatbuffers::Vector<std::uint8_t>>;

Bytes bytes(flatbuffers::FlatBufferBuilder& fbb, std::string_view data) {
  return fbb.CreateVector(reinterpret_cast<const std::uint8_t*>(data.data()), data.size());
}

std::string text(const flatbuffers::Vector<std::uint8_t>* v) {
  return v ? std::string(reinterpret_cast<const char*>(v->data()), v->size()) : std::string();
}

std::string protocol_error(const Error* e) {
  return "the supervisor reported a protocol error (" + std::string(EnumNameErrorCode(e->code())) +
         "): " + (e->message() ? e->message()->str() : std::string());
}

template <class T>
Frame finish(flatbuffers::FlatBufferBuilder& fbb, std::uint64_t id, flatbuffers::Offset<T> body) {
  return finish_frame(fbb, CreateMessage(fbb, id, BodyTraits<T>::enum_value, body.Union()));
}

Frame eval_reply(std::uint64_t id, std::string_view data) {
  flatbuffers::FlatBufferBuilder fbb(64 + data.size());
  auto d = bytes(fbb, data);
  return finish(fbb, id, CreateEvalReply(fbb, d));
}

Frame host_call_frame(std::uint64_t id, std::uint64_t call_id, std::string_view data) {
  flatbuffers::FlatBufferBuilder fbb(64 + data.size());
  auto d = bytes(fbb, data);
  return finish(fbb, id, CreateHostCall(fbb, call_id, d));
}

// Logs go to stderr, which the supervisor keeps as the worker's log.
void log(const std::string& line) { std::fprintf(stderr, "corral worker: %s\n", line.c_str()); }

}  // namespace

std::unique_ptr<WorkerConnection> WorkerConnection::from_env(std::string& error) {
  const char* value = std::getenv("CORRAL_WORKER_FD");
  if (!value || !*value) {
    error = "CORRAL_WORKER_FD is not set: this program is a corral worker, started by the supervisor";
    return nullptr;
  }
  char* end = nullptr;
  errno = 0;
  long fd = std::strtol(value, &end, 10);
  if (errno || *end || fd < 0 || fd > 1'000'000) {
    error = std::string("CORRAL_WORKER_FD is not an fd number: ") + value;
    return nullptr;
  }
  int flags = ::fcntl(static_cast<int>(fd), F_GETFD);
  if (flags < 0) {
    error = "CORRAL_WORKER_FD=" + std::string(value) + " is not open: " + std::strerror(errno);
    return nullptr;
  }
  ::fcntl(static_cast<int>(fd), F_SETFD, flags | FD_CLOEXEC);
  ::unsetenv("CORRAL_WORKER_FD");
  return std::make_unique<WorkerConnection>(static_cast<int>(fd));
}

WorkerConnection::WorkerConnection(int fd) : fd_(fd) {}

WorkerConnection::~WorkerConnection() {
  if (fd_ >= 0) ::close(fd_);
}

void WorkerConnection::fail(std::string why, bool eof) {
  if (!broken_.empty()) return;
  broken_ = std::move(why);
  eof_ = eof;
}

WorkerConnection::Read WorkerConnection::read_frame(std::vector<std::uint8_t>& payload,
                                                    std::string& error) {
  auto read_exact = [&](std::uint8_t* p, std::size_t n, std::size_t& got) {
    got = 0;
    while (got < n) {
      ssize_t r = ::read(fd_, p + got, n - got);
      if (r > 0) {
        got += static_cast<std::size_t>(r);
      } else if (r == 0) {
        return false;
      } else if (errno != EINTR) {
        error = std::string("read from the supervisor failed: ") + std::strerror(errno);
        return false;
      }
    }
    return true;
  };
  std::uint8_t header[kHeaderBytes];
  std::size_t got = 0;
  error.clear();
  if (!read_exact(header, kHeaderBytes, got)) {
    if (!error.empty()) return Read::error;
    if (got == 0) return Read::eof;
    error = "the supervisor closed the channel inside a frame header";
    return Read::error;
  }
  std::uint32_t n = read_length(header);
  if (n > kMaxFrame) {  // before allocating anything
    error = "frame of " + std::to_string(n) + " bytes is over the " + std::to_string(kMaxFrame) +
            "-byte limit";
    return Read::error;
  }
  payload.resize(n);
  if (!read_exact(payload.data(), n, got)) {
    if (error.empty()) error = "the supervisor closed the channel inside a frame";
    return Read::error;
  }
  return Read::frame;
}

bool WorkerConnection::write_frame(const Frame& frame, std::string& error) {
  std::size_t done = 0;
  while (done < frame.size()) {
    // MSG_NOSIGNAL: a supervisor that is gone is an error here, not a SIGPIPE.
    ssize_t w = ::send(fd_, frame.data() + done, frame.size() - done, MSG_NOSIGNAL);
    if (w < 0 && errno == ENOTSOCK) w = ::write(fd_, frame.data() + done, frame.size() - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      error = std::string("write to the supervisor failed: ") + std::strerror(errno);
      return false;
    }
    done += static_cast<std::size_t>(w);
  }
  return true;
}

bool WorkerConnection::serve(const Handler& handler, std::string& error) {
  std::vector<std::uint8_t> payload;
  while (broken_.empty()) {
    Read r = read_frame(payload, error);
    if (r == Read::eof) return true;
    if (r == Read::error) return false;
    DecodeError de;
    const Message* msg = verify_payload(payload, kMaxFrame, de);
    if (!msg) {
      error = "bad frame from the supervisor: " + de.message;
      return false;
    }
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
      if (!broken_.empty()) break;  // nobody to reply to
      Frame frame = eval_reply(eval_id_, reply);
      if (frame.size() - kHeaderBytes > kMaxFrame)
        frame = eval_reply(eval_id_, "corral worker error: the reply of " + std::to_string(reply.size()) +
                                         " bytes is over the frame limit");
      if (!write_frame(frame, error)) return false;
    } else if (const Error* e = msg->body_as_Error()) {
      error = protocol_error(e);
      return false;
    } else if (msg->body_type() == Body::HostReply) {
      // A late reply for an evaluation that has ended: the supervisor should not send it.
      log("ignored a HostReply outside any evaluation (request " + std::to_string(msg->request_id()) + ")");
    } else {
      error = std::string("unexpected ") + body_name(msg->body_type()) + " from the supervisor";
      return false;
    }
  }
  if (eof_) return true;
  error = broken_;
  return false;
}

std::uint64_t WorkerConnection::start_host_call(std::string_view data, std::string& error) {
  if (!in_eval_) {
    error = "host calls are only possible while an evaluation runs (inside the handler)";
    return 0;
  }
  if (!broken_.empty()) {
    error = broken_;
    return 0;
  }
  const std::uint64_t call_id = next_call_id_++;
  Frame frame = host_call_frame(eval_id_, call_id, data);
  if (frame.size() - kHeaderBytes > kMaxFrame) {
    error = "host call of " + std::to_string(data.size()) + " bytes is over the frame limit";
    return 0;
  }
  std::string werr;
  if (!write_frame(frame, werr)) {
    fail(werr);
    error = werr;
    return 0;
  }
  pending_.insert(call_id);
  return call_id;
}

bool WorkerConnection::wait_host_call(std::uint64_t call_id, std::string& reply, std::string& error) {
  if (!pending_.contains(call_id) && !answers_.contains(call_id)) {
    error = "no host call " + std::to_string(call_id) + " is in flight";
    return false;
  }
  std::vector<std::uint8_t> payload;
  while (!answers_.contains(call_id) && broken_.empty()) {
    std::string rerr;
    Read r = read_frame(payload, rerr);
    if (r == Read::eof) {
      fail("the supervisor closed the channel", true);
      break;
    }
    if (r == Read::error) {
      fail(rerr);
      break;
    }
    DecodeError de;
    const Message* msg = verify_payload(payload, kMaxFrame, de);
    if (!msg) {
      fail("bad frame from the supervisor: " + de.message);
    } else if (const HostReply* hr = msg->body_as_HostReply()) {
      if (msg->request_id() != eval_id_ || !pending_.contains(hr->call_id())) {
        log("ignored a HostReply for call " + std::to_string(hr->call_id()) + " of request " +
            std::to_string(msg->request_id()) + ": not in flight");
        continue;
      }
      pending_.erase(hr->call_id());
      const bool failed = hr->error() && hr->error()->size() > 0;
      answers_[hr->call_id()] = {!failed, failed ? hr->error()->str() : text(hr->data())};
    } else if (const Error* e = msg->body_as_Error()) {
      fail(protocol_error(e));
    } else {
      fail(std::string("unexpected ") + body_name(msg->body_type()) + " from the supervisor during an evaluation");
    }
  }
  auto it = answers_.find(call_id);
  if (it == answers_.end()) {
    error = broken_;
    return false;
  }
  Answer a = std::move(it->second);
  answers_.erase(it);
  if (a.ok) {
    reply = std::move(a.data);
    return true;
  }
  error = std::move(a.data);
  return false;
}

bool WorkerConnection::host_call(std::string_view data, std::string& reply, std::string& error) {
  std::uint64_t id = start_host_call(data, error);
  return id != 0 && wait_host_call(id, reply, error);
}

}  // namespace corral::proto
