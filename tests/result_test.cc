// Result<T> and the failures the client library and the worker SDK report with it, without a
// supervisor: the peer is a socket this test holds, so every case can say exactly what the
// other side did (nothing, a frame, a close) and check the kind of failure that follows.
#include <doctest/doctest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <variant>

#include "tests/test_util.h"
#include "worker_proto/client.h"
#include "worker_proto/messages.h"
#include "worker_proto/result.h"
#include "worker_proto/worker_sdk.h"

using namespace corral::proto;
using corral::test::TempDir;

namespace {

// A listening Unix socket in a temp dir: the "supervisor" a Client connects to.
class Listener {
 public:
  Listener() : path_(dir_.path() + "/s.sock") {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strcpy(addr.sun_path, path_.c_str());
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(::listen(fd_, 4) == 0);
  }
  ~Listener() { ::close(fd_); }
  int accept() { return ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC); }
  const std::string& path() const { return path_; }

 private:
  TempDir dir_;
  std::string path_;
  int fd_ = -1;
};

void write_frame(int fd, const Frame& f) { REQUIRE(::write(fd, f.data(), f.size()) == static_cast<ssize_t>(f.size())); }

}  // namespace

TEST_CASE("Result: a value or a failure, never both") {
  Result<int> ok = 42;
  REQUIRE(ok);
  CHECK(ok.ok());
  CHECK(ok.value() == 42);
  CHECK(*ok == 42);
  CHECK_THROWS_AS((void)ok.error(), std::bad_variant_access);

  Result<std::string> text = std::string("abc");
  CHECK(text->size() == 3);

  Result<int> failed = Failure{Failure::Kind::timeout, "too slow"};
  CHECK_FALSE(failed);
  CHECK(failed.error().kind == Failure::Kind::timeout);
  CHECK(failed.error().message == "too slow");
  CHECK_THROWS_AS((void)failed.value(), std::bad_variant_access);

  Result<void> done;
  CHECK(done);
  Result<void> not_done = Failure{Failure::Kind::closed, "gone"};
  REQUIRE_FALSE(not_done);
  CHECK(not_done.error().message == "gone");
}

TEST_CASE("Received is move-only, and a moved one still points into its own payload") {
  static_assert(!std::is_copy_constructible_v<Received>);
  static_assert(!std::is_copy_assignable_v<Received>);
  static_assert(!std::is_copy_constructible_v<ExecReply>);
  Listener l;
  auto c = corral::test::must(Client::connect_raw(l.path()));
  int peer = l.accept();
  REQUIRE(peer >= 0);
  write_frame(peer, make_status_request(9));
  Received first = corral::test::must(c->receive(5000));
  Received second = std::move(first);
  const auto* begin = reinterpret_cast<const std::uint8_t*>(second.payload.data());
  const auto* at = reinterpret_cast<const std::uint8_t*>(second.msg);
  CHECK(at >= begin);
  CHECK(at < begin + second.payload.size());
  CHECK(second.msg->request_id() == 9);
  ::close(peer);
}

TEST_CASE("connect: nobody listening is a failure that names the path") {
  TempDir d;
  const std::string path = d.path() + "/nobody-here.sock";
  auto c = Client::connect(path);
  REQUIRE_FALSE(c);
  CHECK(c.error().kind == Failure::Kind::io);
  CHECK(c.error().message.find(path) != std::string::npos);
  CHECK(c.error().message.find("is `corral serve` running?") != std::string::npos);

  auto raw = Client::connect_raw(path);
  REQUIRE_FALSE(raw);
  CHECK(raw.error().message.find(path) != std::string::npos);

  auto too_long = Client::connect_raw("/" + std::string(200, 'x'));
  REQUIRE_FALSE(too_long);
  CHECK(too_long.error().kind == Failure::Kind::invalid);
  CHECK(too_long.error().message.find("socket path is too long") != std::string::npos);
}

TEST_CASE("receive: a timeout leaves the connection usable; a close is told apart from it") {
  Listener l;
  auto c = corral::test::must(Client::connect_raw(l.path()));
  int peer = l.accept();
  REQUIRE(peer >= 0);

  auto nothing = c->receive(100);
  REQUIRE_FALSE(nothing);
  CHECK(nothing.error().kind == Failure::Kind::timeout);
  CHECK(nothing.error().message == "timed out waiting for the supervisor");

  write_frame(peer, make_status_request(3));  // after the timeout, a frame still arrives
  auto got = c->receive(5000);
  REQUIRE(got);
  CHECK(got->msg->request_id() == 3);

  ::close(peer);
  auto gone = c->receive(5000);
  REQUIRE_FALSE(gone);
  CHECK(gone.error().kind == Failure::Kind::closed);
  CHECK(gone.error().message == "the supervisor closed the connection");
}

