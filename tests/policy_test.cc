// Policy options end to end that the escape suite does not cover: --bind in each direction,
// --cpus, the socket path from CORRAL_SOCKET, and absurd isolation values.
#include <doctest/doctest.h>

#include <set>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "tests/test_util.h"
#include "worker_proto/messages.h"

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
  CHECK(bad.exit_code == 125);
  // corral makes no mount point directly in / (the root cannot be layered).
  auto nowhere = cli({"exec", "--bind", d.path() + ":/corral-no-such-target", "--", "true"}, s.socket());
  CHECK(nowhere.exit_code == 125);
  CHECK(nowhere.err.find("/corral-no-such-target does not exist, and corral makes no mount point directly in /") !=
        std::string::npos);
  CHECK_FALSE(std::filesystem::exists("/corral-no-such-target"));
}

// The names a directory holds, sorted, with "->target" for symlinks.
std::string listing(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    names.insert(e.path().filename().string() +
                 (e.is_symlink() ? "->" + std::filesystem::read_symlink(e.path()).string() : std::string()));
  std::string out;
  for (const auto& n : names) out += n + "\n";
  return out;
}

TEST_CASE("--bind never touches the host: a missing target is made in the sandbox's own view") {
  Server s;
  TempDir d;
  ::chmod(d.path().c_str(), 0755);
  std::filesystem::create_directory(d.path() + "/src");
  std::ofstream(d.path() + "/src/f") << "bound\n";
  ::chmod((d.path() + "/src").c_str(), 0755);
  ::chmod((d.path() + "/src/f").c_str(), 0644);
  // A parent that exists on the host, with entries of every kind (Debian's /usr/local has
  // directories and the man -> share/man symlink), and a child that does not.
  const std::string parent = "/usr/local";
  const std::string missing = parent + "/corral-bind-" + std::to_string(::getpid());
  REQUIRE_FALSE(std::filesystem::exists(missing));
  const std::string before = listing(parent);

  for (const char* mode : {"read-only", "workspace-write", "danger-full-access"}) {
    CAPTURE(mode);
    auto r = cli({"exec", "--mode", mode, "--bind", d.path() + "/src:" + missing + "/data:ro", "--sh",
                  "cat " + missing + "/data/f; for e in " + parent + "/*; do if [ -L \"$e\" ]; then echo \"${e##*/}->$(readlink \"$e\")\"; "
                  "else echo \"${e##*/}\"; fi; done; touch " + parent + "/corral-new 2>&1 || echo refused"},
                 s.socket());
    CHECK(r.exit_code == 0);
    CHECK(r.err == "");
    // The bind is there; the parent shows its own entries (and links) unchanged, plus the new
    // mount point; a new name directly in the parent cannot be made (the layer is read-only).
    std::set<std::string> expected;
    std::istringstream host(before);
    for (std::string line; std::getline(host, line);)
      if (line[0] != '.') expected.insert(line);  // the shell's * skips dot names
    expected.insert(missing.substr(parent.size() + 1));
    std::vector<std::string> lines;
    std::istringstream got(r.out);
    for (std::string line; std::getline(got, line);) lines.push_back(line);
    REQUIRE(lines.size() >= 3);
    CHECK(lines.front() == "bound");
    CHECK(lines.back() == "refused");
    CHECK(lines[lines.size() - 2].find("Read-only file system") != std::string::npos);
    CHECK(std::set<std::string>(lines.begin() + 1, lines.end() - 2) == expected);
    // Nothing changed on the host.
    CHECK_FALSE(std::filesystem::exists(missing));
    CHECK_FALSE(std::filesystem::exists(parent + "/corral-new"));
    CHECK(listing(parent) == before);
  }
  // A file onto a missing file name, and an existing target: both work the same way.
  auto file = cli({"exec", "--bind", d.path() + "/src/f:" + missing + "/f.txt", "--", "/bin/cat", missing + "/f.txt"}, s.socket());
  CHECK(file.out == "bound\n");
  CHECK(file.exit_code == 0);
  auto existing = cli({"exec", "--bind", d.path() + "/src:/mnt", "--", "/bin/cat", "/mnt/f"}, s.socket());
  CHECK(existing.out == "bound\n");
  CHECK_FALSE(std::filesystem::exists(missing));
  // Under /tmp the mount point is made in the scope's own temp dir.
  auto tmp = cli({"exec", "--json", "--bind", d.path() + "/src:/tmp/a/b", "--", "/bin/cat", "/tmp/a/b/f"}, s.socket());
  CHECK(tmp.out.find("\"stdout\":\"bound\\n\"") != std::string::npos);
}

