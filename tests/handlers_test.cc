// The request handlers of supervisor/requests.h, without the binary and without a socket: each
// runs over a FakeSession that keeps the frames it is given, with a real Context (a probed
// SandboxHost, a ScopeRegistry in a private temp root, the pools) and an io_context the test
// drives itself.
#include <doctest/doctest.h>

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <asio/io_context.hpp>
#include <chrono>
#include <future>
#include <set>
#include <thread>

#include "runtime/sandbox.h"
#include "supervisor/requests.h"
#include "supervisor/worker.h"
#include "tests/test_util.h"
#include "worker_proto/messages.h"

using namespace corral;
using namespace corral::supervisor;
using namespace std::chrono_literals;
using corral::test::TempDir;

namespace {

// A verified copy of a frame the test builds, as the transport would hand it over.
struct Incoming {
  explicit Incoming(const proto::Frame& frame) : payload(frame.begin() + proto::kHeaderBytes, frame.end()) {
    proto::DecodeError err;
    msg = proto::verify_payload(payload, proto::kDefaultMaxFrame, err);
    REQUIRE(msg != nullptr);
  }
  std::vector<std::uint8_t> payload;
  const proto::Message* msg = nullptr;
};

class FakeSession : public Session, public std::enable_shared_from_this<FakeSession> {
 public:
  explicit FakeSession(Context& ctx, asio::io_context& io, uid_t uid = ::geteuid())
      : ctx_(ctx), io_(io), peer_{uid, ::getegid(), ::getpid(), {}}, scope_(ctx.scopes->make_implicit(uid)) {}

  Context& ctx() override { return ctx_; }
  asio::io_context& io() override { return io_; }
  const Peer& peer() const override { return peer_; }
  const std::shared_ptr<Scope>& implicit_scope() const override { return scope_; }
  std::weak_ptr<Session> weak() override { return std::weak_ptr<FakeSession>(shared_from_this()); }
  void queue(proto::Frame frame, std::function<void()> = {}) override { frames.push_back(std::move(frame)); }
  void reserve(std::uint64_t id, std::uint64_t bytes) override { reserved[id] += bytes; }
  void release(std::uint64_t id) override { reserved.erase(id); }
  void hold(std::uint64_t bytes) override { held += bytes; }
  void unhold(std::uint64_t bytes) override { held -= bytes; }
  bool congested() const override { return false; }
  void wake_reader() override {}
  bool closed() const override { return false; }
  bool in_flight(std::uint64_t id) const override { return busy.count(id) > 0 || exec.running(id); }

  // The body of the last frame queued for `id`, or null.
  const proto::Message* last(std::uint64_t id) {
    for (auto it = frames.rbegin(); it != frames.rend(); ++it) {
      const auto* m = proto::GetMessage(it->data() + proto::kHeaderBytes);
      if (m->request_id() == id) return m;
    }
    return nullptr;
  }
  // What the OutputChunks for `id` carried on `stream`, in order.
  std::string output(std::uint64_t id, proto::Stream stream) {
    std::string out;
    for (const auto& f : frames) {
      const auto* m = proto::GetMessage(f.data() + proto::kHeaderBytes);
      const auto* chunk = m->body_as_OutputChunk();
      if (m->request_id() == id && chunk && chunk->stream() == stream && chunk->data())
        out.append(chunk->data()->begin(), chunk->data()->end());
    }
    return out;
  }
  proto::ErrorCode error_code(std::uint64_t id) {
    const proto::Message* m = last(id);
    REQUIRE(m != nullptr);
    REQUIRE(m->body_type() == proto::Body::Error);
    return m->body_as_Error()->code();
  }

  std::vector<proto::Frame> frames;
  std::map<std::uint64_t, std::uint64_t> reserved;
  std::uint64_t held = 0;
  std::set<std::uint64_t> busy;  // ids the test says are in flight elsewhere
  ExecRequests exec{*this};
  FileRequests files{*this};
  ScopeRequests scopes{*this};
  BackgroundRequests background{*this};
  WorkerRequests workers{*this};

