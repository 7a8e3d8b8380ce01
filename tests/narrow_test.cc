// narrow() (runtime/policy.h): the one rule by which a scope's policy bounds what runs in it.
// Pure: every case builds the two policies in memory.
#include <doctest/doctest.h>

#include "runtime/policy.h"

using namespace corral;
using namespace std::chrono_literals;

namespace {

Policy scope_with(Mode m, Network n) {
  Policy p;
  p.mode = m;
  p.network = n;
  return p;
}

}  // namespace

TEST_CASE("absent mode and network take the scope's; explicit values always hold") {
  const Policy loose = scope_with(Mode::danger_full_access, Network::allowed);
  auto inherited = narrow(loose, Ceiling::bounded, {});
  REQUIRE(inherited.ok());
  CHECK(inherited->mode == Mode::danger_full_access);
  CHECK(inherited->network == Network::allowed);

  PolicyRequest strict;
  strict.mode = Mode::workspace_write;  // the wire's old "default" value: now it means itself
  strict.network = Network::denied;
  auto narrowed = narrow(loose, Ceiling::bounded, strict);
  REQUIRE(narrowed.ok());
  CHECK(narrowed->mode == Mode::workspace_write);
  CHECK(narrowed->network == Network::denied);
  strict.mode = Mode::read_only;
  CHECK(narrow(loose, Ceiling::bounded, strict)->mode == Mode::read_only);
}

TEST_CASE("mode and network over the ceiling are refused, naming both sides") {
  const Policy ro = scope_with(Mode::read_only, Network::denied);
  for (Mode m : {Mode::workspace_write, Mode::danger_full_access}) {
    PolicyRequest r;
    r.mode = m;
    auto out = narrow(ro, Ceiling::bounded, r);
    REQUIRE_FALSE(out.ok());
    CHECK(out.status().step() == "ceiling");
    CHECK(out.status().code() == StatusCode::refused);
    CHECK(out.status().err() == EPERM);
    CHECK(out.status().message() ==
          std::string("mode ") + mode_name(m) + " is over the scope's mode read-only");
  }
  PolicyRequest wider;
  wider.mode = Mode::danger_full_access;
  CHECK(narrow(scope_with(Mode::workspace_write, Network::allowed), Ceiling::bounded, wider).status().message() ==
        "mode danger-full-access is over the scope's mode workspace-write");
  PolicyRequest net;
  net.network = Network::allowed;
  auto out = narrow(ro, Ceiling::bounded, net);
  REQUIRE_FALSE(out.ok());
  CHECK(out.status().message() == "network allowed is over the scope's network denied");
}

TEST_CASE("without a ceiling (a connection's implicit scope) a request may widen") {
  PolicyRequest r;
  r.mode = Mode::danger_full_access;
  r.network = Network::allowed;
  auto out = narrow(Policy{}, Ceiling::none, r);
  REQUIRE(out.ok());
  CHECK(out->mode == Mode::danger_full_access);
  CHECK(out->network == Network::allowed);
}

TEST_CASE("workspaces: the scope's when none are named, else beneath the scope's") {
  Policy scope;
  scope.workspaces = {"/home/u/project"};
  CHECK(narrow(scope, Ceiling::bounded, {})->workspaces == std::vector<std::string>{"/home/u/project"});
  PolicyRequest inside;
  inside.workspaces = {"/home/u/project/sub", "/home/u/project"};
  CHECK(narrow(scope, Ceiling::bounded, inside)->workspaces == inside.workspaces);
  PolicyRequest sibling;
  sibling.workspaces = {"/home/u/project2"};  // a prefix as a string, not as a path
  auto out = narrow(scope, Ceiling::bounded, sibling);
  REQUIRE_FALSE(out.ok());
  CHECK(out.status().message() == "workspace /home/u/project2 is not beneath the scope's workspaces /home/u/project");
  // A scope that names no workspace bounds none.
  CHECK(narrow(Policy{}, Ceiling::bounded, sibling).ok());
  CHECK(narrow(scope, Ceiling::none, sibling).ok());
}

TEST_CASE("binds: read-only only in a read-only scope; a writable one only beneath the scope's workspaces") {
  PolicyRequest rw;
  rw.binds = {{"/srv/data", "/data", true}};
  auto out = narrow(scope_with(Mode::read_only, Network::denied), Ceiling::bounded, rw);
  REQUIRE_FALSE(out.ok());
  CHECK(out.status().message() == "--bind /srv/data:/data:rw is writable; the scope's mode is read-only");
  PolicyRequest ro;
  ro.binds = {{"/srv/data", "/data", false}};
  CHECK(narrow(scope_with(Mode::read_only, Network::denied), Ceiling::bounded, ro).ok());
  Policy ws;
  ws.workspaces = {"/home/u/project"};
  out = narrow(ws, Ceiling::bounded, rw);
  REQUIRE_FALSE(out.ok());
  CHECK(out.status().message() ==
        "--bind /srv/data:/data:rw is writable outside the scope's workspaces /home/u/project");
  rw.binds = {{"/home/u/project/cache", "/cache", true}};
  CHECK(narrow(ws, Ceiling::bounded, rw).ok());
  // Asking for read-only in a writable scope, with a writable bind, is refused like any
  // read-only request with one.
  rw.mode = Mode::read_only;
  CHECK_FALSE(narrow(ws, Ceiling::none, rw).ok());
}