TEST_CASE("receive: an oversized or malformed frame is a protocol failure") {
  Listener l;
  auto c = corral::test::must(Client::connect_raw(l.path(), kMinMaxFrame));
  int peer = l.accept();
  REQUIRE(peer >= 0);
  const std::uint8_t huge[4] = {0xff, 0xff, 0xff, 0x7f};
  REQUIRE(::write(peer, huge, 4) == 4);
  auto r = c->receive(5000);
  REQUIRE_FALSE(r);
  CHECK(r.error().kind == Failure::Kind::protocol);
  CHECK(r.error().message.find("-byte limit") != std::string::npos);
  ::close(peer);

  auto c2 = corral::test::must(Client::connect_raw(l.path()));
  peer = l.accept();
  const std::uint8_t junk[8] = {4, 0, 0, 0, 'j', 'u', 'n', 'k'};
  REQUIRE(::write(peer, junk, 8) == 8);
  auto bad = c2->receive(5000);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().kind == Failure::Kind::protocol);
  CHECK(bad.error().message.find("bad frame from the supervisor") != std::string::npos);
  ::close(peer);
}

TEST_CASE("connect: a supervisor that closes instead of answering the hello fails the connect") {
  Listener l;
  int peer = -1;
  std::thread server([&] {
    peer = l.accept();
    char buf[256];
    (void)::read(peer, buf, sizeof buf);  // the hello
    ::close(peer);
  });
  auto c = Client::connect(l.path());
  server.join();
  REQUIRE_FALSE(c);
  CHECK(c.error().kind == Failure::Kind::closed);
  CHECK(c.error().message == "the supervisor closed the connection");
}

TEST_CASE("WorkerConnection: from_env without the variable fails with why") {
  ::unsetenv("CORRAL_WORKER_FD");
  auto conn = WorkerConnection::from_env();
  REQUIRE_FALSE(conn);
  CHECK(conn.error().message.find("CORRAL_WORKER_FD is not set") != std::string::npos);
}

TEST_CASE("WorkerConnection: a host error fails the host call, not serve(); an Error frame fails serve()") {
  int sv[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
  const int supervisor = sv[0];
  WorkerConnection conn(sv[1]);

  auto outside = conn.host_call("too early");
  REQUIRE_FALSE(outside);
  CHECK(outside.error().kind == Failure::Kind::invalid);

  // Everything the "supervisor" says is written up front: the evaluation, the reply to host
  // call 1 (an error), then a protocol Error that ends serve().
  {
    flatbuffers::FlatBufferBuilder fbb;
    auto body = CreateEvaluate(fbb, fbb.CreateVector(reinterpret_cast<const std::uint8_t*>("q"), 1));
    write_frame(supervisor, finish_frame(fbb, CreateMessage(fbb, 1, Body::Evaluate, body.Union())));
  }
  {
    flatbuffers::FlatBufferBuilder fbb;
    auto body = CreateHostReply(fbb, 1, 0, fbb.CreateString("the host says no"));
    write_frame(supervisor, finish_frame(fbb, CreateMessage(fbb, 1, Body::HostReply, body.Union())));
  }
  write_frame(supervisor, make_error(0, ErrorCode::malformed, "stop here"));

  std::optional<Failure> host_failure;
  auto served = conn.serve([&](std::string_view, WorkerConnection& c) {
    auto r = c.host_call("question");
    if (!r) host_failure = r.error();
    return std::string("answered");
  });
  REQUIRE(host_failure);
  CHECK(host_failure->kind == Failure::Kind::refused);
  CHECK(host_failure->message == "the host says no");
  REQUIRE_FALSE(served);
  CHECK(served.error().kind == Failure::Kind::protocol);
  CHECK(served.error().message.find("stop here") != std::string::npos);
  ::close(supervisor);
}

TEST_CASE("WorkerConnection: EOF from the supervisor ends serve() successfully") {
  int sv[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
  WorkerConnection conn(sv[1]);
  ::close(sv[0]);
  auto served = conn.serve([](std::string_view, WorkerConnection&) { return std::string(); });
  CHECK(served);
}
