#include "supervisor/scope.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <vector>

namespace corral::supervisor {

Scope::~Scope() { close(); }

StatusOr<std::string> Scope::temp_dir() {
  if (!dir_.empty()) return dir_;
  std::string tmpl = temp_root_ + "/corral-scope-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) return Status::from_errno("mkdtemp", errno, tmpl);
  dir_ = buf.data();  // mkdtemp creates it 0700
  return dir_;
}

void Scope::close() {
  if (dir_.empty()) return;
  std::error_code ec;
  // remove_all does not follow symlinks: a link planted in the dir is removed, not its target.
  std::filesystem::remove_all(dir_, ec);
  dir_.clear();
}

}  // namespace corral::supervisor
