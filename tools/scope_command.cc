// corral scope create|close|list, corral poll, corral stop.
#include <iostream>

#include "tools/commands.h"
#include "supervisor/json_text.h"
#include "worker_proto/client.h"

namespace corral::cli {

int run_scope_create(const ScopeOptions& o) {
  proto::ScopeArgs a;
  a.parent = o.parent;
  a.detach = true;  // the CLI's connection lasts one command: its scopes must outlive it
  a.mode = wire_mode(o.mode);
  a.network = wire_network(o.net);
  for (const auto& w : o.workspaces) a.workspaces.push_back(absolute(w));
  for (const auto& d : o.deny_read) a.deny_read.push_back(absolute(d));
  for (const auto& p : o.protect) a.protect.push_back(absolute(p));
  a.memory_bytes = o.memory;
  a.pids = o.pids;
  a.cpu_time_ms = o.cpu_time_ms.value_or(0);
  a.cpus = o.cpus.value_or(0);
  a.max_file_size = o.max_file_size.value_or(0);
  proto::Received reply;
  if (int rc = request(o.socket, proto::make_scope_create(1, a), reply); rc != kOk) return rc;
  const proto::ScopeCreated* c = reply.msg->body_as_ScopeCreated();
  if (!c) return complain(kFailed, "unexpected reply to scope create");
  std::cerr << "temp dir: " << proto::str(c->temp_dir()) << "\n";
  std::cout << proto::str(c->id()) << std::endl;  // alone on the last line
  return kOk;
}

int run_scope_close(const ScopeOptions& o) {
  proto::Received reply;
  return request(o.socket, proto::make_scope_close(1, o.id), reply);
}

int run_scope_list(const ScopeOptions& o) {
  proto::Received reply;
  if (int rc = request(o.socket, proto::make_scope_list(1), reply); rc != kOk) return rc;
  const proto::ScopeList* list = reply.msg->body_as_ScopeList();
  if (!list) return complain(kFailed, "unexpected reply to scope list");
  Json j = Json::array();
  // A cap the scope does not set is null; 0 is "unlimited", said explicitly.
  auto optional = [](flatbuffers::Optional<std::uint64_t> v) { return v ? Json(*v) : Json(nullptr); };
  if (list->scopes()) {
    for (const auto* s : *list->scopes()) {
      if (!o.json) {
        std::cout << proto::str(s->id()) << "\tparent=" << (s->parent() && s->parent()->size() ? s->parent()->str() : "-")
                  << "\tmode=" << proto::EnumNameMode(s->mode()) << "\tnet=" << proto::EnumNameNetwork(s->network())
                  << (s->ceiling() ? "\tceiling" : "")
                  << "\tbackground=" << s->background() << "\tworkers=" << s->workers() << "\ttemp_dir="
                  << proto::str(s->temp_dir()) << "\n";
        continue;
      }
      Json workspaces = Json::array();
      if (s->workspaces())
        for (const auto* w : *s->workspaces()) workspaces.push_back(w->str());
      auto strings = [](const flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>>* v) {
        Json values = Json::array();
        if (v)
          for (const auto* p : *v) values.push_back(p->str());
        return values;
      };
      j.push_back({{"id", proto::str(s->id())},
                   {"parent", proto::str(s->parent())},
                   {"owner_uid", s->owner_uid()},
                   {"detached", s->detached()},
                   {"mode", proto::EnumNameMode(s->mode())},
                   {"network", proto::EnumNameNetwork(s->network())},
                   {"workspaces", std::move(workspaces)},
                   {"deny_read", strings(s->deny_read())},
                   {"protect", strings(s->protect())},
                   {"memory_bytes", optional(s->memory_bytes())},
                   {"pids", optional(s->pids())},
                   {"cpu_time_ms", s->cpu_time_ms()},
                   {"cpus", s->cpus()},
                   {"max_file_size", s->max_file_size()},
                   {"ceiling", s->ceiling()},
                   {"temp_dir", proto::str(s->temp_dir())},
                   {"background", s->background()},
                   {"workers", s->workers()}});
    }
  }
  if (o.json) std::cout << json_text(j) << "\n";
  return kOk;
}

int run_poll(const BackgroundOptions& o) {
  proto::Received reply;
  if (int rc = request(o.socket, proto::make_poll(1, o.id), reply); rc != kOk) return rc;
  const proto::PollReply* p = reply.msg->body_as_PollReply();
  if (!p) return complain(kFailed, "unexpected reply to poll");
  auto bytes = [](const flatbuffers::Vector<std::uint8_t>* v) {
    return v ? std::string_view(reinterpret_cast<const char*>(v->data()), v->size()) : std::string_view();
  };
  if (o.json) {
    Json j = Json::object();
    j["id"] = proto::str(p->id());
    j["state"] = proto::str(p->state());
    j["stdout"] = std::string(bytes(p->stdout()));
    j["stderr"] = std::string(bytes(p->stderr()));
    j["exit_code"] = p->result() && p->result()->exit_code() ? Json(*p->result()->exit_code()) : Json(nullptr);
    j["status"] = p->result() ? Json(proto::EnumNameExitStatus(p->result()->status())) : Json(nullptr);
    std::cout << json_text(j) << "\n";
    return kOk;
  }
  write_all(1, bytes(p->stdout()));
  write_all(2, bytes(p->stderr()));
  std::string state = proto::str(p->state());
  if (p->result() && p->result()->exit_code()) {
    state += ' ';  // not `" " + std::to_string(...)`: GCC 12 at -O3 warns (-Wrestrict) on that
    state += std::to_string(*p->result()->exit_code());
  }
  std::cerr << "corral: " << proto::str(p->id()) << " " << state << "\n";
  return kOk;
}

int run_stop(const BackgroundOptions& o) {
  proto::Received reply;
  return request(o.socket, proto::make_background_stop(1, o.id, o.force), reply);
}

}  // namespace corral::cli
