// The worker side of worker channels, without the supervisor: each test makes a socketpair,
// starts a worker with its end as fd 3 (CORRAL_WORKER_FD=3) and plays the supervisor with
// the C++ codec. Workers: tests/echo_worker.cc (worker_proto/worker_sdk.h) and the shipped
// Python evaluation worker (worker_proto/python/), run with /usr/bin/python3.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tests/test_util.h"
#include "worker_proto/codec.h"

using namespace corral::proto;
using corral::test::read_file;
using corral::test::TempDir;

namespace {

const std::string kEchoWorker = CORRAL_ECHO_WORKER;
const std::string kPythonDir = CORRAL_PYTHON_DIR;
const std::string kPythonWorker = CORRAL_PYTHON_WORKER;
const std::string kPython = "/usr/bin/python3";  // Debian's, which sees python3-flatbuffers

// --- supervisor-side frames --------------------------------------------------------------

flatbuffers::Offset<flatbuffers::Vector<std::uint8_t>> bytes(flatbuffers::FlatBufferBuilder& fbb,
                                                             std::string_view data) {
  return fbb.CreateVector(reinterpret_cast<const std::uint8_t*>(data.data()), data.size());
}

Frame evaluate_frame(std::uint64_t id, std::string_view data) {
  flatbuffers::FlatBufferBuilder fbb;
  auto body = CreateEvaluate(fbb, bytes(fbb, data));
  return finish_frame(fbb, CreateMessage(fbb, id, Body::Evaluate, body.Union()));
}

Frame host_reply_frame(std::uint64_t id, std::uint64_t call_id, std::string_view data,
                       std::string_view error = {}) {
  flatbuffers::FlatBufferBuilder fbb;
  auto d = bytes(fbb, data);
  auto e = error.empty() ? 0 : fbb.CreateString(error);
  auto body = CreateHostReply(fbb, call_id, d, e);
  return finish_frame(fbb, CreateMessage(fbb, id, Body::HostReply, body.Union()));
}

Frame error_frame(ErrorCode code, std::string_view message) {
  flatbuffers::FlatBufferBuilder fbb;
  auto body = CreateError(fbb, code, fbb.CreateString(message));
  return finish_frame(fbb, CreateMessage(fbb, 0, Body::Error, body.Union()));
}

std::string text(const flatbuffers::Vector<std::uint8_t>* v) {
  return v ? std::string(reinterpret_cast<const char*>(v->data()), v->size()) : std::string();
}

// --- a worker process and the supervisor's end of its channel ----------------------------

struct Incoming {
  enum Kind { frame, eof, timeout, bad } kind = bad;
  std::vector<std::uint8_t> payload;
  const Message* msg = nullptr;  // points into payload
  std::string error;
};

class WorkerProcess {
 public:
  explicit WorkerProcess(const std::vector<std::string>& argv, bool with_fd_env = true) {
    int sv[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    // The worker's end must not already be fd 3 (dup2 onto itself would keep CLOEXEC).
    int theirs = ::fcntl(sv[1], F_DUPFD_CLOEXEC, 10);
    ::close(sv[1]);
    fd_ = sv[0];

    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, out_path().c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, err_path().c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, theirs, 3);
    std::vector<std::string> env_store;
    for (char** e = environ; *e; ++e)
      if (std::strncmp(*e, "CORRAL_WORKER_FD=", 17) != 0) env_store.emplace_back(*e);
    if (with_fd_env) env_store.emplace_back("CORRAL_WORKER_FD=3");
    std::vector<char*> env, args;
    for (auto& e : env_store) env.push_back(e.data());
    env.push_back(nullptr);
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    int rc = posix_spawn(&pid_, argv[0].c_str(), &fa, nullptr, args.data(), env.data());
    posix_spawn_file_actions_destroy(&fa);
    ::close(theirs);
    REQUIRE_MESSAGE(rc == 0, "posix_spawn " << argv[0] << ": " << std::strerror(rc));
  }

  ~WorkerProcess() {
    if (fd_ >= 0) ::close(fd_);
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }

  void send(const Frame& frame) { send_raw(frame.data(), frame.size()); }
  void send_raw(const std::uint8_t* p, std::size_t n) {
    while (n > 0) {
      ssize_t w = ::send(fd_, p, n, MSG_NOSIGNAL);
      if (w < 0 && errno == EINTR) continue;
      REQUIRE_MESSAGE(w > 0, "send to the worker: " << std::strerror(errno) << "; worker log: " << err());
      p += w;
      n -= static_cast<std::size_t>(w);
    }
  }