 private:
  Context& ctx_;
  asio::io_context& io_;
  Peer peer_;
  std::shared_ptr<Scope> scope_;
};

// A Context as serve() builds it, on a private temp root.
struct World {
  World() {
    ::chmod(root.path().c_str(), 0711);  // the sandbox uid walks through to its scope's dir
    ctx.options.socket_path = root.path() + "/s.sock";
    ctx.blocking = std::make_unique<BlockingPool>(2);
    ctx.launcher = std::make_unique<BlockingPool>(2);
    ctx.teardown = std::make_unique<BlockingPool>(1);
    HostOptions o;
    o.temp_root = root.path();
    ctx.host = SandboxHost::create(o);  // probes every layer: tens of ms
    ctx.scopes = std::make_unique<ScopeRegistry>(root.path(), ctx.host.get(), ctx.teardown->submitter());
    ctx.background = std::make_unique<BackgroundTable>(io);
    session = std::make_shared<FakeSession>(ctx, io);
  }
  ~World() {
    session.reset();
    ctx.workers.clear();
    ctx.background.reset();
    ctx.scopes.reset();
    io.run_for(2s);  // what the sessions' commands still had to say
  }
  // Runs the loop until `pred` holds (or 20 s pass).
  bool run_until(const std::function<bool()>& pred) {
    const auto end = std::chrono::steady_clock::now() + 20s;
    while (!pred() && std::chrono::steady_clock::now() < end) {
      io.restart();
      io.run_for(10ms);
    }
    return pred();
  }

  TempDir root;
  asio::io_context io;
  Context ctx;
  std::shared_ptr<FakeSession> session;
};

proto::ExecArgs run(std::vector<std::string> argv) {
  proto::ExecArgs a;
  a.argv = std::move(argv);
  return a;
}

}  // namespace

TEST_CASE("ExecRequests: refusals name the rule, and nothing is launched") {
  World w;
  FakeSession& s = *w.session;
  w.ctx.options.max_in_flight = 1;
  Incoming zero(proto::make_exec(0, run({"/bin/true"})));
  s.exec.on_exec(*zero.msg);
  CHECK(s.error_code(0) == proto::ErrorCode::invalid_request);

  s.busy.insert(7);  // an evaluation of this session holds id 7
  Incoming dup(proto::make_exec(7, run({"/bin/true"})));
  s.exec.on_exec(*dup.msg);
  CHECK(s.error_code(7) == proto::ErrorCode::duplicate_request_id);

  proto::ExecArgs unknown = run({"/bin/true"});
  unknown.scope = "s999";
  s.exec.on_exec(*Incoming(proto::make_exec(8, unknown)).msg);
  CHECK(s.error_code(8) == proto::ErrorCode::not_found);

  proto::ExecArgs both = run({"/bin/true"});
  both.background = true;
  both.authorize = true;
  s.exec.on_exec(*Incoming(proto::make_exec(9, both)).msg);
  CHECK(s.error_code(9) == proto::ErrorCode::invalid_request);

  proto::ExecArgs over = run({"/bin/true"});
  over.memory_bytes = 1024;  // neither 0 nor in range
  s.exec.on_exec(*Incoming(proto::make_exec(10, over)).msg);
  CHECK(s.error_code(10) == proto::ErrorCode::invalid_request);

  s.exec.on_authorization(*Incoming(proto::make_authorization(11, true)).msg);
  CHECK(s.error_code(11) == proto::ErrorCode::unknown_request_id);
  CHECK_FALSE(s.exec.on_cancel(*Incoming(proto::make_cancel(12, false)).msg));
  CHECK(w.ctx.launches == 0);
  CHECK(w.ctx.running_commands == 0);
  CHECK(s.reserved.empty());
}

TEST_CASE("ExecRequests: a command streams its output, then its result; the reply's room is held until then") {
  World w;
  FakeSession& s = *w.session;
  proto::ExecArgs a;
  a.shell = "echo out; echo err >&2";
  s.exec.on_exec(*Incoming(proto::make_exec(1, a)).msg);
  REQUIRE(s.frames.empty());
  CHECK(s.reserved.at(1) == limits::kDefaultMaxOutput + kReplyOverheadBytes);
  CHECK(s.exec.running(1));
  CHECK(w.ctx.running_commands == 1);
  REQUIRE(w.run_until([&] { return s.last(1) && s.last(1)->body_type() == proto::Body::ExecResult; }));
  const proto::ExecResult* r = s.last(1)->body_as_ExecResult();
  CAPTURE(proto::str(r->message()));
  CHECK(r->status() == proto::ExitStatus::exited);
  CHECK(s.output(1, proto::Stream::out) == "out\n");
  CHECK(s.output(1, proto::Stream::err) == "err\n");
  CHECK(s.reserved.empty());
  CHECK_FALSE(s.exec.running(1));
  CHECK(w.ctx.running_commands == 0);
}

