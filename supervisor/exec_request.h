// Translation between the wire and the engine for one-shot execute: an ExecRequest becomes
// a runtime ExecSpec (defaults filled, limits checked), a runtime Result becomes the final
// ExecResult frame.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/execution.h"
#include "runtime/status.h"
#include "supervisor/server.h"
#include "worker_proto/codec.h"
#include "worker_proto/messages.h"

namespace corral::supervisor {

// The wire's enums, both ways; an unknown wire value is refused by name.
StatusOr<Mode> from_wire(proto::Mode m);
StatusOr<Network> from_wire(proto::Network n);
proto::Mode to_wire(Mode m);
proto::Network to_wire(Network n);
std::vector<std::string> strings(const flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>>* v);

// The effective policy of an ExecRequest run in a scope with `scope_policy`: the request's
// own paths normalized, then narrow() (runtime/policy.h) against the scope.
StatusOr<Policy> request_policy(const proto::ExecRequest& req, const Policy& scope_policy, Ceiling ceiling,
                              const Credentials* peer = nullptr);

// Fills defaults (0 = default) and refuses what the server's limits do not allow. The policy
// is request_policy()'s.
StatusOr<ExecSpec> to_spec(const proto::ExecRequest& req, const ServerOptions& options, const Policy& scope_policy,
                           Ceiling ceiling, const Credentials* peer = nullptr);

// A command's result as the wire reports it (proto::make_exec_result, a PollReply's result).
proto::ExecResultInfo exec_result_info(const Result& result);

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