  // The next frame from the worker, verified with the codec's one gate.
  Incoming recv(std::chrono::milliseconds limit = std::chrono::seconds(30)) {
    Incoming r;
    std::uint8_t header[kHeaderBytes];
    auto deadline = std::chrono::steady_clock::now() + limit;
    if (!read_exact(header, kHeaderBytes, deadline, r, true)) return r;
    std::uint32_t n = read_length(header);
    if (n > kDefaultMaxFrame) {
      r.kind = Incoming::bad;
      r.error = "frame of " + std::to_string(n) + " bytes";
      return r;
    }
    r.payload.resize(n);
    if (!read_exact(r.payload.data(), n, deadline, r, false)) return r;
    DecodeError de;
    r.msg = verify_payload(r.payload, kDefaultMaxFrame, de);
    r.kind = r.msg ? Incoming::frame : Incoming::bad;
    r.error = de.message;
    return r;
  }

  // Expects a frame of type `body` for evaluation `id`.
  Incoming expect(std::uint64_t id, Body body) {
    Incoming r = recv();
    REQUIRE_MESSAGE(r.kind == Incoming::frame, "no frame from the worker (" << r.error
                                                   << "); worker log: " << err());
    CHECK(r.msg->request_id() == id);
    REQUIRE_MESSAGE(r.msg->body_type() == body, "got " << body_name(r.msg->body_type()) << ", expected "
                                                       << body_name(body));
    return r;
  }

  // One evaluation without host calls: Evaluate in, EvalReply out.
  std::string evaluate(std::uint64_t id, std::string_view request) {
    send(evaluate_frame(id, request));
    Incoming r = expect(id, Body::EvalReply);
    return text(r.msg->body_as_EvalReply()->data());
  }

  void close_channel() {
    ::close(fd_);
    fd_ = -1;
  }

  // The worker's wait status (-1 if it did not end within `limit`; it is then killed).
  int wait(std::chrono::milliseconds limit = std::chrono::seconds(30)) {
    int status = corral::test::wait_process(pid_, limit);
    pid_ = -1;
    return status;
  }

  std::string out() const { return read_file(out_path()); }
  std::string err() const { return read_file(err_path()); }

 private:
  bool read_exact(std::uint8_t* p, std::size_t n, std::chrono::steady_clock::time_point deadline,
                  Incoming& r, bool eof_ok) {
    std::size_t got = 0;
    while (got < n) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      pollfd pfd{fd_, POLLIN, 0};
      int pr = ::poll(&pfd, 1, static_cast<int>(std::max<std::int64_t>(0, left.count())));
      if (pr == 0) {
        r.kind = Incoming::timeout;
        r.error = "timed out waiting for the worker";
        return false;
      }
      if (pr < 0) {
        if (errno == EINTR) continue;
        r.kind = Incoming::bad;
        r.error = std::strerror(errno);
        return false;
      }
      ssize_t k = ::read(fd_, p + got, n - got);
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) {
        r.kind = (k == 0 && got == 0 && eof_ok) ? Incoming::eof : Incoming::bad;
        r.error = k == 0 ? "EOF" : std::strerror(errno);
        return false;
      }
      got += static_cast<std::size_t>(k);
    }
    return true;
  }

  std::string out_path() const { return dir_.path() + "/stdout.log"; }
  std::string err_path() const { return dir_.path() + "/stderr.log"; }

  TempDir dir_;
  int fd_ = -1;
  pid_t pid_ = -1;
};

bool exited_with(int status, int code) { return status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == code; }

// --- JSON, just enough for the Python worker's flat replies ------------------------------

std::string json_quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string code_request(std::string_view code) { return "{\"code\": " + json_quote(code) + "}"; }

