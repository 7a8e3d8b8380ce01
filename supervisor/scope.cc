#include "supervisor/scope.h"

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>

#include "runtime/sandbox.h"

namespace corral::supervisor {

Scope::Scope(std::string id, uid_t owner, std::string temp_root, const SandboxHost* host)
    : id_(std::move(id)), owner_(owner), temp_root_(std::move(temp_root)), host_(host) {}

namespace {

// Removes a scope's temp dir when the last holder lets go: the job on the pool, or the pool
// dropping that job at shutdown.
struct TempDirRemoval {
  std::string dir;
  ~TempDirRemoval() {
    std::error_code ec;
    release_temp_dir(dir);  // a tmpfs: its files go with it
    // remove_all does not follow symlinks: a link planted in the dir is removed, not its target.
    std::filesystem::remove_all(dir, ec);
  }
};

}  // namespace

Scope::~Scope() {
  close();
  // The servers first (on the pool: each is a kill and a reap), then the temp dir they show.
  if (prepared && offload) offload([p = std::move(prepared)]() mutable { p.reset(); });
  if (netns_ >= 0) ::close(netns_);
  if (dir_.empty()) return;
  auto removal = std::make_shared<TempDirRemoval>(TempDirRemoval{dir_});
  if (offload) offload([removal]() mutable { removal.reset(); });
}

std::string Scope::temp_dir_if_any() const {
  std::lock_guard<std::mutex> lock(resources_mutex_);
  return dir_;
}

// Both are made outside the lock (a mount, a namespace: the loop may be waiting for the lock
// to read them) and installed under it; a thread that lost the race undoes its own.
StatusOr<std::string> Scope::temp_dir() {
  {
    std::lock_guard<std::mutex> lock(resources_mutex_);
    if (!dir_.empty()) return dir_;
  }
  if (closed_) return Status::error("scope", ENOENT, "scope " + id_ + " is closed");
  std::string made = temp_root_ + "/corral-scope-XXXXXX";
  if (::mkdtemp(made.data()) == nullptr) return Status::from_errno("mkdtemp", errno, made);  // 0700
  Status adopted = host_ ? host_->adopt_temp_dir(made) : Status{};
  std::lock_guard<std::mutex> lock(resources_mutex_);
  if (!adopted.ok() || !dir_.empty()) {
    // Not adopted (root-owned, no tmpfs: never handed out), or another thread was first.
    release_temp_dir(made);
    ::rmdir(made.c_str());
    if (!adopted.ok()) return adopted;
    return dir_;
  }
  dir_ = std::move(made);
  return dir_;
}

int Scope::network_namespace() {
  {
    std::lock_guard<std::mutex> lock(resources_mutex_);
    if (netns_ != -2) return netns_;
  }
  UniqueFd ns;
  if (auto taken = host_ ? host_->take_network_namespace() : Status::invalid("no host"); taken.ok()) {
    ns = std::move(taken).value();
    if (offload) offload([host = host_] { host->refill_network_namespaces(kSpareNetworkNamespaces); });
  }
  std::lock_guard<std::mutex> lock(resources_mutex_);
  if (netns_ == -2) netns_ = ns ? ns.release() : -1;  // else another thread was first: ours closes
  return netns_;
}

std::uint64_t Scope::attach(std::function<void()> terminate) {
  std::uint64_t token = next_token_++;
  hooks_.emplace(token, std::move(terminate));
  return token;
}

void Scope::detach(std::uint64_t token) { hooks_.erase(token); }

void Scope::close() {
  if (closed_) return;
  closed_ = true;
  // Its prepared sandboxes' servers end now (on the pool: each is a kill and a reap), not when
  // the last record of its commands goes: they hold its temp dir's tmpfs and its namespaces.
  if (prepared && offload) offload([p = std::move(prepared)]() mutable { p.reset(); });
  prepared.reset();
  // Hooks may detach themselves (or others) while running: take them out first.
  auto hooks = std::move(hooks_);
  hooks_.clear();
  for (auto& [token, terminate] : hooks) terminate();
  for (auto& weak : children_)
    if (auto child = weak.lock()) child->close();
}

std::shared_ptr<Scope> ScopeRegistry::make(std::string id, uid_t owner) {
  auto scope = std::make_shared<Scope>(std::move(id), owner, temp_root_, host_);
  scope->offload = offload_;
  if (host_ && prepare_after_) scope->prepared = std::make_shared<PreparedSandboxes>(host_, prepare_after_);
  return scope;
}

std::shared_ptr<Scope> ScopeRegistry::make_implicit(uid_t owner) {
  return make("conn-" + std::to_string(next_id_++), owner);
}

StatusOr<std::shared_ptr<Scope>> ScopeRegistry::create(uid_t owner, const std::shared_ptr<Scope>& parent,
                                                       bool detached, Policy defaults) {
  std::size_t open = 0;
  for (const auto& [id, sc] : scopes_) open += !sc->closed() && sc->owner() == owner && sc->ceiling == Ceiling::bounded;
  if (open >= kMaxScopesPerUid)
    return Status::error("limit", EAGAIN,
                         "uid " + std::to_string(owner) + " already has " + std::to_string(open) +
                             " open scopes (the limit is " + std::to_string(kMaxScopesPerUid) + "); close some first");
  // Appended, not `"s" + std::to_string(...)`: GCC 12 at -O3 warns (-Wrestrict) on that.
  std::string id = "s";
  id += std::to_string(next_id_++);
  auto scope = make(std::move(id), owner);
  scope->detached = detached;
  scope->defaults = std::move(defaults);
  scope->ceiling = Ceiling::bounded;
  if (parent) {
    scope->parent = parent;
    parent->add_child(scope);
  }
  scopes_[scope->id()] = scope;
  return scope;
}

StatusOr<std::shared_ptr<Scope>> ScopeRegistry::find(const std::string& id, uid_t uid) const {
  auto it = scopes_.find(id);
  if (it == scopes_.end() || it->second->closed()) return Status::error("scope", ENOENT, "no scope '" + id + "'");
  if (!it->second->permits(uid))
    return Status::error("scope", EPERM, "scope '" + id + "' belongs to uid " + std::to_string(it->second->owner()));
  return it->second;
}

std::shared_ptr<Scope> ScopeRegistry::default_for(uid_t uid) {
  const std::string id = "default-" + std::to_string(uid);
  auto it = scopes_.find(id);
  if (it != scopes_.end() && !it->second->closed()) return it->second;
  auto scope = make(id, uid);
  scope->detached = true;
  scopes_[id] = scope;
  return scope;
}

void ScopeRegistry::close(const std::shared_ptr<Scope>& scope) {
  scope->close();
  // Forget it and every descendant (closed scopes are no longer found).
  for (auto it = scopes_.begin(); it != scopes_.end();) {
    if (it->second->closed()) it = scopes_.erase(it);
    else ++it;
  }
}

std::vector<std::shared_ptr<Scope>> ScopeRegistry::list(uid_t uid) const {
  std::vector<std::shared_ptr<Scope>> out;
  for (const auto& [id, scope] : scopes_)
    if (!scope->closed() && scope->permits(uid)) out.push_back(scope);
  return out;
}

}  // namespace corral::supervisor
