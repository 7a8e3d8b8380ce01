#include "supervisor/file_requests.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <asio/post.hpp>
#include <memory>

#include "runtime/file_tools.h"
#include "runtime/host_path.h"
#include "runtime/policy.h"
#include "runtime/units.h"
#include "supervisor/exec_request.h"
#include "supervisor/requests.h"
#include "worker_proto/messages.h"

namespace corral::supervisor {
namespace {

using proto::ErrorCode;
// Room for the reply's own fields around the data.
constexpr std::uint64_t kReplyOverhead = 64 * 1024;

using StringVec = flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>>;

// The policy a command in this scope would get with the request's mode and workspaces
// (narrow() in runtime/policy.h), as file-tool roots: the workspace roots, writable unless
// read-only, then the scope's temp dir, writable in every mode; danger-full-access adds "/",
// writable. The scope's
// --deny-read and the supervisor's hidden paths are unreadable, its --protect read-only.
// Each root is resolved by descriptor walk (runtime/host_path.h) with the calling thread's
// credentials (the peer's: as_peer below); `held` keeps the descriptors alive.
StatusOr<files::Roots> make_roots(const StringVec* workspaces, flatbuffers::Optional<proto::Mode> mode,
                                  const FileContext& ctx, std::vector<HostPath>& held, Mode* effective = nullptr) {
  PolicyRequest asked;
  if (mode.has_value()) {
    auto m = from_wire(*mode);
    if (!m.ok()) return m.status();
    asked.mode = *m;
  }
  Policy own;
  own.mode = asked.mode.value_or(ctx.scope_policy.mode);
  own.workspaces = strings(workspaces);
  if (Status st = normalize(own); !st.ok()) return st;
  // A workspace in one of the supervisor's own directories is refused as a command's would be
  // (naming them, not the --deny-read that also hides them from the file tools).
  if (Status st = refuse_hidden(own, ctx.hidden_paths); !st.ok()) return st;
  asked.workspaces = std::move(own.workspaces);
  auto policy = narrow(ctx.scope_policy, ctx.ceiling, asked);
  if (!policy.ok()) return policy.status();
  files::Roots roots;
  if (effective) *effective = policy->mode;
  const bool writable = policy->mode != Mode::read_only;
  auto add = [&](const std::string& path, const std::string& what, bool w) -> Status {
    auto r = resolve_host_path(path, what);
    if (!r.ok()) return r.status();
    if (!S_ISDIR(r->st.st_mode)) return Status::error("path", ENOTDIR, what + " '" + path + "' is not a directory");
    roots.roots.push_back(r->path);
    roots.writable.push_back(w);
    roots.fds.push_back(r->get());
    held.push_back(std::move(*r));
    return {};
  };
  for (const auto& w : policy->workspaces)
    if (Status st = add(w, "workspace root", writable); !st.ok()) return st;
  // Writable in every mode, as a command's /tmp is (README, "Policy by mode").
  if (Status st = add(ctx.temp_dir, "the scope's temp dir", true); !st.ok()) return st;
  if (policy->mode == Mode::danger_full_access) {  // anywhere the peer's uid may
    if (Status st = add("/", "/", true); !st.ok()) return st;
  }
  roots.denied = policy->deny_read;
  roots.denied.insert(roots.denied.end(), ctx.hidden_paths.begin(), ctx.hidden_paths.end());
  roots.not_denied = {ctx.temp_dir};
  roots.read_only = policy->protect;
  return roots;
}

// File tools see what commands see: /tmp is the scope's temp dir.
std::string command_view(std::string path, const FileContext& ctx) {
  if (path == "/tmp" || path.rfind("/tmp/", 0) == 0) path = ctx.temp_dir + path.substr(4);
  return path;
}

// The error code says why, so clients can raise a typed error (docs/protocol.md): file tools
// report EISDIR for a directory where a file was wanted, EXDEV/ELOOP for a path that leaves
// its roots, and the policy's own refusals (a read-only root, --deny-read, --protect, the scope's
// ceiling) are refused_by_policy.
ErrorCode error_code(const Status& st) {
  if (st.code() == StatusCode::refused) return ErrorCode::refused_by_policy;
  switch (st.err()) {
    case ENOENT:
    case ENOTDIR: return ErrorCode::not_found;
    case EACCES:
    case EPERM: return ErrorCode::permission_denied;
    case EISDIR: return ErrorCode::is_directory;
    case EXDEV:
    case ELOOP: return ErrorCode::outside_roots;
    case EROFS: return ErrorCode::refused_by_policy;
    default: return ErrorCode::invalid_request;
  }
}

proto::Frame error_frame(std::uint64_t id, const Status& st) { return proto::make_error(id, error_code(st), st.message()); }

proto::Frame handle_read_as_peer(std::uint64_t id, const proto::ReadRequest& req, const FileContext& ctx) {
  std::vector<HostPath> held;
  auto roots = make_roots(req.workspaces(), req.mode(), ctx, held);
  if (!roots.ok()) return error_frame(id, roots.status());
  const std::uint64_t frame_room = ctx.max_frame > kReplyOverhead ? ctx.max_frame - kReplyOverhead : 0;
  std::uint64_t max = req.max_bytes();
  if (max == 0) max = std::min(req.binary() ? files::kDefaultReadBytes : files::kDefaultReadText, frame_room);
  if (max > frame_room)
    return proto::make_error(id, ErrorCode::invalid_request,
                             "a read window of " + format_size(max) + " does not fit in one reply frame (" +
                                 format_size(ctx.max_frame) + ", serve --max-frame); read it in windows");
  std::string path = command_view(proto::str(req.path()), ctx);
  auto r = req.binary() ? files::read_bytes(*roots, path, req.offset(), max)
                        : files::read_text(*roots, path, req.offset(), max);
  if (!r.ok()) return error_frame(id, r.status());
  return proto::make_read_result(id, r->data, r->offset, r->file_size, r->truncated);
}

proto::Frame handle_write_as_peer(std::uint64_t id, const proto::WriteRequest& req, const FileContext& ctx) {
  std::vector<HostPath> held;
  Mode mode = Mode::workspace_write;
  auto roots = make_roots(req.workspaces(), req.mode(), ctx, held, &mode);
  if (!roots.ok()) return error_frame(id, roots.status());
  const std::string path = command_view(proto::str(req.path()), ctx);
  // A relative path lands in the first root: the temp dir where no workspace is named.
  const bool in_temp = !path.empty() && path[0] == '/' ? beneath(path, ctx.temp_dir)
                                                        : !roots->roots.empty() && roots->roots.front() == ctx.temp_dir;
  if (mode == Mode::read_only && !in_temp)
    return proto::make_error(id, ErrorCode::refused_by_policy,
                             "writes are refused in read-only mode (but to /tmp, the scope's temp dir)");
  std::string_view data;
  if (req.data()) data = {reinterpret_cast<const char*>(req.data()->data()), req.data()->size()};
  Status st = files::write_file(*roots, path, data, req.binary(), files::kDefaultWrite);
  if (!st.ok()) return error_frame(id, st);
  return proto::make_write_result(id, data.size());
}

proto::Frame handle_list_as_peer(std::uint64_t id, const proto::ListRequest& req, const FileContext& ctx) {
  std::vector<HostPath> held;
  auto roots = make_roots(req.workspaces(), req.mode(), ctx, held);
  if (!roots.ok()) return error_frame(id, roots.status());
  std::size_t max = req.max_entries() ? req.max_entries() : files::kMaxListEntries;
  if (max > files::kMaxListEntries)
    return proto::make_error(id, ErrorCode::invalid_request,
                             "max_entries is over the limit of " + std::to_string(files::kMaxListEntries));
  auto listing = files::list_dir(*roots, command_view(proto::str(req.path()), ctx), max);
  if (!listing.ok()) return error_frame(id, listing.status());
  std::vector<proto::ListEntry> entries;
  for (const auto& e : listing->entries) entries.push_back({e.name, e.type, e.size, e.mtime_ms});
  return proto::make_list_result(id, entries, listing->truncated);
}


// The whole request with the peer's filesystem credentials: it reads, writes and lists only
// what the peer's uid and groups may, and a written file belongs to the peer.
template <class Req>
proto::Frame as_peer(proto::Frame (*fn)(std::uint64_t, const Req&, const FileContext&), std::uint64_t id, const Req& req,
                     const FileContext& ctx) {
  proto::Frame out;
  Status st = with_credentials(ctx.peer, [&] {
    out = fn(id, req, ctx);
    return Status();
  });
  if (!st.ok()) return proto::make_error(id, ErrorCode::internal, st.message());
  return out;
}

}  // namespace

proto::Frame handle_read(std::uint64_t id, const proto::ReadRequest& req, const FileContext& ctx) {
  return as_peer(handle_read_as_peer, id, req, ctx);
}
proto::Frame handle_write(std::uint64_t id, const proto::WriteRequest& req, const FileContext& ctx) {
  return as_peer(handle_write_as_peer, id, req, ctx);
}
proto::Frame handle_list(std::uint64_t id, const proto::ListRequest& req, const FileContext& ctx) {
  return as_peer(handle_list_as_peer, id, req, ctx);
}

}  // namespace corral::supervisor

