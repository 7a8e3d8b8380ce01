// ScopeRequests: the handler of scope requests (supervisor/requests.h).
#include "runtime/units.h"
#include "supervisor/background.h"
#include "supervisor/exec_request.h"
#include "supervisor/requests.h"
#include "worker_proto/messages.h"

namespace corral::supervisor {

using proto::ErrorCode;

namespace {

proto::Frame ack(std::uint64_t id) {
  flatbuffers::FlatBufferBuilder fbb(64);
  return proto::finish_frame(fbb, proto::CreateMessage(fbb, id, proto::Body::Ack, proto::CreateAck(fbb).Union()));
}

}  // namespace

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
  auto scope = s_.ctx().scopes->create(s_.peer().uid, parent, req.detach(), std::move(defaults).value());
  if (!req.detach()) owned_.push_back(scope);
  auto temp = scope->temp_dir();
  if (!temp.ok()) {
    s_.ctx().scopes->close(scope);
    s_.send_error(id, ErrorCode::internal, "cannot create the scope's temp dir: " + temp.status().message());
    return;
  }
  flatbuffers::FlatBufferBuilder fbb(128);
  auto body = proto::CreateScopeCreated(fbb, fbb.CreateString(scope->id()), fbb.CreateString(*temp));
  s_.queue(proto::finish_frame(fbb, proto::CreateMessage(fbb, id, proto::Body::ScopeCreated, body.Union())));
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
  s_.queue(ack(id));
}

void ScopeRequests::on_list(const proto::Message& msg) {
  flatbuffers::FlatBufferBuilder fbb(1024);
  std::vector<flatbuffers::Offset<proto::ScopeInfo>> infos;
  for (const auto& s : s_.ctx().scopes->list(s_.peer().uid)) {
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
  s_.queue(proto::finish_frame(fbb, proto::CreateMessage(fbb, msg.request_id(), proto::Body::ScopeList, body.Union())));
}

void ScopeRequests::close() {
  for (auto& weak : owned_)
    if (auto s = weak.lock()) s_.ctx().scopes->close(s);
}

}  // namespace corral::supervisor
