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

// One line for the audit log: the command as typed (argv JSON array or shell string).
std::string describe_command(const ExecSpec& spec);
// Exactly what an authorized launch will run, as JSON for the client to judge.
std::string authorization_description(const ExecSpec& spec, const std::string& scope);
// The isolation asked for, for the audit log: mode, network, roots, caps.
std::string describe_policy(const ExecSpec& spec);

}  // namespace corral::supervisor