// FileRequests: the handler (supervisor/requests.h).
namespace corral::supervisor {

void FileRequests::on_file(const proto::Message& msg, const std::vector<std::uint8_t>& payload) {
  const std::uint64_t id = msg.request_id();
  if (id == 0)
    return s_.send_error(0, proto::ErrorCode::invalid_request, "request_id 0 is reserved for connection-level errors");
  const proto::Body type = msg.body_type();
  const flatbuffers::String* name = type == proto::Body::ReadRequest    ? msg.body_as_ReadRequest()->scope()
                                   : type == proto::Body::WriteRequest ? msg.body_as_WriteRequest()->scope()
                                                                       : msg.body_as_ListRequest()->scope();
  auto scope = s_.scope_for(id, name, s_.implicit_scope());
  if (!scope) return;
  const ServerOptions& options = s_.ctx().options;
  // Everything the job needs, by value: it runs on another thread, and may outlive us. The
  // scope's temp dir too (a tmpfs mount, when the scope's first use is this request) is made
  // there, off the loop.
  auto fc = std::make_shared<FileContext>(
      FileContext{{}, options.max_frame, scope->defaults, scope->ceiling, options.hidden_paths, nullptr});
  auto creds = std::make_shared<Credentials>(s_.peer().credentials());
  fc->peer = creds.get();
  // The reply's room: a read's window (what it asks, else the default; at most a frame), a
  // listing's (1 MiB: 10,000 entries), a write's (small). Plus the request itself, held until then.
  std::uint64_t reply = kReplyOverheadBytes;
  if (type == proto::Body::ReadRequest) {
    const proto::ReadRequest& r = *msg.body_as_ReadRequest();
    const std::uint64_t window = r.max_bytes() ? r.max_bytes() : r.binary() ? files::kDefaultReadBytes : files::kDefaultReadText;
    reply += std::min<std::uint64_t>(window, options.max_frame);
  } else if (type == proto::Body::ListRequest) {
    reply += 1 << 20;
  }
  const std::uint64_t bytes = std::min<std::uint64_t>(payload.size() + reply, options.max_queued);
  s_.hold(bytes);
  // The job holds the scope weakly: a pool job (and a hand-back the loop never ran) must not be
  // what keeps a scope alive past the pools' shutdown (supervisor/context.h).
  std::weak_ptr<Scope> weak_scope = scope;
  jobs_.push_back({id, payload, bytes, [fc, creds, type, weak_scope](const proto::Message& m) {
                     const std::uint64_t rid = m.request_id();
                     auto held = weak_scope.lock();
                     auto temp = held ? held->temp_dir() : StatusOr<std::string>(Status::error("scope", ENOENT, "the scope is gone"));
                     held.reset();
                     if (!temp.ok())
                       return proto::make_error(rid, proto::ErrorCode::internal,
                                                "cannot create the scope's temp dir: " + temp.status().message());
                     fc->temp_dir = *temp;
                     if (type == proto::Body::ReadRequest) return handle_read(rid, *m.body_as_ReadRequest(), *fc);
                     if (type == proto::Body::WriteRequest) return handle_write(rid, *m.body_as_WriteRequest(), *fc);
                     return handle_list(rid, *m.body_as_ListRequest(), *fc);
                   }});
  next();
}

void FileRequests::next() {
  if (running_ || jobs_.empty() || s_.closed()) return;
  running_ = true;
  auto job = std::make_shared<Job>(std::move(jobs_.front()));
  jobs_.pop_front();
  s_.ctx().blocking->submit([this, job, weak = s_.weak(), executor = s_.io().get_executor()] {
    // The payload was verified when it was read; this copy is the same bytes.
    auto reply = std::make_shared<proto::Frame>(job->serve(*flatbuffers::GetRoot<proto::Message>(job->payload.data())));
    asio::post(executor, [this, job, weak, reply] {
      auto keep = weak.lock();
      if (!keep) return;
      s_.unhold(job->held);
      running_ = false;
      s_.queue(std::move(*reply));
      next();
    });
  });
}

void FileRequests::close() {
  for (const auto& j : jobs_) s_.unhold(j.held);
  jobs_.clear();
}

}  // namespace corral::supervisor
