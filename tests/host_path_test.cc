// runtime/host_path.h: the descriptor walk follows links only in system directories, refuses
// every link below a directory a sandbox may write, and checks with the peer's credentials.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "runtime/host_path.h"
#include "tests/test_util.h"

using namespace corral;
using namespace corral::test;

namespace {

struct stat stat_of(const std::string& p) {
  struct stat st {};
  REQUIRE(::stat(p.c_str(), &st) == 0);
  return st;
}

}  // namespace

TEST_CASE("links in system directories are followed: merged /usr") {
  auto r = resolve_host_path("/bin/sh", "--workspace");
  REQUIRE(r.ok());
  char real[PATH_MAX];
  REQUIRE(::realpath("/bin/sh", real) != nullptr);
  CHECK(r->path == real);
  CHECK(r->path.rfind("/usr/", 0) == 0);
  struct stat want = stat_of("/bin/sh");
  CHECK(r->st.st_ino == want.st_ino);
  CHECK((::fcntl(r->get(), F_GETFD) & FD_CLOEXEC) != 0);
  CHECK((::fcntl(r->get(), F_GETFL) & O_PATH) != 0);
}

TEST_CASE("a link below a directory a sandbox may write is refused, wherever it points") {
  TempDir t;  // under /tmp: mode 1777, not a system directory
  const std::string w = t.path() + "/w";
  REQUIRE(::mkdir(w.c_str(), 0755) == 0);
  REQUIRE(::mkdir((w + "/real").c_str(), 0755) == 0);
  REQUIRE(::symlink("/root", (w + "/out").c_str()) == 0);
  REQUIRE(::symlink("real", (w + "/inside").c_str()) == 0);
  for (const std::string& p : {w + "/out", w + "/out/x", w + "/inside", w + "/inside/y"}) {
    CAPTURE(p);
    auto r = resolve_host_path(p, "--workspace");
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().step() == "symlink");
    CHECK(r.status().err() == ELOOP);
    CHECK(r.status().message().find("'" + p.substr(0, p.find('/', w.size() + 1)) + "' is a symlink") != std::string::npos);
  }
  auto ok = resolve_host_path(w + "/./real", "--workspace");
  REQUIRE(ok.ok());
  CHECK(ok->path == w + "/real");
  CHECK(ok->st.st_ino == stat_of(w + "/real").st_ino);
}

TEST_CASE("a root-owned directory outside /usr and /etc is not trusted either (idmapped workspaces)") {
  // /var/tmp/X is root-owned 0755 like an idmapped workspace whose links are owned by root.
  std::string base = "/var/tmp/corral-hostpath-XXXXXX";
  REQUIRE(::mkdtemp(base.data()) != nullptr);
  REQUIRE(::chmod(base.c_str(), 0755) == 0);
  REQUIRE(::symlink("/etc", (base + "/out").c_str()) == 0);
  auto r = resolve_host_path(base + "/out", "--workspace");
  CHECK_FALSE(r.ok());
  CHECK(r.status().step() == "symlink");
  std::filesystem::remove_all(base);
}

TEST_CASE("shapes: relative, '..', NUL, missing") {
  CHECK(resolve_host_path("rel", "--protect").status().step() == "path");
  CHECK(resolve_host_path("/usr/../etc", "--protect").status().step() == "path");
  CHECK(resolve_host_path(std::string("/a\0b", 4), "--protect").status().step() == "path");
  auto missing = resolve_host_path("/nonexistent-corral-path/x", "--protect");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().err() == ENOENT);
  CHECK(missing.status().message().find("--protect '/nonexistent-corral-path/x'") != std::string::npos);
}

TEST_CASE("system directories never become writable roots") {
  for (const char* p : {"/", "/usr", "/usr/local", "/etc"}) {
    CAPTURE(p);
    auto r = resolve_host_path(p, "--workspace");
    REQUIRE(r.ok());
    CHECK(writable_root_allowed(*r, "--workspace").err() == EPERM);
  }
  TempDir t;
  auto r = resolve_host_path(t.path(), "--workspace");
  REQUIRE(r.ok());
  CHECK(writable_root_allowed(*r, "--workspace").ok());
}

TEST_CASE("open_below follows no link") {
  TempDir t;
  REQUIRE(::mkdir((t.path() + "/d").c_str(), 0755) == 0);
  REQUIRE(::symlink("d", (t.path() + "/l").c_str()) == 0);
  auto base = resolve_host_path(t.path(), "x");
  REQUIRE(base.ok());
  CHECK(open_below(base->get(), "d").ok());
  CHECK(open_below(base->get(), "l").status().err() == ELOOP);
  CHECK(open_below(base->get(), "l/x").status().err() == ELOOP);
}

TEST_CASE("with_credentials checks with the peer's uid, groups, on its own thread only") {
  if (::geteuid() != 0) {
    MESSAGE("skipped: needs root to take another uid's credentials");
    return;
  }
  TempDir t;
  REQUIRE(::chmod(t.path().c_str(), 0755) == 0);  // mkdtemp's 0700 would keep nobody out of everything
  const std::string mine = t.path() + "/nobody", roots = t.path() + "/root", grp = t.path() + "/group";
  for (const auto& d : {mine, roots, grp}) REQUIRE(::mkdir(d.c_str(), 0755) == 0);
  REQUIRE(::chown(mine.c_str(), 65534, 65534) == 0);
  REQUIRE(::chmod(roots.c_str(), 0700) == 0);
  REQUIRE(::chown(grp.c_str(), 0, 4242) == 0);
  REQUIRE(::chmod(grp.c_str(), 0770) == 0);

  Credentials nobody{65534, 65534, {}};
  Status st = with_credentials(&nobody, [&]() -> Status {
    auto own = resolve_host_path(mine, "--workspace");
    if (!own.ok()) return own.status();
    if (Status a = check_access(*own, W_OK | X_OK, "--workspace"); !a.ok()) return a;
    auto root_ws = resolve_host_path(roots, "--workspace");
    if (!root_ws.ok()) return root_ws.status();
    return check_access(*root_ws, W_OK | X_OK, "--workspace");
  });
  CHECK_FALSE(st.ok());
  CHECK(st.err() == EACCES);
  CHECK(st.message().find("the requesting uid may not write it") != std::string::npos);
  // Nobody cannot even look below a 0700 root directory.
  st = with_credentials(&nobody, [&] { return resolve_host_path(roots + "/x", "--bind source").status(); });
  CHECK(st.err() == EACCES);

  // Supplementary groups count: 4242 opens the group directory.
  Credentials in_group{65534, 65534, {4242}};
  auto write_grp = [&]() -> Status {
    auto r = resolve_host_path(grp, "--workspace");
    if (!r.ok()) return r.status();
    return check_access(*r, W_OK | X_OK, "--workspace");
  };
  CHECK(with_credentials(&in_group, write_grp).ok());
  CHECK(with_credentials(&nobody, write_grp).err() == EACCES);

  // The calling thread kept root's credentials.
  CHECK(::syscall(SYS_setfsuid, -1) == 0);
  CHECK(::access(roots.c_str(), W_OK) == 0);
  Credentials root{0, 0, {}};
  CHECK(with_credentials(&root, write_grp).ok());
  CHECK(with_credentials(nullptr, write_grp).ok());
}
