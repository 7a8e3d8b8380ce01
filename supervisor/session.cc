#include "supervisor/session.h"

#include "supervisor/exec_request.h"
#include "worker_proto/messages.h"

namespace corral::supervisor {

using proto::ErrorCode;

void Session::send_error(std::uint64_t id, ErrorCode code, std::string_view message) {
  queue(proto::make_error(id, code, message));
}

std::shared_ptr<Scope> Session::scope_for(std::uint64_t id, const flatbuffers::String* name,
                                          const std::shared_ptr<Scope>& fallback) {
  if (!name || name->size() == 0) return fallback;
  auto found = ctx().scopes->find(name->str(), peer().uid);
  if (!found.ok()) {
    const int err = found.status().err();
    send_error(id, err == EPERM ? ErrorCode::permission_denied : err == ENOENT ? ErrorCode::not_found : ErrorCode::invalid_request,
               found.status().message());
    return nullptr;
  }
  return *found;
}

std::optional<ExecSpec> Session::prepare_spec(std::uint64_t id, const proto::ExecRequest& req, Scope& scope,
                                              const char* cgroup_prefix) {
  Context& c = ctx();
  const Peer& p = peer();
  const Credentials creds = p.credentials();
  auto spec = to_spec(req, c.options, scope.defaults, scope.ceiling, &creds);
  if (!spec.ok()) {
    send_error(id, spec.status().code() == StatusCode::refused ? ErrorCode::refused_by_policy : ErrorCode::invalid_request,
               spec.status().message());
    return std::nullopt;
  }
  if (Status st = c.host->check(*spec->policy); !st.ok()) {
    send_error(id, ErrorCode::unsupported, st.message());
    return std::nullopt;
  }
  // A peer opens through --allow-socket only what it could connect to itself (the mode bits
  // for its uid and primary gid; root may name any socket).
  for (const auto& a : spec->policy->allow_sockets) {
    const bool may = p.uid == 0 || (a.uid == p.uid ? (a.mode & 0200) : a.gid == p.gid ? (a.mode & 020) : (a.mode & 02));
    if (!may) {
      send_error(id, ErrorCode::invalid_request,
                 "--allow-socket " + a.path + ": uid " + std::to_string(p.uid) + " may not connect to it");
      return std::nullopt;
    }
  }
  spec->host = c.host.get();
  spec->prepared = scope.prepared;
  spec->offload = c.launcher->submitter();
  spec->teardown = c.teardown->submitter();
  spec->cgroup_name = cgroup_prefix + std::to_string(++c.launches);
  // The scope's temp dir and network namespace, made by its first command: on the launcher
  // pool, with the launch (a mount and a namespace are no work for the loop).
  // Weakly: a spec outlives its launch (a background command's record stays to be polled), and
  // a scope's temp dir goes when its last holder lets go. Whoever starts the command holds the
  // scope until it has ended, so the launch never drops the last reference off the loop.
  spec->before_launch = [weak = scope.weak_from_this()](ExecSpec& s) -> Status {
    auto held = weak.lock();
    if (!held) return Status::error("temp dir", ENOENT, "the scope is gone");
    auto temp = held->temp_dir();
    if (!temp.ok())
      return Status::error("temp dir", temp.status().err(), "cannot create the scope's temp dir: " + temp.status().message());
    s.temp_dir = *temp;
    if (s.policy->network == Network::denied) s.netns_fd = held->network_namespace();
    return {};
  };
  return std::move(spec).value();
}

}  // namespace corral::supervisor