void append_utf8(std::string& out, unsigned cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// The value of "key" in a flat JSON object as Python's json.dumps writes it: a string
// (unescaped), "true"/"false", or nullopt for null (or a missing key).
std::optional<std::string> json_field(const std::string& json, const std::string& key) {
  std::size_t pos = json.find(json_quote(key) + ": ");
  if (pos == std::string::npos) return std::nullopt;
  pos += key.size() + 4;
  if (json.compare(pos, 4, "null") == 0) return std::nullopt;
  if (json.compare(pos, 4, "true") == 0) return "true";
  if (json.compare(pos, 5, "false") == 0) return "false";
  if (json[pos] != '"') return std::nullopt;
  std::string out;
  for (++pos; pos < json.size() && json[pos] != '"'; ++pos) {
    if (json[pos] != '\\') {
      out += json[pos];
      continue;
    }
    char c = json[++pos];
    switch (c) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'u': {
        unsigned cp = std::stoul(json.substr(pos + 1, 4), nullptr, 16);
        pos += 4;
        if (cp >= 0xD800 && cp < 0xDC00 && json.compare(pos + 1, 2, "\\u") == 0) {
          unsigned low = std::stoul(json.substr(pos + 3, 4), nullptr, 16);
          cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          pos += 6;
        }
        append_utf8(out, cp);
        break;
      }
      default: out += c;  // \" \\ \/
    }
  }
  return out;
}

// --- the Python worker ---------------------------------------------------------------------

// Never skipped: without Debian's flatbuffers runtime the Python worker cannot run at all.
void require_python_runtime() {
  static int status = [] {
    pid_t pid = corral::test::spawn_process({kPython, "-I", "-c", "import flatbuffers"}, "/dev/null", "/dev/null");
    return corral::test::wait_process(pid);
  }();
  REQUIRE_MESSAGE(exited_with(status, 0),
                  kPython << " cannot import flatbuffers: install python3-flatbuffers (bash tools/setup.sh); "
                             "the Python worker runs only with /usr/bin/python3");
  REQUIRE_MESSAGE(std::filesystem::exists(kPythonDir + "/corral/proto/Message.py"),
                  "no generated Python package in " << kPythonDir << ": build the target corral_python_proto");
}

std::vector<std::string> python_worker_argv() { return {kPython, "-I", "-B", "-u", kPythonWorker, kPythonDir}; }

struct EvalResult {
  std::string json;
  bool ok = false;
  std::string out, err;
  std::optional<std::string> result, error;
};

EvalResult parse_reply(std::string json) {
  EvalResult r;
  r.ok = json_field(json, "ok") == std::optional<std::string>("true");
  r.out = json_field(json, "stdout").value_or("");
  r.err = json_field(json, "stderr").value_or("");
  r.result = json_field(json, "result");
  r.error = json_field(json, "error");
  r.json = std::move(json);
  return r;
}

EvalResult run_code(WorkerProcess& w, std::uint64_t id, std::string_view code) {
  return parse_reply(w.evaluate(id, code_request(code)));
}

}  // namespace

// ===== C++ worker (worker_sdk.h) ==========================================================

TEST_CASE("echo worker: evaluations round trip and keep state") {
  WorkerProcess w({kEchoWorker});
  CHECK(w.evaluate(7, "hello") == "echo:hello");
  CHECK(w.evaluate(8, "count") == "1");
  CHECK(w.evaluate(9, "count") == "2");
  CHECK(w.evaluate(10, std::string("bin\0ary", 7)) == std::string("echo:bin\0ary", 12));
  CHECK(w.evaluate(11, "") == "echo:");
  w.close_channel();
  CHECK(exited_with(w.wait(), 0));
}

TEST_CASE("echo worker: a host call is answered, or fails with the host's error") {
  WorkerProcess w({kEchoWorker});
  w.send(evaluate_frame(5, "host:ping"));
  Incoming call = w.expect(5, Body::HostCall);
  const HostCall* hc = call.msg->body_as_HostCall();
  CHECK(text(hc->data()) == "ping");
  w.send(host_reply_frame(5, hc->call_id(), "pong"));
  Incoming reply = w.expect(5, Body::EvalReply);
  CHECK(text(reply.msg->body_as_EvalReply()->data()) == "host-reply:pong");

  w.send(evaluate_frame(6, "host:q"));
  call = w.expect(6, Body::HostCall);
  const std::string refused = "no host channel: the evaluating client serves no host calls";
  w.send(host_reply_frame(6, call.msg->body_as_HostCall()->call_id(), "", refused));
  reply = w.expect(6, Body::EvalReply);
  CHECK(text(reply.msg->body_as_EvalReply()->data()) == "host-error:" + refused);
  CHECK(w.evaluate(7, "count") == "1");  // still serving
}