TEST_CASE("--bind targets that would hide what the sandbox needs are refused, saying why") {
  Server s;
  TempDir d;
  ::chmod(d.path().c_str(), 0755);
  std::filesystem::create_directory(d.path() + "/ws");
  struct Refused {
    std::string target, why;
  };
  for (const Refused& r : std::vector<Refused>{
           {"/", "it would hide the whole view"},
           {"/proc", "/proc is the command's own PID namespace's"},
           {"/proc/self", "/proc is the command's own PID namespace's"},
           {"/dev", "/dev holds the sandbox's own device nodes"},
           {"/dev/shm", "/dev holds the sandbox's own device nodes"},
           {"/tmp", "/tmp is the scope's temp dir"},
           {"//tmp/./", "/tmp is the scope's temp dir"},
           {d.path() + "/ws", "it would hide the workspace root " + d.path() + "/ws"},
           {d.path(), "it would hide the workspace root " + d.path() + "/ws"},
       }) {
    CAPTURE(r.target);
    auto run = cli({"exec", "--workspace", d.path() + "/ws", "--bind", d.path() + "/ws:" + r.target, "--", "true"}, s.socket());
    CHECK(run.exit_code == 125);
    CHECK(run.err.find("is refused: " + r.why) != std::string::npos);
  }
  // A missing target inside a writable workspace root is refused rather than made on the host.
  auto inside = cli({"exec", "--workspace", d.path() + "/ws", "--bind", d.path() + "/ws:" + d.path() + "/ws/sub", "--", "true"},
                    s.socket());
  CHECK(inside.exit_code == 125);
  CHECK(inside.err.find("does not exist inside the writable workspace root " + d.path() + "/ws") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(d.path() + "/ws/sub"));
  // The server is still serving.
  CHECK(cli({"exec", "--", "true"}, s.socket()).exit_code == 0);
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
           {"exec", "--pids", "1000001", "--", "true"},
           {"exec", "--pids", "-3", "--", "true"},
           {"exec", "--cpus", "0", "--", "true"},
           {"exec", "--cpus", "5000", "--", "true"},
           {"exec", "--cpu-time", "1ms", "--", "true"},
           {"exec", "--max-file-size", "0", "--", "true"}}) {
    CAPTURE(bad);
    auto r = cli(bad, s.socket());
    CHECK(r.exit_code == 125);
    CHECK(r.err.rfind("corral: ", 0) == 0);
  }
  // Paths: relative roots are made absolute by the CLI; missing ones are refused by name.
  auto missing = cli({"exec", "--workspace", "/corral-no-such-dir", "--", "true"}, s.socket());
  CHECK(missing.exit_code == 125);
  CHECK(missing.err.find("/corral-no-such-dir") != std::string::npos);
}