TEST_CASE("ExecRequests: a command whose session is gone is still counted down, and touches nothing of it") {
  World w;
  {
    proto::ExecArgs a;
    a.argv = {"/bin/sleep", "30"};
    w.session->exec.on_exec(*Incoming(proto::make_exec(1, a)).msg);
    REQUIRE(w.ctx.running_commands == 1);
  }
  w.session.reset();  // the Execution is terminated with its handler
  CHECK(w.run_until([&] { return w.ctx.running_commands == 0; }));
}

TEST_CASE("FileRequests: served in order off the loop, each holding its room until its reply") {
  World w;
  FakeSession& s = *w.session;
  auto temp = s.implicit_scope()->temp_dir();
  REQUIRE(temp.ok());
  proto::FileArgs write;
  write.path = "/tmp/f";  // as a command sees it: the scope's temp dir is its /tmp
  write.data = "first";
  proto::FileArgs read;
  read.path = "/tmp/f";
  Incoming wr(proto::make_write(1, write));
  Incoming rd(proto::make_read(2, read));
  s.files.on_file(*wr.msg, wr.payload);
  s.files.on_file(*rd.msg, rd.payload);
  CHECK(s.held > 0);
  REQUIRE(w.run_until([&] { return s.last(2) != nullptr; }));
  if (const auto* e = s.last(1)->body_as_Error()) FAIL_CHECK(proto::str(e->message()));
  REQUIRE(s.last(1)->body_type() == proto::Body::WriteResult);
  REQUIRE(s.last(2)->body_type() == proto::Body::ReadResult);
  const auto* data = s.last(2)->body_as_ReadResult()->data();
  REQUIRE(data);
  CHECK(std::string(data->begin(), data->end()) == "first");  // the read came after the write
  CHECK(corral::test::read_file(*temp + "/f") == "first");
  CHECK(s.held == 0);
  // Closing drops what waits and gives its room back.
  s.files.on_file(*wr.msg, wr.payload);
  s.files.on_file(*rd.msg, rd.payload);
  s.files.close();
  CHECK(w.run_until([&] { return s.held == 0; }));
}

TEST_CASE("ScopeRegistry: a uid holds at most kMaxScopesPerUid open named scopes; others' and closed ones do not count") {
  World w;
  std::vector<std::shared_ptr<supervisor::Scope>> mine;
  for (std::size_t i = 0; i < supervisor::ScopeRegistry::kMaxScopesPerUid; ++i) {
    auto made = w.ctx.scopes->create(4242, nullptr, true, Policy{});
    REQUIRE(made.ok());
    mine.push_back(*made);
  }
  auto over = w.ctx.scopes->create(4242, nullptr, true, Policy{});
  REQUIRE_FALSE(over.ok());
  CHECK(over.status().message().find("the limit is 256") != std::string::npos);
  CHECK(w.ctx.scopes->create(4243, nullptr, true, Policy{}).ok());  // another uid's count is its own
  w.ctx.scopes->close(mine.front());
  CHECK(w.ctx.scopes->create(4242, nullptr, true, Policy{}).ok());  // a closed one frees its place
  for (auto& sc : mine) w.ctx.scopes->close(sc);
}

TEST_CASE("ScopeRequests and BackgroundRequests: another uid's scope is refused; unknown ids are not found") {
  World w;
  FakeSession& s = *w.session;
  auto theirs = w.ctx.scopes->create(12345, nullptr, false, Policy{}).value();
  auto close = Incoming(proto::make_scope_close(1, theirs->id()));
  auto other = std::make_shared<FakeSession>(w.ctx, w.io, 23456);
  other->scopes.on_close(*close.msg);
  CHECK(other->error_code(1) == proto::ErrorCode::permission_denied);
  CHECK_FALSE(theirs->closed());
  other->scopes.on_list(*Incoming(proto::make_scope_list(2)).msg);
  REQUIRE(other->last(2)->body_type() == proto::Body::ScopeList);
  const auto* listed = other->last(2)->body_as_ScopeList()->scopes();
  CHECK((!listed || listed->size() == 0));
  s.scopes.on_close(*close.msg);  // root may
  CHECK(theirs->closed());

  s.background.on_poll(*Incoming(proto::make_poll(3, "b404")).msg);
  CHECK(s.error_code(3) == proto::ErrorCode::not_found);
}

