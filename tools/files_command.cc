// corral read, corral write, corral ls: the confined file tools, from a shell.
#include <iostream>

#include "runtime/file_tools.h"
#include "runtime/units.h"
#include "tools/commands.h"
#include "supervisor/json_text.h"
#include "worker_proto/client.h"

namespace corral::cli {
namespace {

bool common(const FileOptions& o, proto::FileArgs& a, std::string& error) {
  if (o.path.empty()) return error = "no PATH given", false;
  // Without --scope, /tmp is this command's own scope's temp dir, gone when it ends: a write
  // there would be lost, and a read or listing would show an empty directory.
  if (o.scope.empty() && (o.path == "/tmp" || o.path.rfind("/tmp/", 0) == 0))
    return error = o.path + ": /tmp is a scope's temp dir; name the scope with --scope ID (from `corral scope "
                            "create`), else it is this command's own, gone when it ends",
           false;
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
  auto data = read_input("-", files::kDefaultWrite, "write", error);
  if (!data) return complain(kFailed, error);
  a.data = std::move(*data);
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
