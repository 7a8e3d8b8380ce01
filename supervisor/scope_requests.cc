// Connection handlers for scopes and background commands.
#include "runtime/units.h"
#include "supervisor/background.h"
#include "supervisor/connection.h"
#include "supervisor/exec_request.h"
#include "worker_proto/messages.h"

namespace corral::supervisor {

using proto::ErrorCode;

namespace {

proto::Frame ack(std::uint64_t id) {
  flatbuffers::FlatBufferBuilder fbb(64);
  return proto::finish_frame(fbb, proto::CreateMessage(fbb, id, proto::Body::Ack, proto::CreateAck(fbb).Union()));
}

}  // namespace

void Connection::on_scope_create(const proto::Message& msg) {
  const std::uint64_t id = msg.request_id();
  const proto::ScopeCreate& req = *msg.body_as_ScopeCreate();
  std::shared_ptr<Scope> parent;
  if (req.parent() && req.parent()->size() > 0) {
    parent = scope_for(id, req.parent(), nullptr);
    if (!parent) return;
  }
  // The child's own policy, narrowed against its parent's (a top-level scope has no ceiling
  // above it: it starts from the defaults).
  PolicyRequest asked;
  if (auto m = req.mode(); m.has_value()) {
    auto mode = from_wire(*m);
    if (!mode.ok()) return send_error(id, ErrorCode::invalid_request, mode.status().message());
    asked.mode = *mode;
  }
  if (auto n = req.network(); n.has_value()) {
    auto net = from_wire(*n);
    if (!net.ok()) return send_error(id, ErrorCode::invalid_request, net.status().message());
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
  const Credentials creds = peer_.credentials();
  if (Status st = normalize(own, &creds); !st.ok()) return send_error(id, ErrorCode::invalid_request, st.message());
  asked.workspaces = std::move(own.workspaces);
  asked.deny_read = std::move(own.deny_read);
  asked.protect = std::move(own.protect);
  asked.caps = own.caps;
  auto defaults = parent ? narrow(parent->defaults, parent->ceiling, asked) : narrow(Policy{}, Ceiling::none, asked);
  if (!defaults.ok()) {
    send_error(id, defaults.status().code() == StatusCode::refused ? ErrorCode::refused_by_policy : ErrorCode::invalid_request,
               defaults.status().message());
    return;
  }
  if (Status st = ctx_.host->check(*defaults); !st.ok()) return send_error(id, ErrorCode::unsupported, st.message());
  auto scope = ctx_.scopes->create(peer_.uid, parent, req.detach(), std::move(defaults).value());
  if (!req.detach()) owned_scopes_.push_back(scope);
  auto temp = scope->temp_dir();
  if (!temp.ok()) {
    ctx_.scopes->close(scope);
    send_error(id, ErrorCode::internal, "cannot create the scope's temp dir: " + temp.status().message());
    return;
  }
  flatbuffers::FlatBufferBuilder fbb(128);
  auto body = proto::CreateScopeCreated(fbb, fbb.CreateString(scope->id()), fbb.CreateString(*temp));
  queue(proto::finish_frame(fbb, proto::CreateMessage(fbb, id, proto::Body::ScopeCreated, body.Union())));
}

void Connection::on_scope_close(const proto::Message& msg) {
  const std::uint64_t id = msg.request_id();
  auto scope = scope_for(id, msg.body_as_ScopeClose()->id(), nullptr);
  if (!scope) {
    if (!msg.body_as_ScopeClose()->id() || msg.body_as_ScopeClose()->id()->size() == 0)
      send_error(id, ErrorCode::invalid_request, "ScopeClose needs the scope's id");
    return;
  }
  ctx_.scopes->close(scope);
  queue(ack(id));
}

void Connection::on_scope_list(const proto::Message& msg) {
  flatbuffers::FlatBufferBuilder fbb(1024);
  std::vector<flatbuffers::Offset<proto::ScopeInfo>> infos;
  for (const auto& s : ctx_.scopes->list(peer_.uid)) {
    auto parent = s->parent.lock();
    const Policy& p = s->defaults;
    auto ws = fbb.CreateVectorOfStrings(p.workspaces);
    auto deny = fbb.CreateVectorOfStrings(p.deny_read);
    auto protect = fbb.CreateVectorOfStrings(p.protect);
    auto id_off = fbb.CreateString(s->id());
    auto parent_off = fbb.CreateString(parent ? parent->id() : "");
    auto temp_off = fbb.CreateString(s->temp_dir_if_any());
    proto::ScopeInfoBuilder b(fbb);
    b.add_id(id_off);
    b.add_parent(parent_off);
    b.add_owner_uid(s->owner());
    b.add_detached(s->detached);
    b.add_mode(to_wire(p.mode));
    b.add_network(to_wire(p.network));
    b.add_workspaces(ws);
    b.add_temp_dir(temp_off);
    b.add_background(static_cast<std::uint32_t>(s->background_count));
    b.add_workers(static_cast<std::uint32_t>(s->worker_count));
    b.add_deny_read(deny);
    b.add_protect(protect);
    if (p.caps.memory_bytes) b.add_memory_bytes(*p.caps.memory_bytes);
    if (p.caps.pids) b.add_pids(*p.caps.pids);
    b.add_cpu_time_ms(p.caps.cpu_time ? static_cast<std::uint64_t>(p.caps.cpu_time->count()) : 0);
    b.add_cpus(p.caps.cpus.value_or(0));
    b.add_max_file_size(p.caps.max_file_size.value_or(0));
    b.add_ceiling(s->ceiling == Ceiling::bounded);
    infos.push_back(b.Finish());
  }
  auto body = proto::CreateScopeList(fbb, fbb.CreateVector(infos));
  queue(proto::finish_frame(fbb, proto::CreateMessage(fbb, msg.request_id(), proto::Body::ScopeList, body.Union())));
}

void Connection::on_poll(const proto::Message& msg) {
  queue(ctx_.background->poll(msg.request_id(), proto::str(msg.body_as_Poll()->id()), peer_.uid));
}

void Connection::on_background_stop(const proto::Message& msg) {
  const proto::BackgroundStop& req = *msg.body_as_BackgroundStop();
  queue(ctx_.background->stop(msg.request_id(), proto::str(req.id()), req.force(), peer_.uid));
}

}  // namespace corral::supervisor
