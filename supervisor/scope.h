// Scopes: the ownership tree of docs/design.md "Ownership and lifetimes".
//
// A scope owns a private temp dir (0700, created on first use, owned by the sandbox uid),
// policy defaults, and everything started in it: commands, background commands, workers and
// child scopes. close() ends all of that, recursively; the temp dir goes when the last thing
// that used it (a command still being reaped) lets go of the scope.
//
// Every connection has an implicit scope. Named scopes live in the ScopeRegistry: owned by
// the connection that created them, or detached to outlive it until closed. A peer acts only
// on scopes its uid created (root on all).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/policy.h"
#include "runtime/prepared.h"
#include "runtime/status.h"

namespace corral {
class SandboxHost;
}

namespace corral::supervisor {

// Spare network namespaces the host keeps ready (SandboxHost::take_network_namespace()).
inline constexpr std::size_t kSpareNetworkNamespaces = 2;

class Scope : public std::enable_shared_from_this<Scope> {
 public:
  Scope(std::string id, uid_t owner, std::string temp_root, const SandboxHost* host);
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;
  ~Scope();  // removes the temp dir

  const std::string& id() const { return id_; }
  uid_t owner() const { return owner_; }
  bool closed() const { return closed_.load(); }
  bool detached = false;
  std::weak_ptr<Scope> parent;
  // The policy of what runs in it: mode, network, workspaces, deny_read, protect, caps.
  // With Ceiling::bounded (named scopes) it is also the most anything in it may have
  // (narrow() in runtime/policy.h).
  Policy defaults;
  Ceiling ceiling = Ceiling::none;

  // The temp dir and the network namespace are made on first use, by whichever thread needs
  // them first, never the loop: a command's launch or a worker's start on the launcher pool, a
  // file request or a scope's creation on the file pool. Safe from any thread; the lock is
  // never held while they are made.

  // The temp dir, created on first call (0700, owned by the sandbox uid for a root supervisor;
  // a tmpfs where the host has layer temp-size).
  StatusOr<std::string> temp_dir();
  // Host path of the temp dir if it exists, else empty.
  std::string temp_dir_if_any() const;

  // The network namespace this scope's network-denied commands share (made on first use,
  // from the host's spares: SandboxHost::take_network_namespace(); -1 where the host cannot
  // share one: each command then gets its own). Never shared between scopes.
  int network_namespace();

  // Something that must end when the scope closes. The token removes it again.
  std::uint64_t attach(std::function<void()> terminate);
  void detach(std::uint64_t token);
  std::size_t attached() const { return hooks_.size(); }

  // Ends everything attached and every child scope. Idempotent.
  void close();
  void add_child(const std::shared_ptr<Scope>& child) { children_.push_back(child); }

  // True if `uid` may act on this scope.
  bool permits(uid_t uid) const { return uid == 0 || uid == owner_; }

  // Background commands held by this scope (their ids), for limits and listings.
  std::size_t background_count = 0;
  std::size_t worker_count = 0;
  // Where the temp dir is removed (a tree of files, a tmpfs's unmount: not on the loop). Empty:
  // in the destructor. A removal the pool drops at shutdown still happens, on the dropping thread.
  std::function<void(std::function<void()>)> offload;
  // The scope's prepared sandboxes (runtime/prepared.h): its commands start from them once a
  // policy's view has been seen (serve --prepare-after). Null: none, or closed. A launch holds
  // it while it runs (ExecSpec::prepared is weak); close() hands the scope's reference (ending
  // the servers) to `offload`.
  std::shared_ptr<PreparedSandboxes> prepared;

 private:
  std::string id_;
  uid_t owner_;
  std::string temp_root_;
  const SandboxHost* host_;
  mutable std::mutex resources_mutex_;  // guards dir_ and netns_ (not their making)
  std::string dir_;
  int netns_ = -2;  // -2: not tried yet; -1: not available
  std::atomic<bool> closed_ = false;
  std::uint64_t next_token_ = 1;
  std::map<std::uint64_t, std::function<void()>> hooks_;
  std::vector<std::weak_ptr<Scope>> children_;
};

// Named scopes by id, and each uid's default detached scope (what the CLI uses when no
// --scope is given for things that outlive it).
class ScopeRegistry {
 public:
  static constexpr std::size_t kMaxScopesPerUid = 256;

  // `offload` runs each scope's temp-dir removal (Scope::offload).
  // `prepare_after`: each scope's PreparedSandboxes (runtime/prepared.h); 0: none.
  ScopeRegistry(std::string temp_root, const SandboxHost* host,
                std::function<void(std::function<void()>)> offload = {}, unsigned prepare_after = 0)
      : temp_root_(std::move(temp_root)), host_(host), offload_(std::move(offload)), prepare_after_(prepare_after) {}

  // A connection's implicit scope (not listed, not closable by id).
  std::shared_ptr<Scope> make_implicit(uid_t owner);
  // A named scope under `parent` (may be null). Refused past kMaxScopesPerUid open named scopes
  // of `owner` (each holds a tmpfs mount on the host, and its files, until closed).
  StatusOr<std::shared_ptr<Scope>> create(uid_t owner, const std::shared_ptr<Scope>& parent, bool detached,
                                          Policy defaults);
  // Looks up a named scope that `uid` may act on; the Status says which of the two it is not.
  StatusOr<std::shared_ptr<Scope>> find(const std::string& id, uid_t uid) const;
  std::shared_ptr<Scope> default_for(uid_t uid);
  // Closes a scope and its descendants and forgets them.
  void close(const std::shared_ptr<Scope>& scope);
  std::vector<std::shared_ptr<Scope>> list(uid_t uid) const;

 private:
  std::shared_ptr<Scope> make(std::string id, uid_t owner);
  std::string temp_root_;
  const SandboxHost* host_;
  std::function<void(std::function<void()>)> offload_;
  unsigned prepare_after_;
  std::uint64_t next_id_ = 1;
  std::map<std::string, std::shared_ptr<Scope>> scopes_;
};

}  // namespace corral::supervisor