TEST_CASE("echo worker: several host calls in flight, answered out of order") {
  WorkerProcess w({kEchoWorker});
  w.send(evaluate_frame(3, "hostcalls:3"));
  std::vector<std::pair<std::uint64_t, std::string>> calls;
  for (int i = 0; i < 3; ++i) {  // all three arrive before any is answered
    Incoming c = w.expect(3, Body::HostCall);
    calls.emplace_back(c.msg->body_as_HostCall()->call_id(), text(c.msg->body_as_HostCall()->data()));
  }
  std::set<std::uint64_t> ids;
  for (auto& c : calls) ids.insert(c.first);
  CHECK(ids.size() == 3);
  CHECK(calls[0].second == "call-1");
  CHECK(calls[2].second == "call-3");
  // A reply for a call that is not in flight, and one for another evaluation: ignored.
  w.send(host_reply_frame(3, 999, "stray"));
  w.send(host_reply_frame(2, calls[0].first, "stale"));
  for (auto it = calls.rbegin(); it != calls.rend(); ++it)
    w.send(host_reply_frame(3, it->first, "<" + it->second + ">"));
  Incoming reply = w.expect(3, Body::EvalReply);
  CHECK(text(reply.msg->body_as_EvalReply()->data()) == "<call-1><call-2><call-3>");
  CHECK(w.err().find("ignored a HostReply") != std::string::npos);
}

TEST_CASE("echo worker: stdout and stderr are logs, never the protocol") {
  WorkerProcess w({kEchoWorker});
  CHECK(w.evaluate(1, "print") == "printed");
  CHECK(w.evaluate(2, "after") == "echo:after");
  CHECK(w.out().find("a line on stdout") != std::string::npos);
  CHECK(w.err().find("a line on stderr") != std::string::npos);
}

TEST_CASE("echo worker: side effects run once; a crash is EOF on the channel") {
  TempDir d;
  const std::string file = d.path() + "/side";
  WorkerProcess w({kEchoWorker});
  CHECK(w.evaluate(1, "side-effect:" + file) == "done");
  const std::string lines = read_file(file);
  CHECK(lines.find("ran ") == 0);
  CHECK(std::count(lines.begin(), lines.end(), '\n') == 1);

  w.send(evaluate_frame(2, "crash"));
  CHECK(w.recv().kind == Incoming::eof);
  int status = w.wait();
  CHECK((status >= 0 && WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT));
}

TEST_CASE("echo worker: sleep replies late") {
  WorkerProcess w({kEchoWorker});
  w.send(evaluate_frame(1, "sleep:1"));
  CHECK(w.recv(std::chrono::milliseconds(300)).kind == Incoming::timeout);
  Incoming r = w.expect(1, Body::EvalReply);
  CHECK(text(r.msg->body_as_EvalReply()->data()) == "slept");
}

TEST_CASE("echo worker: EOF ends it with status 0, also while a host call waits") {
  {
    WorkerProcess w({kEchoWorker});
    w.close_channel();
    CHECK(exited_with(w.wait(), 0));
  }
  {
    WorkerProcess w({kEchoWorker});
    w.send(evaluate_frame(4, "host:never answered"));
    w.expect(4, Body::HostCall);
    w.close_channel();
    CHECK(exited_with(w.wait(), 0));
  }
}

TEST_CASE("echo worker: protocol violations end it with status 1") {
  SUBCASE("an Error frame from the supervisor") {
    WorkerProcess w({kEchoWorker});
    w.send(error_frame(ErrorCode::malformed, "worker sent garbage"));
    CHECK(exited_with(w.wait(), 1));
    CHECK(w.err().find("worker sent garbage") != std::string::npos);
  }
  SUBCASE("a frame over 64 MiB is refused from its header") {
    WorkerProcess w({kEchoWorker});
    const std::uint8_t header[4] = {0x01, 0x00, 0x00, 0x04};  // 64 MiB + 1
    w.send_raw(header, sizeof header);
    CHECK(exited_with(w.wait(), 1));
    CHECK(w.err().find("over the 67108864-byte limit") != std::string::npos);
  }
  SUBCASE("a payload without the CRL1 identifier") {
    WorkerProcess w({kEchoWorker});
    const std::uint8_t frame[12] = {8, 0, 0, 0, 0, 0, 0, 0, 'X', 'X', 'X', 'X'};
    w.send_raw(frame, sizeof frame);
    CHECK(exited_with(w.wait(), 1));
    CHECK(w.err().find("identifier") != std::string::npos);
  }
  SUBCASE("no CORRAL_WORKER_FD") {
    WorkerProcess w({kEchoWorker}, false);
    CHECK(exited_with(w.wait(), 2));
    CHECK(w.err().find("CORRAL_WORKER_FD") != std::string::npos);
  }
}

