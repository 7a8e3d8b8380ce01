// The frame codec: how one Message travels on a byte stream.
//
// A frame is a u32 little-endian payload length followed by the payload, one FlatBuffers
// `Message` with file identifier "CRL1". Inbound payloads are checked in exactly one place,
// verify_payload(): size guard before anything else, identifier, then the generated
// Verifier with depth and table limits. Nothing reads a payload that has not passed it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "corral_generated.h"

namespace corral::proto {

inline constexpr std::uint32_t kProtocolVersion = 1;
inline constexpr std::size_t kHeaderBytes = 4;
// Default and bounds for the frame limit (`serve --max-frame`): 16 MiB fits a 1 MiB worker
// request and 64 KiB output chunks with room; the floor keeps every reply representable.
inline constexpr std::uint32_t kDefaultMaxFrame = 16u << 20;
inline constexpr std::uint32_t kMinMaxFrame = 64u << 10;
inline constexpr std::uint32_t kMaxMaxFrame = 1u << 30;
// Verifier limits: our schema nests 3 deep and a message has a few hundred tables at most.
inline constexpr unsigned kMaxDepth = 16;
inline constexpr unsigned kMaxTables = 100'000;

using Frame = std::vector<std::uint8_t>;  // header + payload, ready to write

// Header + a copy of `payload` (an already finished Message buffer).
Frame make_frame(std::span<const std::uint8_t> payload);

// Finishes `fbb` with `root` and the file identifier, and returns header + payload.
Frame finish_frame(flatbuffers::FlatBufferBuilder& fbb, flatbuffers::Offset<Message> root);

// Decodes a frame header (4 bytes, little-endian).
std::uint32_t read_length(const std::uint8_t* header);

// Why a frame was refused, for the Error frame sent back.
struct DecodeError {
  ErrorCode code = ErrorCode::malformed;
  std::string message;
};

// The one gate for inbound bytes. Returns the verified message (pointing into `payload`,
// which must outlive it), or nullptr with `error` filled. Never reads unverified bytes and
// never allocates proportional to the input.
const Message* verify_payload(std::span<const std::uint8_t> payload, std::uint32_t max_frame,
                              DecodeError& error);

// Splits a byte stream into frames as they complete; used by the fuzzer and by tests to
// check a whole stream. Frames over `max_frame` stop the stream with frame_too_large.
class FrameSplitter {
 public:
  explicit FrameSplitter(std::uint32_t max_frame) : max_frame_(max_frame) {}
  // Appends bytes. Returns false once the stream is unusable (oversized frame).
  bool feed(std::span<const std::uint8_t> bytes, DecodeError& error);
  // Moves the next complete payload into `payload`; false if none is complete yet.
  bool next(std::vector<std::uint8_t>& payload);

 private:
  std::uint32_t max_frame_;
  std::vector<std::uint8_t> buffer_;
  std::size_t consumed_ = 0;
};

// The one blocking frame reader (the client library and the worker SDK): the next frame's
// payload from `fd`, its length checked against `max_frame` before anything is allocated. With
// `timeout_ms` >= 0 each wait for bytes is bounded by it. Not verified: that is
// verify_payload()'s job.
struct FrameIn {
  enum class End {
    frame,      // `payload` holds one
    eof,        // the stream ended cleanly, before a frame began
    truncated,  // it ended inside a frame (`in_header`: inside its length)
    timeout,    // nothing more came within timeout_ms
    oversized,  // the header said `length` bytes, over max_frame
    io,         // a read failed: `err`
  };
  End end = End::frame;
  std::vector<std::uint8_t> payload;
  bool in_header = false;
  std::uint32_t length = 0;
  int err = 0;
};
FrameIn read_frame(int fd, std::uint32_t max_frame, int timeout_ms = -1);
// Its writing twin: all of [data, data + n) to `fd`, a socket (MSG_NOSIGNAL: a peer that is
// gone is an error, not a SIGPIPE) or a pipe. 0, or the errno of the write that failed.
int write_all(int fd, const void* data, std::size_t n);

// Short names of union members ("ExecRequest"), for errors and logs.
const char* body_name(Body type);

}  // namespace corral::proto
