// Policy options end to end that the escape suite does not cover: --bind in each direction,
// --cpus, the socket path from CORRAL_SOCKET, and absurd isolation values.
#include <doctest/doctest.h>

#include "tests/test_util.h"

using namespace corral;
using namespace corral::test;
using namespace std::chrono_literals;

TEST_CASE("--bind SRC:DST shows a host path elsewhere: ro by default, rw when asked, ro only in read-only mode") {
  Server s;
  TempDir d;
  ::chmod(d.path().c_str(), 0755);  // readable by the sandbox uid (the file is 0644)
  std::ofstream(d.path() + "/in") << "host file\n";
  auto ro = cli({"exec", "--bind", d.path() + ":/tmp/data", "--sh", "cat /tmp/data/in; echo x > /tmp/data/new"}, s.socket());
  CHECK(ro.out == "host file\n");
  CHECK(ro.err.find("Read-only file system") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(d.path() + "/new"));
  auto rw = cli({"exec", "--bind", d.path() + ":/tmp/data:rw", "--sh", "echo x > /tmp/data/new"}, s.socket());
  CHECK(rw.exit_code == 0);
  CHECK(read_file(d.path() + "/new") == "x\n");
  auto refused = cli({"exec", "--mode", "read-only", "--bind", d.path() + ":/tmp/data:rw", "--", "true"}, s.socket());
  CHECK(refused.exit_code == 125);
  CHECK(refused.err.find("not allowed in read-only mode") != std::string::npos);
  auto bad = cli({"exec", "--bind", d.path(), "--", "true"}, s.socket());
  CHECK(bad.exit_code == 2);
  // Outside /tmp and the workspaces the view is read-only: no mount point can be made there.
  auto nowhere = cli({"exec", "--bind", d.path() + ":/corral-no-such-target", "--", "true"}, s.socket());
  CHECK(nowhere.exit_code == 125);
  CHECK(nowhere.err.find("does not exist") != std::string::npos);
}

TEST_CASE("--cpus caps the rate: a busy loop gets about half a CPU") {
  Server s;
  // Two seconds of wall clock spinning: about 2000 ms of CPU unbounded, about 1000 ms at 0.5.
  auto r = cli({"exec", "--json", "--cpus", "0.5", "--timeout", "30s", "--", kHelper, "spin-wall", "2"}, s.socket());
  CAPTURE(r.out);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("\"cgroup-cpu\"") != std::string::npos);
  auto at = r.out.find("\"user_cpu_ms\":");
  REQUIRE(at != std::string::npos);
  const long user = std::stol(r.out.substr(at + 14));
  at = r.out.find("\"sys_cpu_ms\":");
  const long sys = std::stol(r.out.substr(at + 13));
  CHECK(user + sys < 1500);
  CHECK(user + sys > 500);
}

TEST_CASE("CORRAL_SOCKET names the socket when --socket is not given") {
  Server s;
  TempDir d;
  pid_t pid = spawn_process({kCorral, "exec", "--", "echo", "via-env"}, d.path() + "/out", d.path() + "/err",
                            {"CORRAL_SOCKET=" + s.socket()});
  int status = wait_process(pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(read_file(d.path() + "/out") == "via-env\n");
}

TEST_CASE("absurd isolation values are refused with exit 2 and the limit named") {
  Server s;
  for (std::vector<std::string> bad : std::vector<std::vector<std::string>>{
           {"exec", "--mode", "everything", "--", "true"},
           {"exec", "--net", "maybe", "--", "true"},
           {"exec", "--memory", "1K", "--", "true"},
           {"exec", "--pids", "0", "--", "true"},
           {"exec", "--pids", "-3", "--", "true"},
           {"exec", "--cpus", "0", "--", "true"},
           {"exec", "--cpus", "5000", "--", "true"},
           {"exec", "--cpu-time", "1ms", "--", "true"},
           {"exec", "--max-file-size", "0", "--", "true"}}) {
    CAPTURE(bad);
    auto r = cli(bad, s.socket());
    CHECK(r.exit_code == 2);
    CHECK(r.err.rfind("corral: ", 0) == 0);
  }
  // Paths: relative roots are made absolute by the CLI; missing ones are refused by name.
  auto missing = cli({"exec", "--workspace", "/corral-no-such-dir", "--", "true"}, s.socket());
  CHECK(missing.exit_code == 125);
  CHECK(missing.err.find("/corral-no-such-dir") != std::string::npos);
}
