// The one asynchronous frame reader: a client's Transport (supervisor/transport.h) and a
// worker's channel (supervisor/worker.h) both read their peer's frames through it. The length
// is checked against the limit before anything is allocated, the buffer grows only with the
// bytes that arrive (a peer that sends a header and stalls holds no more than it sent), and
// the payload is verified (proto::verify_payload) before anyone sees it.
#pragma once

#include <asio/awaitable.hpp>
#include <asio/local/stream_protocol.hpp>
#include <cstdint>
#include <vector>

#include "worker_proto/codec.h"

namespace corral::supervisor {

struct FrameRead {
  enum class End {
    frame,      // `msg` points into the payload buffer
    closed,     // the stream ended or a read failed (inside a frame too)
    oversized,  // the header said `length` bytes, over the limit: the stream cannot go on
    malformed,  // the payload failed verification (`error`); the next frame may still be read
  };
  End end = End::closed;
  // closed: the peer closed its end with frames of ours still unread in it (ECONNRESET on a
  // Unix socket), so what we wrote last may never have reached the client.
  bool unread = false;
  const proto::Message* msg = nullptr;
  std::uint32_t length = 0;
  proto::DecodeError error;
};

// Reads one frame into `payload` (reused between calls; shrunk after an unusually large one).
asio::awaitable<FrameRead> read_frame(asio::local::stream_protocol::socket& socket, std::uint32_t max_frame,
                                      std::vector<std::uint8_t>& payload);

}  // namespace corral::supervisor