// ===== Python evaluation worker (corral_eval_worker.py) ====================================

TEST_CASE("python worker: state persists; the last expression is the result") {
  require_python_runtime();
  WorkerProcess w(python_worker_argv());
  EvalResult r = run_code(w, 1, "x = 41");
  CHECK_MESSAGE(r.ok, r.json);
  CHECK(!r.result);
  CHECK(!r.error);
  r = run_code(w, 2, "x + 1");
  CHECK_MESSAGE(r.ok, r.json);
  CHECK(r.result == std::optional<std::string>("42"));
  r = run_code(w, 3, "def f(n):\n    return n * 2\ny = f(x)\ny");
  CHECK(r.result == std::optional<std::string>("82"));
  r = run_code(w, 4, "'h\\u00e9\\n'");  // repr of a str, non-ASCII survives the JSON
  CHECK(r.result == std::optional<std::string>("'h\xC3\xA9\\n'"));
  r = run_code(w, 5, "None");
  CHECK(r.ok);
  CHECK(!r.result);
  w.close_channel();
  CHECK(exited_with(w.wait(), 0));
}

TEST_CASE("python worker: output is captured into the reply, not written to the channel") {
  require_python_runtime();
  WorkerProcess w(python_worker_argv());
  EvalResult r = run_code(w, 1, "import sys\nprint('hello')\nprint('oops', file=sys.stderr)\n7");
  CHECK_MESSAGE(r.ok, r.json);
  CHECK(r.out == "hello\n");
  CHECK(r.err == "oops\n");
  CHECK(r.result == std::optional<std::string>("7"));
  // The channel is intact (the next frame parses) and the logs did not get the output.
  CHECK(run_code(w, 2, "1").result == std::optional<std::string>("1"));
  CHECK(w.out().find("hello") == std::string::npos);
  CHECK(w.err().find("oops") == std::string::npos);
  CHECK(w.err().find("corral_eval_worker: ready") != std::string::npos);
}

TEST_CASE("python worker: exceptions give ok=false with a traceback; the worker goes on") {
  require_python_runtime();
  WorkerProcess w(python_worker_argv());
  run_code(w, 1, "z = 5");
  EvalResult r = run_code(w, 2, "print('before')\n1 / 0");
  CHECK(!r.ok);
  CHECK(r.out == "before\n");
  CHECK(!r.result);
  REQUIRE(r.error);
  CHECK(r.error->find("Traceback") != std::string::npos);
  CHECK(r.error->find("ZeroDivisionError") != std::string::npos);
  CHECK(r.error->find("1 / 0") != std::string::npos);               // the source line
  CHECK(r.error->find("corral_eval_worker.py") == std::string::npos);  // the worker's frames cut

  r = run_code(w, 3, "def broken(:");
  CHECK(!r.ok);
  REQUIRE(r.error);
  CHECK(r.error->find("SyntaxError") != std::string::npos);

  r = run_code(w, 4, "import sys\nsys.exit(3)");
  CHECK(!r.ok);
  REQUIRE(r.error);
  CHECK(r.error->find("SystemExit") != std::string::npos);

  r = run_code(w, 5, "z");  // state survived the failures
  CHECK(r.ok);
  CHECK(r.result == std::optional<std::string>("5"));
}

TEST_CASE("python worker: bad requests give ok=false, not a crash") {
  require_python_runtime();
  WorkerProcess w(python_worker_argv());
  for (std::string bad : {"not json", "{\"nocode\": 1}", "[1, 2]", "{\"code\": 5}", "\xff\xfe"}) {
    EvalResult r = parse_reply(w.evaluate(1, bad));
    CHECK_MESSAGE(!r.ok, bad);
    REQUIRE(r.error);
    CHECK(r.error->find("bad request") != std::string::npos);
  }
  CHECK(run_code(w, 2, "2 + 2").result == std::optional<std::string>("4"));
}

