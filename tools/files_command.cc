// corral read, corral write, corral ls: the confined file tools, from a shell.
#include <iostream>
#include <sstream>

#include "runtime/units.h"
#include "tools/commands.h"
#include "supervisor/json_text.h"
#include "worker_proto/client.h"

namespace corral::cli {
namespace {

bool common(const FileOptions& o, proto::FileArgs& a, std::string& error) {
  if (o.path.empty()) return error = "no PATH given", false;
  a.path = o.path;
  a.scope = o.scope;
  for (const auto& w : o.workspaces) a.workspaces.push_back(absolute(w));
  a.mode = wire_mode(o.mode);
  return true;
}

}  // namespace

int run_read(const FileOptions& o) {
  proto::FileArgs a;
  std::string error;
  if (!common(o, a, error)) return complain(kUsage, error);
  a.binary = o.binary;
  a.offset = o.offset.value_or(0);
  a.max_bytes = o.max_bytes.value_or(0);
  proto::Received reply;
  if (int rc = request(o.socket, proto::make_read(1, a), reply); rc != kOk) return rc;
  const proto::ReadResult* r = reply.msg->body_as_ReadResult();
  if (!r) return complain(kFailed, "unexpected reply to a read");
  if (r->data()) write_all(1, {reinterpret_cast<const char*>(r->data()->data()), r->data()->size()});
  if (r->truncated())
    std::cerr << "corral: showed bytes " << r->offset() << ".." << r->offset() + (r->data() ? r->data()->size() : 0)
              << " of " << r->file_size() << "; continue with --offset\n";
  return kOk;
}

int run_write(const FileOptions& o) {
  proto::FileArgs a;
  std::string error;
  if (!common(o, a, error)) return complain(kUsage, error);
  a.binary = o.binary;
  std::ostringstream ss;
  ss << std::cin.rdbuf();
  a.data = ss.str();
  proto::Received reply;
  if (int rc = request(o.socket, proto::make_write(1, a), reply); rc != kOk) return rc;
  if (!reply.msg->body_as_WriteResult()) return complain(kFailed, "unexpected reply to a write");
  return kOk;
}

int run_ls(const FileOptions& o) {
  proto::FileArgs a;
  std::string error;
  if (!common(o, a, error)) return complain(kUsage, error);
  a.max_entries = o.max_entries.value_or(0);
  proto::Received reply;
  if (int rc = request(o.socket, proto::make_list(1, a), reply); rc != kOk) return rc;
  const proto::ListResult* r = reply.msg->body_as_ListResult();
  if (!r) return complain(kFailed, "unexpected reply to a listing");
  if (o.json) {
    Json entries = Json::array();
    if (r->entries())
      for (const auto* e : *r->entries())
        entries.push_back({{"name", proto::str(e->name())},
                           {"type", proto::str(e->type())},
                           {"size", e->size()},
                           {"mtime_ms", static_cast<std::int64_t>(e->mtime_ms())}});
    std::cout << json_text({{"entries", std::move(entries)}, {"truncated", r->truncated()}}) << "\n";
    return kOk;
  }
  if (r->entries())
    for (const auto* e : *r->entries()) {
      std::string name = proto::str(e->name());
      if (proto::str(e->type()) == "dir") name += "/";
      std::cout << name << "\n";
    }
  if (r->truncated()) std::cerr << "corral: listing truncated\n";
  return kOk;
}

}  // namespace corral::cli
