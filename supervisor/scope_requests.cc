// Connection handlers for scopes and background commands.
#include "runtime/units.h"
#include "supervisor/background.h"
#include "supervisor/connection.h"
#include "worker_proto/messages.h"

namespace corral::supervisor {

using proto::ErrorCode;

namespace {

proto::Frame ack(std::uint64_t id) {
  flatbuffers::FlatBufferBuilder fbb(64);
  return proto::finish_frame(fbb, proto::CreateMessage(fbb, id, proto::Body::Ack, proto::CreateAck(fbb).Union()));
}

proto::Mode wire_mode(Mode m) {
  return m == Mode::read_only            ? proto::Mode::read_only
         : m == Mode::danger_full_access ? proto::Mode::danger_full_access
                                         : proto::Mode::workspace_write;
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
  Policy defaults;
  defaults.mode = req.mode() == proto::Mode::read_only            ? Mode::read_only
                  : req.mode() == proto::Mode::danger_full_access ? Mode::danger_full_access
                                                                  : Mode::workspace_write;
  defaults.network = req.network() == proto::Network::allowed ? Network::allowed : Network::denied;
  if (req.workspaces())
    for (const auto* w : *req.workspaces()) defaults.workspaces.push_back(w ? w->str() : std::string());
  if (Status st = normalize(defaults); !st.ok()) {
    send_error(id, ErrorCode::invalid_request, st.message());
    return;
  }
  auto scope = ctx_.scopes->create(peer_.uid, parent, req.detach(), std::move(defaults));
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
    auto ws = fbb.CreateVectorOfStrings(s->defaults.workspaces);
    infos.push_back(proto::CreateScopeInfo(fbb, fbb.CreateString(s->id()), fbb.CreateString(parent ? parent->id() : ""),
                                           s->owner(), s->detached, wire_mode(s->defaults.mode),
                                           s->defaults.network == Network::allowed ? proto::Network::allowed
                                                                                   : proto::Network::denied,
                                           ws, fbb.CreateString(s->temp_dir_if_any()),
                                           static_cast<std::uint32_t>(s->background_count),
                                           static_cast<std::uint32_t>(s->worker_count)));
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