TEST_CASE("python worker: host_call from the evaluated code") {
  require_python_runtime();
  WorkerProcess w(python_worker_argv());
  w.send(evaluate_frame(1, code_request("r = host_call(b'ping')\nr")));
  Incoming call = w.expect(1, Body::HostCall);
  CHECK(text(call.msg->body_as_HostCall()->data()) == "ping");
  w.send(host_reply_frame(1, call.msg->body_as_HostCall()->call_id(), "pong"));
  EvalResult r = parse_reply(text(w.expect(1, Body::EvalReply).msg->body_as_EvalReply()->data()));
  CHECK_MESSAGE(r.ok, r.json);
  CHECK(r.result == std::optional<std::string>("b'pong'"));

  // An error reply raises HostCallError(message), which the code may catch...
  w.send(evaluate_frame(2, code_request("try:\n    host_call(b'q')\nexcept HostCallError as e:\n    m = str(e)\nm")));
  call = w.expect(2, Body::HostCall);
  w.send(host_reply_frame(2, call.msg->body_as_HostCall()->call_id(), "", "no host channel"));
  r = parse_reply(text(w.expect(2, Body::EvalReply).msg->body_as_EvalReply()->data()));
  CHECK_MESSAGE(r.ok, r.json);
  CHECK(r.result == std::optional<std::string>("'no host channel'"));

  // ...or not.
  w.send(evaluate_frame(3, code_request("host_call(b'z')")));
  call = w.expect(3, Body::HostCall);
  w.send(host_reply_frame(3, call.msg->body_as_HostCall()->call_id(), "", "refused"));
  r = parse_reply(text(w.expect(3, Body::EvalReply).msg->body_as_EvalReply()->data()));
  CHECK(!r.ok);
  REQUIRE(r.error);
  CHECK(r.error->find("HostCallError: refused") != std::string::npos);

  // Outside an evaluation there is no host call to make: the worker exits on EOF.
  w.close_channel();
  CHECK(exited_with(w.wait(), 0));
}

TEST_CASE("python worker: EOF while a host call waits ends it with status 0") {
  require_python_runtime();
  WorkerProcess w(python_worker_argv());
  w.send(evaluate_frame(1, code_request("host_call(b'never answered')")));
  w.expect(1, Body::HostCall);
  w.close_channel();
  CHECK(exited_with(w.wait(), 0));
}

TEST_CASE("python SDK: a raising handler still replies; host calls pipeline") {
  require_python_runtime();
  const std::string sdk_dir = std::filesystem::path(kPythonWorker).parent_path();
  const std::string script =
      "import sys\n"
      "sys.path[0:0] = [" + json_quote(kPythonDir) + ", " + json_quote(sdk_dir) + "]\n"
      "import corral_worker\n"
      "w = corral_worker.Worker()\n"
      "def handle(request):\n"
      "    if request == b'boom':\n"
      "        raise ValueError('kaboom')\n"
      "    ids = [w.start_host_call(b'a'), w.start_host_call(b'b')]\n"
      "    return b'|'.join(w.wait_host_call(i) for i in ids)\n"
      "w.serve(handle)\n";
  WorkerProcess w({kPython, "-I", "-B", "-u", "-c", script});
  std::string reply = w.evaluate(1, "boom");
  CHECK(reply.find("corral worker error") == 0);
  CHECK(reply.find("ValueError: kaboom") != std::string::npos);

  w.send(evaluate_frame(2, "go"));
  Incoming a = w.expect(2, Body::HostCall);
  Incoming b = w.expect(2, Body::HostCall);  // both in flight before any reply
  CHECK(text(a.msg->body_as_HostCall()->data()) == "a");
  CHECK(text(b.msg->body_as_HostCall()->data()) == "b");
  CHECK(a.msg->body_as_HostCall()->call_id() != b.msg->body_as_HostCall()->call_id());
  w.send(host_reply_frame(2, b.msg->body_as_HostCall()->call_id(), "B"));
  w.send(host_reply_frame(2, a.msg->body_as_HostCall()->call_id(), "A"));
  Incoming r = w.expect(2, Body::EvalReply);
  CHECK(text(r.msg->body_as_EvalReply()->data()) == "A|B");

  w.send(error_frame(ErrorCode::malformed, "bad worker"));
  CHECK(exited_with(w.wait(), 1));
  CHECK(w.err().find("bad worker") != std::string::npos);
}
