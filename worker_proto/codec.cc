#include "worker_proto/codec.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace corral::proto {

Frame make_frame(std::span<const std::uint8_t> payload) {
  const auto n = static_cast<std::uint32_t>(payload.size());
  Frame frame(kHeaderBytes + n);
  frame[0] = static_cast<std::uint8_t>(n);
  frame[1] = static_cast<std::uint8_t>(n >> 8);
  frame[2] = static_cast<std::uint8_t>(n >> 16);
  frame[3] = static_cast<std::uint8_t>(n >> 24);
  std::memcpy(frame.data() + kHeaderBytes, payload.data(), n);
  return frame;
}

Frame finish_frame(flatbuffers::FlatBufferBuilder& fbb, flatbuffers::Offset<Message> root) {
  fbb.Finish(root, MessageIdentifier());
  return make_frame({fbb.GetBufferPointer(), fbb.GetSize()});
}

std::uint32_t read_length(const std::uint8_t* h) {
  return static_cast<std::uint32_t>(h[0]) | static_cast<std::uint32_t>(h[1]) << 8 |
         static_cast<std::uint32_t>(h[2]) << 16 | static_cast<std::uint32_t>(h[3]) << 24;
}

const Message* verify_payload(std::span<const std::uint8_t> payload, std::uint32_t max_frame,
                              DecodeError& error) {
  // Size first: the 2.0.8 Verifier asserts on buffers past FLATBUFFERS_MAX_BUFFER_SIZE.
  if (payload.size() > max_frame) {
    error = {ErrorCode::frame_too_large, "frame of " + std::to_string(payload.size()) +
                                             " bytes is over the " + std::to_string(max_frame) +
                                             "-byte limit"};
    return nullptr;
  }
  // Root offset + identifier, and FlatBuffers' own minimum.
  if (payload.size() < 8) {
    error = {ErrorCode::malformed, "frame of " + std::to_string(payload.size()) +
                                       " bytes is too short to hold a message"};
    return nullptr;
  }
  if (!flatbuffers::BufferHasIdentifier(payload.data(), MessageIdentifier())) {
    error = {ErrorCode::malformed, std::string("wrong file identifier (expected \"") +
                                       MessageIdentifier() + "\")"};
    return nullptr;
  }
  flatbuffers::Verifier verifier(payload.data(), payload.size(), kMaxDepth, kMaxTables);
  if (!VerifyMessageBuffer(verifier)) {
    error = {ErrorCode::malformed, "message failed verification against the schema"};
    return nullptr;
  }
  const Message* msg = GetMessage(payload.data());
  if (msg->body_type() == Body::NONE || msg->body() == nullptr) {
    error = {ErrorCode::malformed, "message has no body"};
    return nullptr;
  }
  return msg;
}

bool FrameSplitter::feed(std::span<const std::uint8_t> bytes, DecodeError& error) {
  // Compact lazily so a long stream of small frames stays O(n).
  if (consumed_ > 0 && consumed_ * 2 >= buffer_.size()) {
    buffer_.erase(buffer_.begin(), buffer_.begin() + static_cast<std::ptrdiff_t>(consumed_));
    consumed_ = 0;
  }
  buffer_.insert(buffer_.end(), bytes.begin(), bytes.end());
  // Check every complete header now, before its payload is buffered.
  std::size_t pos = consumed_;
  while (buffer_.size() - pos >= kHeaderBytes) {
    std::uint32_t n = read_length(buffer_.data() + pos);
    if (n > max_frame_) {
      error = {ErrorCode::frame_too_large, "frame of " + std::to_string(n) +
                                               " bytes is over the " + std::to_string(max_frame_) +
                                               "-byte limit"};
      return false;
    }
    if (buffer_.size() - pos - kHeaderBytes < n) break;
    pos += kHeaderBytes + n;
  }
  return true;
}

bool FrameSplitter::next(std::vector<std::uint8_t>& payload) {
  if (buffer_.size() - consumed_ < kHeaderBytes) return false;
  std::uint32_t n = read_length(buffer_.data() + consumed_);
  if (n > max_frame_ || buffer_.size() - consumed_ - kHeaderBytes < n) return false;
  auto begin = buffer_.begin() + static_cast<std::ptrdiff_t>(consumed_ + kHeaderBytes);
  payload.assign(begin, begin + n);
  consumed_ += kHeaderBytes + n;
  return true;
}

const char* body_name(Body type) {
  const char* name = EnumNameBody(type);
  return (name && *name) ? name : "unknown";
}

namespace {

// How many of [p, p + n) arrived: n, fewer at the end of the stream, or -1 (errno set; ETIME
// for a timeout).
ssize_t read_exact(int fd, std::uint8_t* p, std::size_t n, int timeout_ms) {
  std::size_t got = 0;
  while (got < n) {
    if (timeout_ms >= 0) {
      pollfd pfd{fd, POLLIN, 0};
      const int r = ::poll(&pfd, 1, timeout_ms);
      if (r < 0 && errno == EINTR) continue;
      if (r == 0) {
        errno = ETIME;
        return -1;
      }
    }
    const ssize_t r = ::read(fd, p + got, n - got);
    if (r > 0) got += static_cast<std::size_t>(r);
    else if (r == 0) break;
    else if (errno != EINTR) return -1;
  }
  return static_cast<ssize_t>(got);
}

}  // namespace

FrameIn read_frame(int fd, std::uint32_t max_frame, int timeout_ms) {
  FrameIn in;
  auto failed = [&in]() -> FrameIn& {
    in.end = errno == ETIME ? FrameIn::End::timeout : FrameIn::End::io;
    in.err = errno;
    return in;
  };
  std::uint8_t header[kHeaderBytes];
  const ssize_t got = read_exact(fd, header, kHeaderBytes, timeout_ms);
  if (got < 0) return failed();
  if (got == 0) {
    in.end = FrameIn::End::eof;
    return in;
  }
  if (static_cast<std::size_t>(got) < kHeaderBytes) {
    in.end = FrameIn::End::truncated;
    in.in_header = true;
    return in;
  }
  in.length = read_length(header);
  if (in.length > max_frame) {
    in.end = FrameIn::End::oversized;
    return in;
  }
  in.payload.resize(in.length);
  const ssize_t body = read_exact(fd, in.payload.data(), in.length, timeout_ms);
  if (body < 0) return failed();
  if (static_cast<std::size_t>(body) < in.length) {
    in.end = FrameIn::End::truncated;
    in.payload.clear();
  }
  return in;
}

int write_all(int fd, const void* data, std::size_t n) {
  const auto* p = static_cast<const std::uint8_t*>(data);
  while (n > 0) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == ENOTSOCK) w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return 0;
}

}  // namespace corral::proto
