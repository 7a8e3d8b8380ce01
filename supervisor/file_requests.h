// File tools over the wire: a ReadRequest, WriteRequest or ListRequest becomes a call to
// runtime/file_tools.h on the roots the request names (its workspace roots, then the scope's
// temp dir), and the outcome becomes the final reply frame (the result, or an Error).
// Paths are as commands see them: /tmp is the scope's temp dir.
#pragma once

#include <cstdint>
#include <string>

#include "worker_proto/codec.h"

namespace corral::supervisor {

struct FileContext {
  std::string temp_dir;           // the scope's temp dir (always a root)
  std::uint32_t max_frame = 0;    // a read window must fit in one reply frame
};

proto::Frame handle_read(std::uint64_t id, const proto::ReadRequest& req, const FileContext& ctx);
proto::Frame handle_write(std::uint64_t id, const proto::WriteRequest& req, const FileContext& ctx);
proto::Frame handle_list(std::uint64_t id, const proto::ListRequest& req, const FileContext& ctx);

}  // namespace corral::supervisor