namespace {

// A stand-in supervisor on a socket of its own: answers the CLI's hello, keeps the first
// request's payload (verified) and closes. What the CLI put on the wire, exactly.
class Capture {
 public:
  Capture() {
    socket_ = dir_.path() + "/capture.sock";
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof a.sun_path, "%s", socket_.c_str());
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(fd_, 4) == 0);
  }
  ~Capture() { ::close(fd_); }
  const std::string& socket() const { return socket_; }

  // Runs the CLI with `args` against this socket; the payload of its first request.
  std::vector<std::uint8_t> request_of(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {kCorral};
    argv.insert(argv.end(), args.begin(), args.end());
    const bool nested = args[0] == "scope" || args[0] == "worker";
    argv.insert(argv.begin() + (nested ? 3 : 2), {"--socket", socket_});
    pid_t pid = spawn_process(argv, dir_.path() + "/out", dir_.path() + "/err");
    std::vector<std::uint8_t> request;
    pollfd p{fd_, POLLIN, 0};
    REQUIRE(::poll(&p, 1, 20'000) == 1);
    int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    REQUIRE(c >= 0);
    auto read_payload = [&](std::vector<std::uint8_t>& out) {
      std::uint8_t header[4];
      if (!read_exactly(c, header, 4)) return false;
      out.resize(proto::read_length(header));
      return read_exactly(c, out.data(), out.size());
    };
    std::vector<std::uint8_t> hello;
    REQUIRE(read_payload(hello));
    auto reply = proto::make_hello_reply("capture", {}, proto::kDefaultMaxFrame);
    REQUIRE(::write(c, reply.data(), reply.size()) == static_cast<ssize_t>(reply.size()));
    REQUIRE(read_payload(request));
    ::close(c);  // the CLI reports the lost connection; its exit status is not the point
    wait_process(pid);
    return request;
  }

 private:
  static bool read_exactly(int fd, std::uint8_t* p, std::size_t n) {
    while (n) {
      pollfd pf{fd, POLLIN, 0};
      if (::poll(&pf, 1, 20'000) != 1) return false;
      ssize_t k = ::read(fd, p, n);
      if (k <= 0) return false;
      p += k;
      n -= static_cast<std::size_t>(k);
    }
    return true;
  }
  TempDir dir_;
  std::string socket_;
  int fd_ = -1;
};

const proto::Message* verified(const std::vector<std::uint8_t>& payload) {
  proto::DecodeError error;
  const proto::Message* m = proto::verify_payload(payload, proto::kDefaultMaxFrame, error);
  REQUIRE(m != nullptr);
  return m;
}

}  // namespace

TEST_CASE("the CLI sends mode and network absent unless a flag was given") {
  Capture cap;
  {
    auto payload = cap.request_of({"exec", "--", "true"});
    const auto* req = verified(payload)->body_as_ExecRequest();
    REQUIRE(req);
    CHECK_FALSE(req->mode().has_value());
    CHECK_FALSE(req->network().has_value());
  }
  {
    // The values that used to be the wire's defaults are sent, and mean themselves.
    auto payload = cap.request_of({"exec", "--mode", "workspace-write", "--net", "denied", "--", "true"});
    const auto* req = verified(payload)->body_as_ExecRequest();
    REQUIRE(req);
    REQUIRE(req->mode().has_value());
    CHECK(*req->mode() == proto::Mode::workspace_write);
    REQUIRE(req->network().has_value());
    CHECK(*req->network() == proto::Network::denied);
  }
  for (const char* tool : {"read", "write", "ls"}) {
    CAPTURE(tool);
    auto payload = cap.request_of({tool, "/srv/x"});
    const proto::Message* m = verified(payload);
    auto mode = m->body_type() == proto::Body::ReadRequest    ? m->body_as_ReadRequest()->mode()
                : m->body_type() == proto::Body::WriteRequest ? m->body_as_WriteRequest()->mode()
                                                              : m->body_as_ListRequest()->mode();
    CHECK_FALSE(mode.has_value());
  }
  {
    auto payload = cap.request_of({"scope", "create"});
    const auto* req = verified(payload)->body_as_ScopeCreate();
    REQUIRE(req);
    CHECK_FALSE(req->mode().has_value());
    CHECK_FALSE(req->network().has_value());
  }
  {
    auto payload = cap.request_of({"worker", "start", "w", "--python"});
    const auto* req = verified(payload)->body_as_WorkerStart();
    REQUIRE(req);
    CHECK_FALSE(req->mode().has_value());
    CHECK_FALSE(req->network().has_value());
    auto explicit_payload = cap.request_of({"worker", "start", "w", "--python", "--mode", "read-only", "--net", "allowed"});
    const auto* e = verified(explicit_payload)->body_as_WorkerStart();
    REQUIRE(e);
    CHECK(e->mode() == proto::Mode::read_only);
    CHECK(e->network() == proto::Network::allowed);
  }
}
