// Translation between the wire and the engine for one-shot execute: an ExecRequest becomes
// a runtime ExecSpec (defaults filled, limits checked), a runtime Result becomes the final
// ExecResult frame.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/execution.h"
#include "runtime/status.h"
#include "supervisor/server.h"
#include "worker_proto/codec.h"

namespace corral::supervisor {

// Fills defaults (0 = default) and refuses what the server's limits do not allow.
// `scope_defaults` supplies the workspaces when the request names none, and the mode and
// network when the request leaves them at their defaults.
StatusOr<ExecSpec> to_spec(const proto::ExecRequest& req, const ServerOptions& options, const Policy& scope_defaults);

proto::Frame make_exec_result(std::uint64_t request_id, const Result& result);
flatbuffers::Offset<proto::ExecResult> build_exec_result(flatbuffers::FlatBufferBuilder& fbb, const Result& result);

// Exactly what an authorized launch will run, as one line of JSON for the client to judge:
// sh or argv, cwd, env (names only), mode, network, workspaces, deny_read, protect, binds, caps,
// timeout_ms, max_output_bytes, scope.
std::string authorization_description(const ExecSpec& spec, const std::string& scope);
// The audit log's record of one launch, as one line of JSON: who asked (peer_uid, peer_pid,
// request), what ran (as in the description) and how it ended (status, exit_code, signal,
// wall_ms, output_bytes, truncated, and setup_step/setup_errno for a setup error).
std::string launch_record(uid_t peer_uid, pid_t peer_pid, std::uint64_t request_id, const ExecSpec& spec,
                          const Result& result);

}  // namespace corral::supervisor
