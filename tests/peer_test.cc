#include <doctest/doctest.h>

#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "supervisor/peer.h"

using corral::supervisor::descends_from;

TEST_CASE("descends_from: children and grandchildren are ours, ancestors and strangers are not") {
  int to_parent[2];
  REQUIRE(::pipe(to_parent) == 0);
  pid_t child = ::fork();
  if (child == 0) {
    pid_t grandchild = ::fork();
    if (grandchild == 0) {
      ::pause();
      ::_exit(0);
    }
    [[maybe_unused]] auto n = ::write(to_parent[1], &grandchild, sizeof grandchild);
    ::pause();
    ::_exit(0);
  }
  pid_t grandchild = 0;
  REQUIRE(::read(to_parent[0], &grandchild, sizeof grandchild) == sizeof grandchild);
  CHECK(descends_from(child, ::getpid()));
  CHECK(descends_from(grandchild, ::getpid()));
  CHECK_FALSE(descends_from(::getpid(), child));
  CHECK_FALSE(descends_from(1, ::getpid()));
  CHECK_FALSE(descends_from(::getppid(), ::getpid()));
  ::kill(grandchild, SIGKILL);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
}

namespace {

// A child that makes a new PID namespace whose PID 1 (`init`) is named `name` and has a child
// (`below`); returns the first child. All pause until killed (see end_nested).
pid_t nested_init(const char* name, pid_t& init_out, pid_t& below) {
  int to_parent[2];
  REQUIRE(::pipe(to_parent) == 0);
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    if (::unshare(CLONE_NEWPID) != 0) ::_exit(1);
    pid_t init = ::fork();  // PID 1 of the new namespace
    if (init == 0) {
      ::prctl(PR_SET_NAME, name, 0, 0, 0);
      if (::fork() == 0) {
        ::prctl(PR_SET_NAME, "innocent", 0, 0, 0);
        ::pause();
        ::_exit(0);
      }
      ::pause();
      ::_exit(0);
    }
    [[maybe_unused]] auto n = ::write(to_parent[1], &init, sizeof init);
    ::pause();
    ::_exit(0);
  }
  ::close(to_parent[1]);
  pid_t init = 0;
  REQUIRE(::read(to_parent[0], &init, sizeof init) == sizeof init);
  ::close(to_parent[0]);
  init_out = init;
  // The grandchild: init's only child, found through /proc (its pid here is not init's pid + 1
  // for certain).
  below = 0;
  for (int i = 0; i < 200 && below == 0; ++i) {
    std::ifstream children("/proc/" + std::to_string(init) + "/task/" + std::to_string(init) + "/children");
    children >> below;
    if (below == 0) ::usleep(10 * 1000);
  }
  return child;
}

// Killing a namespace's PID 1 ends everything in it.
void end_nested(pid_t holder, pid_t init) {
  ::kill(init, SIGKILL);
  ::kill(holder, SIGKILL);
  ::waitpid(holder, nullptr, 0);
}

}  // namespace

TEST_CASE("lineage: a peer below any corral init (PID 1 of a nested PID namespace named corral-init) is sandboxed") {
  if (::geteuid() != 0) {
    MESSAGE("skipped: unshare(CLONE_NEWPID) needs root (this test runs as uid " << ::geteuid() << ")");
    return;
  }
  using corral::supervisor::Lineage;
  using corral::supervisor::lineage;
  constexpr pid_t kNobody = -2;  // an "ancestor" no process has: only the marker can say sandboxed
  pid_t below = 0, init = 0;
  pid_t holder = nested_init("corral-init", init, below);
  REQUIRE(below > 0);
  // Not a descendant of the ancestor given, yet inside a corral sandbox.
  CHECK(lineage(below, kNobody) == Lineage::sandboxed);
  end_nested(holder, init);

  // The same shape with another name is not a corral sandbox (containers are served).
  holder = nested_init("other-init", init, below);
  REQUIRE(below > 0);
  CHECK(lineage(below, kNobody) == Lineage::stranger);
  end_nested(holder, init);

  // A host process that calls itself corral-init but is no namespace's PID 1 is not one either.
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  pid_t fake = ::fork();
  if (fake == 0) {
    ::prctl(PR_SET_NAME, "corral-init", 0, 0, 0);
    [[maybe_unused]] auto n = ::write(ready[1], "x", 1);
    ::pause();
    ::_exit(0);
  }
  char x;
  REQUIRE(::read(ready[0], &x, 1) == 1);
  CHECK(lineage(fake, kNobody) == Lineage::stranger);
  ::kill(fake, SIGKILL);
  ::waitpid(fake, nullptr, 0);
}
