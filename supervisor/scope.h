// Scope: what a connection owns — for now its private temp dir (0700, created on first use,
// removed with everything in it when the scope is destroyed, after its commands are reaped).
#pragma once

#include <string>

#include "runtime/status.h"

namespace corral::supervisor {

class Scope {
 public:
  Scope() = default;
  explicit Scope(std::string temp_root) : temp_root_(std::move(temp_root)) {}
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;
  ~Scope();

  // The temp dir, created under temp_root on first call ("corral-scope-XXXXXX", 0700).
  StatusOr<std::string> temp_dir();
  // Removes the temp dir now (idempotent).
  void close();

 private:
  std::string temp_root_;
  std::string dir_;
};

}  // namespace corral::supervisor