TEST_CASE("WorkerRequests: no worker, no channel; a cancel of something else is not taken") {
  World w;
  FakeSession& s = *w.session;
  proto::WorkerEvalArgs e;
  e.name = "nobody-here";
  e.request = "1+1";
  s.workers.on_eval(*Incoming(proto::make_worker_eval(1, e)).msg);
  CHECK(s.error_code(1) == proto::ErrorCode::not_found);
  CHECK(s.reserved.empty());
  CHECK_FALSE(s.workers.evaluating(1));
  s.workers.on_host_reply(*Incoming(proto::make_host_reply(2, 1, "x")).msg);
  CHECK(s.error_code(2) == proto::ErrorCode::channel_closed);
  CHECK_FALSE(s.workers.on_cancel(3));
  CHECK_FALSE(s.workers.holds_reading());
}

TEST_CASE("WorkerRequests: a start's checks run off the loop, its name held until they end") {
  World w;
  FakeSession& s = *w.session;
  // Both launcher threads busy: whatever a start hands to the pool waits there.
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  for (int i = 0; i < 2; ++i) w.ctx.launcher->submit([released] { released.wait(); });
  proto::WorkerStartArgs a;
  a.name = "w";
  a.argv = {"/nonexistent/worker-program"};
  s.workers.on_start(*Incoming(proto::make_worker_start(1, a)).msg);
  w.io.restart();
  w.io.run_for(100ms);
  // The program's check (a descriptor walk with the peer's credentials) has not run on the
  // loop: no answer yet, though the loop is free.
  CHECK(s.last(1) == nullptr);
  // The name is held meanwhile, and so is the scope's room.
  s.workers.on_start(*Incoming(proto::make_worker_start(2, a)).msg);
  CHECK(s.error_code(2) == proto::ErrorCode::invalid_request);
  CHECK(w.ctx.starting_workers.size() == 1);
  const auto scope = w.ctx.scopes->default_for(s.peer().uid);  // where an unnamed start goes
  CHECK(scope->worker_count == 1);
  release.set_value();
  REQUIRE(w.run_until([&] { return s.last(1) != nullptr; }));
  CHECK(s.error_code(1) == proto::ErrorCode::invalid_request);
  CHECK(proto::str(s.last(1)->body_as_Error()->message()).find("the worker program") != std::string::npos);
  CHECK(w.ctx.starting_workers.empty());
  CHECK(scope->worker_count == 0);
  CHECK(w.ctx.workers.empty());
}

TEST_CASE("BlockingPool: a background pool's threads run niced, the others not") {
  auto niceness_in = [](BlockingPool& pool) {
    std::promise<int> seen;
    pool.submit([&seen] {
      errno = 0;
      seen.set_value(::getpriority(PRIO_PROCESS, static_cast<id_t>(::gettid())));
    });
    return seen.get_future().get();
  };
  const int own = ::getpriority(PRIO_PROCESS, 0);
  BlockingPool background(1, 10);
  BlockingPool launcher(1);
  if (own <= 10) CHECK(niceness_in(background) == 10);  // setpriority sets, it does not add
  CHECK(niceness_in(launcher) == own);
}

TEST_CASE("Scope: its temp dir is made once, whichever threads ask first; the others remove theirs") {
  TempDir root;
  Scope scope("s-race", ::getuid(), root.path(), nullptr);
  std::vector<std::thread> askers;
  std::vector<std::string> seen(8);
  for (std::size_t i = 0; i < seen.size(); ++i)
    askers.emplace_back([&, i] {
      auto dir = scope.temp_dir();
      if (dir.ok()) seen[i] = *dir;
    });
  for (auto& t : askers) t.join();
  REQUIRE(!seen[0].empty());
  for (const auto& s : seen) CHECK(s == seen[0]);
  // The losers removed the dirs they made: one is left.
  std::size_t dirs = 0;
  for (const auto& e : std::filesystem::directory_iterator(root.path())) dirs += e.is_directory();
  CHECK(dirs == 1);
  CHECK(scope.temp_dir_if_any() == seen[0]);
  CHECK(scope.network_namespace() == -1);  // no host: none to share
}
