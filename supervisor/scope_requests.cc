// ScopeRequests: the handler of scope requests (supervisor/requests.h).
#include <asio/post.hpp>

#include "runtime/units.h"
#include "supervisor/background.h"
#include "supervisor/exec_request.h"
#include "supervisor/requests.h"
#include "worker_proto/messages.h"

namespace corral::supervisor {

using proto::ErrorCode;


void ScopeRequests::on_create(const proto::Message& msg) {
  const std::uint64_t id = msg.request_id();
  const proto::ScopeCreate& req = *msg.body_as_ScopeCreate();
  std::shared_ptr<Scope> parent;
  if (req.parent() && req.parent()->size() > 0) {
    parent = s_.scope_for(id, req.parent(), nullptr);
    if (!parent) return;
  }
  // The child's own policy, narrowed against its parent's (a top-level scope has no ceiling
  // above it: it starts from the defaults).
  PolicyRequest asked;
  if (auto m = req.mode(); m.has_value()) {
    auto mode = from_wire(*m);
    if (!mode.ok()) return s_.send_error(id, ErrorCode::invalid_request, mode.status().message());
    asked.mode = *mode;
  }
  if (auto n = req.network(); n.has_value()) {
    auto net = from_wire(*n);
    if (!net.ok()) return s_.send_error(id, ErrorCode::invalid_request, net.status().message());
    asked.network = *net;
  }
  Policy own;
  own.mode = asked.mode.value_or(Mode::workspace_write);
  own.workspaces = strings(req.workspaces());
  own.deny_read = strings(req.deny_read());
  own.protect = strings(req.protect());
  if (req.memory_bytes()) own.caps.memory_bytes = *req.memory_bytes();
  if (req.pids()) own.caps.pids = *req.pids();
  if (req.cpu_time_ms()) own.caps.cpu_time = std::chrono::milliseconds(req.cpu_time_ms());
  if (req.cpus() != 0) own.caps.cpus = req.cpus();
  if (req.max_file_size()) own.caps.max_file_size = req.max_file_size();
  const Credentials creds = s_.peer().credentials();
  if (Status st = normalize(own, &creds); !st.ok()) return s_.send_error(id, ErrorCode::invalid_request, st.message());
  if (Status st = refuse_hidden(own, s_.ctx().options.hidden_paths); !st.ok())
    return s_.send_error(id, ErrorCode::invalid_request, st.message());
  asked.workspaces = std::move(own.workspaces);
  asked.deny_read = std::move(own.deny_read);
  asked.protect = std::move(own.protect);
  asked.caps = own.caps;
  auto defaults = parent ? narrow(parent->defaults, parent->ceiling, asked) : narrow(Policy{}, Ceiling::none, asked);
  if (!defaults.ok()) {
    s_.send_error(id, defaults.status().code() == StatusCode::refused ? ErrorCode::refused_by_policy : ErrorCode::invalid_request,
               defaults.status().message());
    return;
  }
  if (Status st = s_.ctx().host->check(*defaults); !st.ok()) return s_.send_error(id, ErrorCode::unsupported, st.message());
  auto created = s_.ctx().scopes->create(s_.peer().uid, parent, req.detach(), std::move(defaults).value());
  if (!created.ok()) return s_.send_error(id, ErrorCode::too_many_requests, created.status().message());
  std::shared_ptr<Scope> scope = std::move(created).value();
  if (!req.detach()) owned_.push_back(scope);
  // Its temp dir (a tmpfs mount) is made off the loop; the reply names it.
  // The job and its hand-back hold the scope weakly: neither may be what keeps it alive past the
  // pools' shutdown (supervisor/context.h).
  Context* ctx = &s_.ctx();
  std::weak_ptr<Scope> weak_scope = scope;
  ctx->blocking->submit([this, ctx, id, weak_scope, weak = s_.weak(), executor = s_.io().get_executor()] {
    auto held = weak_scope.lock();
    auto temp = std::make_shared<StatusOr<std::string>>(held ? held->temp_dir()
                                                             : StatusOr<std::string>(Status::error("scope", ENOENT, "closed")));
    held.reset();
    asio::post(executor, [this, ctx, id, weak_scope, weak, temp] {
      auto made = weak_scope.lock();
      if (made && !temp->ok()) ctx->scopes->close(made);
      auto keep = weak.lock();  // held to the end: a reply may end the session
      if (!keep) return;
      if (!made) return s_.send_error(id, ErrorCode::not_found, "the scope was closed while it was being made");
      if (!temp->ok())
        return s_.send_error(id, ErrorCode::internal, "cannot create the scope's temp dir: " + temp->status().message());
      s_.queue(proto::make_scope_created(id, made->id(), **temp));
    });
  });
}

void ScopeRequests::on_close(const proto::Message& msg) {
  const std::uint64_t id = msg.request_id();
  auto scope = s_.scope_for(id, msg.body_as_ScopeClose()->id(), nullptr);
  if (!scope) {
    if (!msg.body_as_ScopeClose()->id() || msg.body_as_ScopeClose()->id()->size() == 0)
      s_.send_error(id, ErrorCode::invalid_request, "ScopeClose needs the scope's id");
    return;
  }
  s_.ctx().scopes->close(scope);
  s_.queue(proto::make_ack(id));
}

void ScopeRequests::on_list(const proto::Message& msg) {
  std::vector<proto::ScopeListEntry> entries;
  for (const auto& s : s_.ctx().scopes->list(s_.peer().uid)) {
    auto parent = s->parent.lock();
    const Policy& p = s->defaults;
    proto::ScopeListEntry e;
    e.id = s->id();
    e.parent = parent ? parent->id() : "";
    e.owner_uid = s->owner();
    e.detached = s->detached;
    e.mode = to_wire(p.mode);
    e.network = to_wire(p.network);
    e.workspaces = p.workspaces;
    e.deny_read = p.deny_read;
    e.protect = p.protect;
    e.temp_dir = s->temp_dir_if_any();
    e.background = static_cast<std::uint32_t>(s->background_count);
    e.workers = static_cast<std::uint32_t>(s->worker_count);
    e.memory_bytes = p.caps.memory_bytes;
    e.pids = p.caps.pids;
    e.cpu_time_ms = p.caps.cpu_time ? static_cast<std::uint64_t>(p.caps.cpu_time->count()) : 0;
    e.cpus = p.caps.cpus.value_or(0);
    e.max_file_size = p.caps.max_file_size.value_or(0);
    e.ceiling = s->ceiling == Ceiling::bounded;
    entries.push_back(std::move(e));
  }
  s_.queue(proto::make_scope_list_reply(msg.request_id(), entries));
}

void ScopeRequests::close() {
  for (auto& weak : owned_)
    if (auto s = weak.lock()) s_.ctx().scopes->close(s);
}

}  // namespace corral::supervisor
