#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

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