TEST_CASE("the scope's deny_read and protect always apply, added to the request's") {
  Policy scope;
  scope.deny_read = {"/home/u/.ssh"};
  scope.protect = {"/home/u/project/.git"};
  PolicyRequest r;
  r.deny_read = {"/etc/shadow", "/home/u/.ssh"};
  r.protect = {"/home/u/project/Makefile"};
  for (Ceiling c : {Ceiling::bounded, Ceiling::none}) {
    auto out = narrow(scope, c, r);
    REQUIRE(out.ok());
    CHECK(out->deny_read == std::vector<std::string>{"/home/u/.ssh", "/etc/shadow"});
    CHECK(out->protect == std::vector<std::string>{"/home/u/project/.git", "/home/u/project/Makefile"});
  }
}

TEST_CASE("caps: never above a finite scope cap; a request without one gets the scope's") {
  Policy scope;
  scope.caps.memory_bytes = 256ULL << 20;
  scope.caps.pids = 64;
  scope.caps.cpu_time = 10s;
  scope.caps.cpus = 0.5;
  scope.caps.max_file_size = 1 << 20;
  auto unlimited = narrow(scope, Ceiling::bounded, {});  // 0 on the wire: no cap asked
  REQUIRE(unlimited.ok());
  CHECK(unlimited->caps.memory_bytes == 256ULL << 20);
  CHECK(unlimited->caps.pids == 64u);
  CHECK(unlimited->caps.cpu_time == 10s);
  CHECK(unlimited->caps.cpus == 0.5);
  CHECK(unlimited->caps.max_file_size == 1u << 20);

  PolicyRequest smaller;
  smaller.caps.memory_bytes = 64ULL << 20;
  smaller.caps.pids = 8;
  CHECK(narrow(scope, Ceiling::bounded, smaller)->caps.memory_bytes == 64ULL << 20);
  CHECK(narrow(scope, Ceiling::bounded, smaller)->caps.pids == 8u);

  struct Over {
    PolicyRequest r;
    const char* message;
  };
  std::vector<Over> overs(5);
  overs[0].r.caps.memory_bytes = 1ULL << 30;
  overs[0].message = "--memory 1G is over the scope's --memory 256M";
  overs[1].r.caps.pids = 65;
  overs[1].message = "--pids 65 is over the scope's --pids 64";
  overs[2].r.caps.cpu_time = 11s;
  overs[2].message = "--cpu-time 11s is over the scope's --cpu-time 10s";
  overs[3].r.caps.cpus = 1;
  overs[3].message = "--cpus 1 is over the scope's --cpus 0.5";
  overs[4].r.caps.max_file_size = 2 << 20;
  overs[4].message = "--max-file-size 2M is over the scope's --max-file-size 1M";
  for (const auto& o : overs) {
    auto out = narrow(scope, Ceiling::bounded, o.r);
    REQUIRE_FALSE(out.ok());
    CHECK(out.status().step() == "ceiling");
    CHECK(out.status().code() == StatusCode::refused);
    CHECK(out.status().message() == o.message);
    CHECK(narrow(scope, Ceiling::none, o.r).ok());
  }
  // A scope without caps bounds none.
  CHECK(narrow(Policy{}, Ceiling::bounded, overs[0].r).ok());
}

TEST_CASE("caps: 0 is unlimited, said explicitly: over every finite scope cap, kept where there is none") {
  PolicyRequest zero;
  zero.caps.memory_bytes = 0;
  zero.caps.pids = 0;
  Policy capped;
  capped.caps.memory_bytes = 256ULL << 20;
  auto over = narrow(capped, Ceiling::bounded, zero);
  REQUIRE_FALSE(over.ok());
  CHECK(over.status().code() == StatusCode::refused);
  CHECK(over.status().message() == "--memory 0 (unlimited) is over the scope's --memory 256M");
  Policy pids_capped;
  pids_capped.caps.pids = 64;
  CHECK(narrow(pids_capped, Ceiling::bounded, zero).status().message() ==
        "--pids 0 (unlimited) is over the scope's --pids 64");
  // No ceiling (a connection's own scope): the request's 0 holds, so no default applies.
  auto widened = narrow(capped, Ceiling::none, zero);
  REQUIRE(widened.ok());
  CHECK(widened->caps.memory_bytes == std::optional<std::uint64_t>(0));
  CHECK_FALSE(widened->caps.limits_memory());
  CHECK_FALSE(widened->caps.any_cgroup());
  // A scope that is itself unlimited (0) bounds nothing, and passes its 0 on to a request that
  // names no cap; a scope without the cap leaves it unset (the supervisor's default applies).
  Policy open;
  open.caps.memory_bytes = 0;
  PolicyRequest big;
  big.caps.memory_bytes = 1ULL << 40;
  CHECK(narrow(open, Ceiling::bounded, big)->caps.memory_bytes == 1ULL << 40);
  CHECK(narrow(open, Ceiling::bounded, {})->caps.memory_bytes == std::optional<std::uint64_t>(0));
  CHECK_FALSE(narrow(Policy{}, Ceiling::bounded, {})->caps.memory_bytes.has_value());
  // normalize() takes 0 and refuses what is neither 0 nor in range.
  Policy p;
  p.caps.memory_bytes = 0;
  p.caps.pids = 0;
  CHECK(normalize(p).ok());
  p.caps.memory_bytes = 1024;
  CHECK(normalize(p).message() == "--memory must be 0 (unlimited) or between 4M and 1024G");
  // --cpus: the same minimum as the CLI's and the cgroup's (runtime/limits.h cap_limits).
  Policy slow;
  slow.caps.cpus = 0.005;
  CHECK(normalize(slow).message() == "--cpus must be between 0.01 and 1024");
}
