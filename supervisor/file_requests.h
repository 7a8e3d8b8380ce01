// File tools over the wire: a ReadRequest, WriteRequest or ListRequest becomes a call to
// runtime/file_tools.h under the policy a command of the same scope would get with the
// request's mode and workspaces (the scope's narrowing, --deny-read and --protect included),
// and the outcome becomes the final reply frame (the result, or an Error).
// Paths are as commands see them: /tmp is the scope's temp dir.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/policy.h"

#include "runtime/host_path.h"
#include "worker_proto/codec.h"

namespace corral::supervisor {

struct FileContext {
  std::string temp_dir;           // the scope's temp dir (always a root)
  std::uint32_t max_frame = 0;    // a read window must fit in one reply frame
  Policy scope_policy;            // the scope's: mode, workspaces, deny_read, protect apply
  Ceiling ceiling = Ceiling::none;
  std::vector<std::string> hidden_paths;  // the supervisor's socket dir: never readable
  // The peer's credentials: a root supervisor runs the whole request with them (every open,
  // the written file's owner), runtime/host_path.h with_credentials(). Null: our own.
  const Credentials* peer = nullptr;
};

proto::Frame handle_read(std::uint64_t id, const proto::ReadRequest& req, const FileContext& ctx);
proto::Frame handle_write(std::uint64_t id, const proto::WriteRequest& req, const FileContext& ctx);
proto::Frame handle_list(std::uint64_t id, const proto::ListRequest& req, const FileContext& ctx);

}  // namespace corral::supervisor
