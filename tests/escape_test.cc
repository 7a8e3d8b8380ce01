// The escape suite: a real `corral serve` and sandboxed attempts to get out, each made by the
// test helper (tests/helper.cc), which prints one stable line per attempt (`ok` or
// `errno=NAME`), so every outcome is asserted exactly, per mode where the modes differ.
// docs/threat-model.md ("What corral guarantees", "Policy by mode") and docs/design.md
// ("Isolation layers") are what is checked.
//
// The suite runs twice (tests/CMakeLists.txt), as root both times, against two supervisors,
// picked by CORRAL_ESCAPE_SUPERVISOR:
//   root (or unset)  every supervisor runs as root, as in CI (escape_test);
//   nonroot          every supervisor runs as uid/gid 65534 (nobody) with no supplementary
//                    group, its socket and temp root in a directory nobody owns, and every
//                    CLI client runs as nobody too, the one uid such a supervisor accepts
//                    (escape_test_nonroot). nobody has no /etc/subgid range, so the
//                    supervisor runs with --allow-supplementary-groups (it holds none).
// Where the rules differ for a non-root supervisor (no cgroups, hence no caps; no idmapped
// mounts, so a workspace is writable only if its uid owns it; commands run as its own uid),
// each case asserts the documented difference. Cases that only mean something for a root
// supervisor are in the doctest test suite "root-supervisor", which the nonroot run excludes.
//
// The files attacked live OUTSIDE /tmp and /var/tmp (the sandbox replaces both with the scope's
// temp dir, so anything under them would be out of reach for that reason alone), in kHostDir:
//   /srv/corral-escape-XXXXXX/ws        the workspace (root-owned, 0755)
//   /srv/corral-escape-XXXXXX/outside   not a root; mode 0777, so that the sandbox uid
//                                           (nobody) could write it if unconfined; holds
//                                           "file" (0666, "original")
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sched.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "runtime/layer.h"
#include "runtime/probe.h"
#include "tests/test_util.h"
#include "worker_proto/messages.h"

// Failed CHECKs on lists of answers show them.
namespace doctest {
template <>
struct StringMaker<std::vector<std::string>> {
  static String convert(const std::vector<std::string>& v) {
    std::string out = "[";
    for (std::size_t i = 0; i < v.size(); ++i) out += (i ? " | " : "") + v[i];
    return (out + "]").c_str();
  }
};
}  // namespace doctest

using namespace corral;
using namespace corral::test;
using namespace std::chrono_literals;

namespace {

const std::vector<std::string> kModes = {"read-only", "workspace-write", "danger-full-access"};

// True when the suite runs against non-root supervisors (see the top of the file).
bool nonroot() {
  static const bool on = [] {
    const char* v = std::getenv("CORRAL_ESCAPE_SUPERVISOR");
    const std::string mode = v ? v : "";
    if (mode.empty() || mode == "root") return false;
    if (mode == "nonroot") return true;
    std::fprintf(stderr, "CORRAL_ESCAPE_SUPERVISOR=%s: expected root or nonroot\n", v);
    std::exit(2);
  }();
  return on;
}
// Who every supervisor and every CLI client runs as: this process (root), or nobody.
std::optional<Identity> supervisor_as() { return nonroot() ? std::optional<Identity>(nobody()) : std::nullopt; }
// The host uid a sandbox's files belong to in its writable workspace: root's, through the
// idmapped root-owned workspace of a root supervisor; the supervisor's own under a non-root one.
uid_t workspace_owner() { return nonroot() ? nobody().uid : 0; }
// The prepared-sandbox runs (escape_test_prepared, escape_test_nonroot_prepared): every
// command of a scope, its first included, starts from a prepared sandbox (unless `extra` says).
std::vector<std::string> with_prepare_flags(std::vector<std::string> extra) {
  const char* after = std::getenv("CORRAL_ESCAPE_PREPARE_AFTER");
  if (after && std::find(extra.begin(), extra.end(), "--prepare-after") == extra.end()) {
    extra.insert(extra.begin(), after);
    extra.insert(extra.begin(), "--prepare-after");
  }
  return extra;
}

// `corral serve`'s own flags for the supervisor under test, then `extra`.
std::vector<std::string> serve_flags(std::vector<std::string> extra) {
  // nobody has no /etc/subgid range: the sandboxes keep the supervisor's supplementary groups,
  // which spawn_as leaves empty (escape_test 26 covers the layer itself).
  if (nonroot()) extra.insert(extra.begin(), "--allow-supplementary-groups");
  return with_prepare_flags(std::move(extra));
}

// The whole `corral serve` command line of the supervisor under test.
std::vector<std::string> serve_argv(std::vector<std::string> args) {
  std::vector<std::string> argv = {kCorral, "serve"};
  for (auto& a : serve_flags(std::move(args))) argv.push_back(std::move(a));
  return argv;
}

// test_util.h's Server (socket and temp root under /tmp), run as the supervisor under test.
class Supervisor : public Server {
 public:
  explicit Supervisor(std::vector<std::string> extra_args = {}, std::vector<std::string> extra_env = {})
      : Server(serve_flags(std::move(extra_args)), std::move(extra_env), supervisor_as()) {}
};

// The CLI as the suite's client (root, or nobody in the nonroot run); `input` on its stdin.
CliRun client(const std::vector<std::string>& args, const std::string& socket) {
  return cli(args, socket, supervisor_as());
}
std::string missing_layer(const std::string& socket, const std::string& layer);
CliRun cli_in(const std::vector<std::string>& args, const std::string& socket, const std::string& input) {
  return cli(args, socket, supervisor_as(), input);
}
// The CLI run as another uid (gid the same, no supplementary groups), `input` on its stdin:
// an allowed non-root peer of a root supervisor.
CliRun cli_as(uid_t uid, const std::vector<std::string>& args, const std::string& socket, const std::string& input = "") {
  return cli(args, socket, Identity{uid, uid, {}}, input);
}

// Gives `root` and everything beneath it to the workspace's owner (workspace_owner()): a root
// supervisor shows its root-owned workspace to the sandbox uid through an idmapped mount; a
// non-root supervisor cannot, so in the nonroot run the tree the test made as root becomes the
// supervisor uid's, as a user's own workspace is. Without it every write there would fail on
// the file modes, and the probes would test nothing.
void hand_over(const std::string& root) {
  if (!nonroot()) return;
  REQUIRE(::lchown(root.c_str(), nobody().uid, nobody().gid) == 0);
  for (const auto& e : std::filesystem::recursive_directory_iterator(root))
    REQUIRE(::lchown(e.path().c_str(), nobody().uid, nobody().gid) == 0);
}

// In the nonroot run, the reason `status` gives for a missing layer; "" when it is available
// (or the run is root's, whose supervisor has every layer: escape_test 17).
std::string missing_layer(const std::string& socket, const std::string& layer) {
  CliRun st = client({"status", "--json"}, socket);
  REQUIRE(st.exit_code == 0);
  const nlohmann::json status = nlohmann::json::parse(st.out);
  for (const auto& l : status.at("layers"))
    if (l.at("name").get<std::string>() == layer)
      return l.at("available").get<bool>() ? "" : l.at("reason").get<std::string>();
  FAIL("status does not list layer " << layer << ": " << st.out);
  return "";
}
// What the CLI prints when a request needs a layer this supervisor lacks (exit 125 for exec).
std::string refusal(const std::string& layer, const std::string& reason) {
  return "corral: this host cannot enforce " + layer + ": " + reason +
         " (refusing rather than running with less isolation)\n";
}
// The nonroot run's answer to a cap: cgroups belong to root and the suite delegates none to
// nobody, so the supervisor reports `layer` missing and refuses the request `args` (an exec)
// with exit 125, naming the layer and why, before anything runs.
void check_cap_refused(const std::string& socket, const std::string& layer, const std::vector<std::string>& args) {
  const std::string why = missing_layer(socket, layer);
  REQUIRE_MESSAGE(!why.empty(), "a non-root supervisor reports " << layer << " available");
  CliRun r = client(args, socket);
  CAPTURE(args);
  CHECK(r.exit_code == 125);
  CHECK(r.out.empty());
  CHECK(r.err == refusal(layer, why));
}
// An ordinary host directory that every sandbox sees (read-only) at its own path.
const std::string kHostDir = "/srv";
const std::string kOriginal = "original";

std::string make_dir_under(const std::string& parent, const std::string& prefix) {
  std::string t = parent + "/" + prefix + "XXXXXX";
  REQUIRE(::mkdtemp(t.data()) != nullptr);
  return t;
}

void put(const std::string& path, const std::string& content, mode_t mode = 0644) {
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << content;
  }
  REQUIRE(::chmod(path.c_str(), mode) == 0);
}

bool path_exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

// The attacked tree (see the top of the file).
struct Tree {
  std::string base, ws, outside;
  Tree() {
    base = make_dir_under(kHostDir, "corral-escape-");
    REQUIRE(::chmod(base.c_str(), 0755) == 0);
    ws = base + "/ws";
    outside = base + "/outside";
    REQUIRE(::mkdir(ws.c_str(), 0755) == 0);
    REQUIRE(::mkdir(outside.c_str(), 0777) == 0);
    REQUIRE(::chmod(outside.c_str(), 0777) == 0);  // past the umask
    put(outside + "/file", kOriginal, 0666);
    hand_over(ws);
  }
  ~Tree() {
    std::error_code ec;
    std::filesystem::remove_all(base, ec);
  }
};

// `corral serve` like test_util.h's Server, but with its socket and temp root in a directory
// under `parent` (e.g. kHostDir), so that the sandbox's /tmp replacement does not hide it and
// the socket directory's mask is what must. Runs as the supervisor under test.
class ServerAt {
 public:
  ServerAt(const std::string& parent, std::vector<std::string> extra_args = {}, std::vector<std::string> extra_env = {}) {
    dir_ = make_dir_under(parent, "corral-escape-srv-");
    REQUIRE(::chmod(dir_.c_str(), 0755) == 0);
    if (nonroot()) REQUIRE(::chown(dir_.c_str(), nobody().uid, nobody().gid) == 0);
    socket_ = dir_ + "/sock/corral.sock";
    std::vector<std::string> argv = {kCorral, "serve", "--socket", socket_, "--temp-root", dir_};
    for (auto& a : serve_flags(std::move(extra_args))) argv.push_back(std::move(a));
    pid_ = spawn_as(supervisor_as(), argv, "", dir_ + "/serve.out", dir_ + "/serve.log", extra_env);
    REQUIRE(wait_until(
        [&] { return proto::Client::connect_raw(socket_).ok() || !running(pid_); },
        20s));
    REQUIRE_MESSAGE(running(pid_), log());
  }
  ~ServerAt() {
    ::kill(pid_, SIGTERM);
    wait_process(pid_, 30s);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  const std::string& socket() const { return socket_; }
  std::string sock_dir() const { return dir_ + "/sock"; }
  const std::string& dir() const { return dir_; }  // also its temp root
  std::string log() const { return read_file(dir_ + "/serve.log"); }
  pid_t pid() const { return pid_; }

 private:
  std::string dir_, socket_;
  pid_t pid_ = -1;
};

std::string chomp(std::string s) {
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

// The id `corral scope create` printed: the last line of its output.
std::string scope_id_of(const CliRun& created) {
  return chomp(created.out.substr(created.out.rfind('\n', created.out.size() - 2) + 1));
}

// Runs the helper in a sandbox: `corral exec OPTS -- helper ACTION...`; its one-line answer, or
// a description of what went wrong instead (so a failed CHECK shows it).
std::string attempt(const std::string& socket, std::vector<std::string> opts, const std::vector<std::string>& action) {
  std::vector<std::string> args = {"exec"};
  args.insert(args.end(), opts.begin(), opts.end());
  args.push_back("--");
  args.push_back(kHelper);
  args.insert(args.end(), action.begin(), action.end());
  CliRun r = client(args, socket);
  if (r.exit_code != 0) return "corral exec exit " + std::to_string(r.exit_code) + ": " + r.out + r.err;
  return chomp(r.out);
}

// Several attempts in one sandbox (helper `batch`): one answer per attempt.
std::vector<std::string> attempts(const std::string& socket, std::vector<std::string> opts,
                                  const std::vector<std::string>& each) {
  std::vector<std::string> action = {"batch"};
  action.insert(action.end(), each.begin(), each.end());
  std::string out = attempt(socket, std::move(opts), action);
  std::vector<std::string> lines;
  std::istringstream in(out);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

// The raw value of "key": in a flat JSON object (a string without its quotes, or a number,
// true/false/null); "<missing>" if absent.
std::string json_field(const std::string& json, const std::string& key) {
  const std::string k = "\"" + key + "\":";
  auto at = json.find(k);
  if (at == std::string::npos) return "<missing>";
  at += k.size();
  if (json[at] == '"') {
    auto end = json.find('"', at + 1);
    return json.substr(at + 1, end - at - 1);
  }
  auto end = json.find_first_of(",}]", at);
  return json.substr(at, end - at);
}
long json_number(const std::string& json, const std::string& key) {
  std::string v = json_field(json, key);
  char* end = nullptr;
  long n = std::strtol(v.c_str(), &end, 10);
  return (v.empty() || *end) ? -1 : n;
}

// A TCP listener on the host's 127.0.0.1 that counts the connections it accepts.
class Listener {
 public:
  Listener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(fd_, 16) == 0);
    socklen_t len = sizeof a;
    REQUIRE(::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] {
      while (!stop_) {
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, 50) <= 0) continue;
        int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (c < 0) continue;
        ++accepted_;
        ::close(c);
      }
    });
  }
  ~Listener() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }
  int port() const { return port_; }
  int accepted() const { return accepted_; }

 private:
  int fd_ = -1, port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::thread thread_;
};

std::string unique_marker(const std::string& what) {
  static int n = 0;
  return "corral-escape-" + what + "-" + std::to_string(::getpid()) + "-" + std::to_string(++n);
}

// Per-mode expectation: {read-only, workspace-write, danger-full-access}.
struct ByMode {
  std::string ro, ww, dfa;
  const std::string& operator[](const std::string& mode) const {
    return mode == "read-only" ? ro : mode == "workspace-write" ? ww : dfa;
  }
};

}  // namespace

TEST_CASE("0. commands start from prepared sandboxes exactly when the run asks for them") {
  // So that the prepared runs (tests/CMakeLists.txt escape_test_prepared and
  // escape_test_nonroot_prepared) cannot pass by quietly launching as usual.
  Supervisor s;
  const bool prepared = std::getenv("CORRAL_ESCAPE_PREPARE_AFTER") != nullptr;
  if (!nonroot()) {
    // A root supervisor's prepared command maps its ids onto the server's (0); a usual launch
    // maps them onto the host's sandbox uid.
    auto r = client({"exec", "--", "cat", "/proc/self/uid_map"}, s.socket());
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    std::istringstream fields(r.out);
    std::string inside, outside;
    fields >> inside >> outside;
    INFO("uid_map: " << r.out);
    CHECK(outside == (prepared ? "0" : std::to_string(nobody().uid)));
    return;
  }
  // A non-root supervisor's usual launch makes each command's network namespace in the
  // command's own user namespace; a prepared sandbox's server made its commands' one, in the
  // server's (an ancestor, which the command may not even name).
  auto r = client({"exec", "--net", "denied", "--", kHelper, "netns-owner"}, s.socket());
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  CHECK(r.out == (prepared ? "errno=EPERM\n" : "own\n"));
}

TEST_CASE("1. writes outside the writable roots: direct, symlink, /proc/self/root, hard link, rename") {
  Supervisor s;
  Tree t;
  for (const auto& mode : kModes) {
    CAPTURE(mode);
    const std::string o = t.outside + "/" + mode;  // names of files the attempts would create
    REQUIRE(::symlink((o + "-via-link").c_str(), (t.ws + "/link-" + mode).c_str()) == 0);
    put(t.ws + "/mine-" + mode, "mine");
    hand_over(t.ws);
    // A file outside every root that the sandbox's host uid owns (nobody: a root supervisor's
    // sandbox uid, a non-root supervisor's own uid, as its home files would be): what only an
    // owner may do (chmod) is refused like any write.
    const std::string own = o + "-own";
    put(own, kOriginal, 0600);
    REQUIRE(::chown(own.c_str(), nobody().uid, nobody().gid) == 0);
    const std::vector<std::string> opts = {"--mode", mode, "--workspace", t.ws};
    struct Case {
      std::vector<std::string> action;
      ByMode expect;
    };
    // EROFS: the host tree is a read-only mount in read-only and workspace-write (Landlock is the
    // second layer, never reached). The workspace is a separate (idmapped) mount, so link() and
    // rename() across it are EXDEV; in read-only the workspace itself is read-only.
    const std::vector<Case> cases = {
        {{"write-file", o + "-direct"}, {"errno=EROFS", "errno=EROFS", "ok"}},
        {{"write-file", t.ws + "/link-" + mode}, {"errno=EROFS", "errno=EROFS", "ok"}},
        {{"write-file", "/proc/self/root" + o + "-via-proc"}, {"errno=EROFS", "errno=EROFS", "ok"}},
        {{"write-file", t.ws + "/../outside/" + mode + "-dotdot"}, {"errno=EROFS", "errno=EROFS", "ok"}},
        // init's root: reading /proc/1/root needs ptrace access to init.
        {{"write-file", "/proc/1/root" + o + "-via-init"}, {"errno=EACCES", "errno=EACCES", "errno=EACCES"}},
        {{"mkdir", o + "-dir"}, {"errno=EROFS", "errno=EROFS", "ok"}},
        // /var/tmp is the scope's temp dir in the confining modes (checked below).
        {{"write-file", "/var/tmp/" + mode + "-" + std::to_string(::getpid())}, {"ok", "ok", "ok"}},
        {{"link", t.outside + "/file", t.ws + "/hard-" + mode}, {"errno=EROFS", "errno=EXDEV", "errno=EXDEV"}},
        {{"rename", t.ws + "/mine-" + mode, o + "-renamed"}, {"errno=EROFS", "errno=EXDEV", "errno=EXDEV"}},
        // Controls: the workspace and /tmp.
        {{"write-file", t.ws + "/ok-" + mode}, {"errno=EROFS", "ok", "ok"}},
        {{"write-file", "/tmp/ok"}, {"ok", "ok", "ok"}},
        {{"chmod", own, "0777"}, {"errno=EROFS", "errno=EROFS", "ok"}},
        {{"read-file", own}, {"ok " + kOriginal, "ok " + kOriginal, "ok " + kOriginal}},
        {{"write-file", own}, {"errno=EROFS", "errno=EROFS", "ok"}},
        {{"unlink", own}, {"errno=EROFS", "errno=EROFS", "ok"}},
    };
    for (const auto& c : cases) {
      CAPTURE(c.action);
      CHECK(attempt(s.socket(), opts, c.action) == c.expect[mode]);
    }
    CHECK(path_exists("/var/tmp/" + mode + "-" + std::to_string(::getpid())) == (mode == "danger-full-access"));
    std::remove(("/var/tmp/" + mode + "-" + std::to_string(::getpid())).c_str());
    // A hard link made anyway must not be a way to change the file outside.
    if (path_exists(t.ws + "/hard-" + mode))
      CHECK(attempt(s.socket(), opts, {"write-file", t.ws + "/hard-" + mode, "pwned"}) == "ok");
    CHECK(read_file(t.outside + "/file") == kOriginal);
    // What exists outside afterwards is exactly what the mode allowed.
    const bool full = mode == "danger-full-access";
    CHECK(path_exists(o + "-direct") == full);
    CHECK(path_exists(o + "-via-link") == full);
    CHECK(path_exists(o + "-via-proc") == full);
    CHECK(path_exists(o + "-dotdot") == full);
    CHECK(path_exists(o + "-dir") == full);
    CHECK_FALSE(path_exists(o + "-via-init"));
    CHECK_FALSE(path_exists(o + "-renamed"));
    CHECK(path_exists(own) == !full);
    if (!full) {
      struct stat st {};
      REQUIRE(::stat(own.c_str(), &st) == 0);
      CHECK((st.st_mode & 07777) == 0600);
      CHECK(read_file(own) == kOriginal);
    }
    if (full) CHECK(read_file(o + "-direct") == "pwned");
  }
}

TEST_CASE("1b. no setuid/setgid-root file can be planted in a root-owned workspace") {
  // The workspace is root-owned, so it is idmapped for the sandbox uid: files the command
  // creates there are root-owned on the host. With the set-id bits kept, any host user who runs
  // one gets euid 0. Either the bits are refused (EPERM) or the host file must not be set-id root.
  Supervisor s;
  Tree t;
  for (const auto& mode : kModes) {
    CAPTURE(mode);
    const std::string p = t.ws + "/" + mode;
    auto r = attempts(s.socket(), {"--mode", mode, "--workspace", t.ws},
                      {"copy /usr/bin/id " + p + "-chmod", "chmod " + p + "-chmod 6755", "create-mode " + p + "-create 6755",
                       "mkdir " + p + "-dir", "chmod " + p + "-dir 2777"});
    CAPTURE(r);
    REQUIRE(r.size() == 5);
    if (mode == "read-only") {
      // Nothing can be created at all; seccomp refuses the set-id modes before the mount is asked.
      CHECK(r == std::vector<std::string>{"errno=EROFS", "errno=EPERM", "errno=EPERM", "errno=EROFS", "errno=EPERM"});
      continue;
    }
    CHECK(r[0] == "ok");
    // seccomp refuses every set-id mode: chmod 6755, open(O_CREAT, 06755), chmod 2777.
    CHECK(r[1] == "errno=EPERM");
    CHECK(r[2] == "errno=EPERM");
    CHECK(r[3] == "ok");
    CHECK(r[4] == "errno=EPERM");
    for (const auto& f : {p + "-chmod", p + "-create", p + "-dir"}) {
      struct stat st {};
      if (::lstat(f.c_str(), &st) != 0) continue;
      char host[96];
      std::snprintf(host, sizeof host, "uid=%u gid=%u mode=%04o", st.st_uid, st.st_gid, st.st_mode & 07777);
      CAPTURE(f);
      CAPTURE(host);
      CHECK_FALSE((st.st_uid == 0 && (st.st_mode & S_ISUID)));
      CHECK_FALSE((st.st_gid == 0 && (st.st_mode & S_ISGID)));
    }
  }
}

TEST_CASE("2. a --protect path inside the workspace is read-only in every mode") {
  Supervisor s;
  Tree t;
  REQUIRE(::mkdir((t.ws + "/prot").c_str(), 0755) == 0);
  put(t.ws + "/prot/f", "keep");
  put(t.ws + "/protfile", "keepfile");
  for (const auto& mode : kModes) {
    CAPTURE(mode);
    put(t.ws + "/src", "replacement");
    hand_over(t.ws);
    const std::vector<std::string> opts = {"--mode", mode, "--workspace", t.ws, "--protect", t.ws + "/prot",
                                           "--protect", t.ws + "/protfile"};
    // Writes are EROFS (the protected path is a read-only bind of itself); replacing or removing
    // the mount point is EBUSY where the workspace is writable, EROFS where it is not.
    const std::string busy = mode == "read-only" ? "errno=EROFS" : "errno=EBUSY";
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
        {{"write-file", t.ws + "/prot/f"}, "errno=EROFS"},
        {{"write-file", t.ws + "/prot/new"}, "errno=EROFS"},
        {{"write-file", t.ws + "/protfile"}, "errno=EROFS"},
        {{"write-file", "/proc/self/root" + t.ws + "/protfile"}, "errno=EROFS"},
        {{"mkdir", t.ws + "/prot/d"}, "errno=EROFS"},
        {{"rename", t.ws + "/src", t.ws + "/protfile"}, busy},
        {{"rename", t.ws + "/prot", t.ws + "/prot2"}, busy},
        {{"unlink", t.ws + "/protfile"}, busy},
    };
    for (const auto& [action, expect] : cases) {
      CAPTURE(action);
      CHECK(attempt(s.socket(), opts, action) == expect);
    }
    CHECK(read_file(t.ws + "/prot/f") == "keep");
    CHECK(read_file(t.ws + "/protfile") == "keepfile");
    CHECK_FALSE(path_exists(t.ws + "/prot/new"));
    CHECK_FALSE(path_exists(t.ws + "/prot2"));
  }
}

TEST_CASE("3. a --deny-read file and directory are unreadable in every mode") {
  Supervisor s;
  Tree t;
  put(t.ws + "/deny-file", "SECRET FILE");
  REQUIRE(::mkdir((t.ws + "/deny-dir").c_str(), 0755) == 0);
  put(t.ws + "/deny-dir/s", "SECRET IN DIR");
  REQUIRE(::symlink((t.ws + "/deny-file").c_str(), (t.ws + "/to-deny").c_str()) == 0);
  put(t.outside + "/deny-out", "SECRET OUTSIDE");
  hand_over(t.ws);
  for (const auto& mode : kModes) {
    CAPTURE(mode);
    const std::vector<std::string> opts = {"--mode",      mode,           "--workspace", t.ws,
                                           "--deny-read", t.ws + "/deny-file", "--deny-read", t.ws + "/deny-dir",
                                           "--deny-read", t.outside + "/deny-out"};
    // EACCES: covered by an empty mode-000 file or directory on a read-only tmpfs.
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
        {{"read-file", t.ws + "/deny-file"}, "errno=EACCES"},
        {{"read-file", t.ws + "/to-deny"}, "errno=EACCES"},
        {{"read-file", "/proc/self/root" + t.ws + "/deny-file"}, "errno=EACCES"},
        {{"read-file", t.outside + "/deny-out"}, "errno=EACCES"},
        {{"read-file", t.ws + "/deny-dir/s"}, "errno=EACCES"},
        {{"list-dir", t.ws + "/deny-dir"}, "errno=EACCES"},
        {{"stat", t.ws + "/deny-dir"}, "dir mode=0000 fs=tmpfs"},
        {{"stat", t.ws + "/deny-file"}, "file mode=0000 fs=tmpfs"},
        // Neither uncovered nor replaced.
        {{"rename", t.ws + "/deny-file", t.ws + "/moved"}, mode == "read-only" ? "errno=EROFS" : "errno=EBUSY"},
        {{"write-file", t.ws + "/deny-file"}, "errno=EROFS"},
        // Control: the rest of the workspace is readable.
        {{"read-file", t.outside + "/file"}, "ok " + kOriginal},
    };
    for (const auto& [action, expect] : cases) {
      CAPTURE(action);
      CHECK(attempt(s.socket(), opts, action) == expect);
    }
  }
  CHECK(read_file(t.ws + "/deny-file") == "SECRET FILE");
}

TEST_CASE("4. /etc/shadow is unreadable; the command has no capabilities") {
  REQUIRE(path_exists("/etc/shadow"));
  Supervisor s;
  for (const auto& mode : kModes) {
    CAPTURE(mode);
    CHECK(attempt(s.socket(), {"--mode", mode}, {"read-file", "/etc/shadow"}) == "errno=EACCES");
    CHECK(attempt(s.socket(), {"--mode", mode}, {"caps"}) ==
          "CapInh=0000000000000000 CapPrm=0000000000000000 CapEff=0000000000000000 CapBnd=0000000000000000 "
          "CapAmb=0000000000000000");
  }
}

TEST_CASE("5, 6. network: denied is the command's own namespace and an allowlist of families; allowed is the host's") {
  Supervisor s;
  Listener l;
  const std::string port = std::to_string(l.port());
  // What this host answers to an AF_VSOCK socket unconfined (danger-full-access, net allowed).
  const int vs = ::socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const std::string host_vsock = vs >= 0 ? "ok" : std::string("errno=") + ::strerrorname_np(errno);
  if (vs >= 0) ::close(vs);
  int expected_accepts = 0;
  for (const auto& mode : kModes) {
    for (const std::string net : {"denied", "allowed"}) {
      CAPTURE(mode);
      CAPTURE(net);
      const bool denied = net == "denied";
      auto r = attempts(s.socket(), {"--mode", mode, "--net", net},
                        {"socket inet", "socket inet6", "socket netlink", "socket unix", "socket packet",
                         "socket netlink-audit", "socket vsock", "tcp-connect 127.0.0.1 " + port});
      const std::string no = "errno=EAFNOSUPPORT";
      // AF_PACKET needs CAP_NET_RAW, which the command never has.
      CHECK(r == std::vector<std::string>{
                     "ok", "ok", "ok", "ok", denied ? no : "errno=EPERM", denied ? no : "ok",
                     denied || mode != "danger-full-access" ? no : host_vsock,
                     // Denied: its own loopback, where nothing listens on the host's port.
                     denied ? "connect errno=ECONNREFUSED" : "ok"});
      if (!denied) ++expected_accepts;
      CHECK(wait_until([&] { return l.accepted() == expected_accepts; }, 2s));
    }
  }
  CHECK(l.accepted() == 3);
}

TEST_CASE("5b. a TCP and a UDP server on the command's own loopback work with network denied, in every mode") {
  Supervisor s;
  for (const auto& mode : kModes) {
    CAPTURE(mode);
    CHECK(attempts(s.socket(), {"--mode", mode},
                   {"loopback tcp 127.0.0.1", "loopback udp 127.0.0.1", "loopback tcp ::1", "loopback udp ::1"}) ==
          std::vector<std::string>{"ok", "ok", "ok", "ok"});
  }
}

TEST_CASE("5c. an unknown layer name is an error, and a layer never probed fails closed") {
  for (std::size_t i = 0; i < kLayerCount; ++i) {
    const Layer layer = static_cast<Layer>(i);
    auto parsed = parse_layer(layer_name(layer));
    REQUIRE(parsed.ok());
    CHECK(*parsed == layer);
  }
  for (const char* typo : {"seccom", "Seccomp", "seccomp ", "", "net_ns", "unknown-layer"}) {
    CAPTURE(typo);
    auto parsed = parse_layer(typo);
    REQUIRE_FALSE(parsed.ok());
    CHECK(parsed.status().message() == "unknown layer '" + std::string(typo) + "'");
  }
  // A report without seccomp: a request that needs it is refused, never waved through.
  std::vector<LayerReport> reports = {layer_report(Layer::user_ns, true, "probed")};
  CHECK(require_layers(reports, {Layer::user_ns}).ok());
  Status missing = require_layers(reports, {Layer::user_ns, Layer::seccomp});
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.message() ==
        "layer seccomp was never probed on this host (refusing rather than running with less isolation)");
  reports.push_back(layer_report(Layer::seccomp, false, "no libseccomp"));
  CHECK(require_layers(reports, {Layer::seccomp}).message() ==
        "this host cannot enforce seccomp: no libseccomp (refusing rather than running with less isolation)");
}

TEST_CASE("7. the supervisor's socket: out of reach in every mode (socket under /tmp)") {
  Supervisor s;  // socket under /tmp: hidden by the /tmp replacement
  const std::string dir = std::filesystem::path(s.socket()).parent_path().string();
  for (const auto& mode : kModes) {
    CAPTURE(mode);
    CHECK(attempts(s.socket(), {"--mode", mode}, {"unix-connect " + s.socket(), "list-dir " + dir}) ==
          std::vector<std::string>{"errno=ENOENT", "errno=ENOENT"});
  }
}

TEST_CASE("7. the supervisor's socket outside /tmp: its directory is masked in every mode") {
  // --allow-uid for the sandbox uid opens the socket (0666) and its directory (0711) to it, so
  // only the mask (an empty mode-000 tmpfs) stands between the command and the socket. A
  // non-root supervisor's commands run as its own uid, which owns both already.
  ServerAt s(kHostDir, nonroot() ? std::vector<std::string>{} : std::vector<std::string>{"--allow-uid", "65534"});
  REQUIRE(path_exists(s.socket()));
  for (const auto& mode : kModes) {
    CAPTURE(mode);
    // In the confining modes the connect broker refuses a path through a magic link (ELOOP).
    CHECK(attempts(s.socket(), {"--mode", mode},
                   {"unix-connect " + s.socket(), "list-dir " + s.sock_dir(), "stat " + s.sock_dir(),
                    "unix-connect /proc/self/root" + s.socket()}) ==
          std::vector<std::string>{"errno=EACCES", "errno=EACCES", "dir mode=0000 fs=tmpfs",
                                   mode == "danger-full-access" ? "errno=EACCES" : "errno=ELOOP"});
  }
  // A bind that would show the socket directory at another path is refused.
  auto r = client({"exec", "--bind", s.sock_dir() + ":/tmp/sock", "--", kHelper, "exit", "0"}, s.socket());
  CHECK(r.exit_code == 125);
  CHECK(r.err.find("--bind source " + s.sock_dir() + " contains or lies in " + s.sock_dir() + ", one of the supervisor's own") !=
        std::string::npos);
}

TEST_CASE("7b. no workspace, bind or scope may contain or lie in the supervisor's own directories; one beside them may") {
  ServerAt s(kHostDir, {});
  const std::string own = "one of the supervisor's own directories";
  auto refused = [&](const std::vector<std::string>& args, const std::string& what) {
    CAPTURE(args);
    auto r = client(args, s.socket());
    CHECK(r.exit_code != 0);
    CHECK(r.err.find(what) != std::string::npos);
    CHECK(r.err.find(own) != std::string::npos);
  };
  // The socket's directory, and the directory holding it and the temp root, in every mode.
  for (const auto& mode : kModes) {
    refused({"exec", "--mode", mode, "--workspace", s.sock_dir(), "--", kHelper, "exit", "0"},
            "workspace root " + s.sock_dir() + " contains or lies in " + s.sock_dir());
    refused({"exec", "--mode", mode, "--workspace", s.dir(), "--", kHelper, "exit", "0"},
            "workspace root " + s.dir() + " contains or lies in ");
  }
  refused({"exec", "--bind", s.dir() + ":/opt/x", "--", kHelper, "exit", "0"}, "--bind source " + s.dir());
  // Nor anything inside them, for commands and file tools alike: the socket itself, in every
  // mode, and a directory in the socket's.
  const std::string inside = s.sock_dir() + "/ws";
  REQUIRE(std::filesystem::create_directories(inside));
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"exec", "--workspace", inside, "--", kHelper, "exit", "0"}, {"ls", "--workspace", inside, inside}}) {
    if (nonroot()) {
      // The non-root client cannot even reach into the socket's directory (0711): refused first
      // for that, by its own credentials.
      CHECK(client(args, s.socket()).exit_code != 0);
    } else {
      refused(args, "workspace root " + inside + " contains or lies in");
    }
  }
  for (const auto& mode : kModes)
    refused({"exec", "--mode", mode, "--bind", s.socket() + ":/opt/s.sock", "--", kHelper, "exit", "0"},
            "--bind source " + s.socket() + " contains or lies in");
  refused({"scope", "create", "--workspace", s.dir()}, "workspace root " + s.dir());
  // A socket in one of them (the supervisor's own, above all) is no --allow-socket.
  refused({"exec", "--allow-socket", s.socket(), "--", kHelper, "exit", "0"}, "--allow-socket " + s.socket());
  refused({"worker", "start", "w", "--workspace", s.dir(), "--", kHelper, "exit", "0"}, "workspace root " + s.dir());
  // A directory beside them is an ordinary workspace.
  const std::string ws = s.dir() + "/ws";
  REQUIRE(std::filesystem::create_directory(ws));
  if (nonroot()) REQUIRE(::chown(ws.c_str(), nobody().uid, nobody().gid) == 0);
  CHECK(attempts(s.socket(), {"--workspace", ws}, {"write-file " + ws + "/f x"}) == std::vector<std::string>{"ok"});
  // A supervisor with its socket and temp root in /tmp: /tmp itself is no workspace.
  Supervisor t;
  auto r = client({"exec", "--workspace", "/tmp", "--", kHelper, "exit", "0"}, t.socket());
  CHECK(r.exit_code == 125);
  CHECK(r.err.find("workspace root /tmp contains or lies in ") != std::string::npos);
}

TEST_CASE("7c. in read-only mode a workspace beneath /tmp or /var/tmp is shown, read-only") {
  Supervisor s;
  for (const std::string base : {"/tmp", "/var/tmp"}) {
    std::string dir = base + "/corral-ro-ws-XXXXXX";
    REQUIRE(::mkdtemp(dir.data()) != nullptr);
    REQUIRE(::chmod(dir.c_str(), 0755) == 0);
    { std::ofstream(dir + "/seen") << "yes"; }
    REQUIRE(::chmod((dir + "/seen").c_str(), 0644) == 0);
    CAPTURE(dir);
    CHECK(attempts(s.socket(), {"--mode", "read-only", "--workspace", dir},
                   {"read-file " + dir + "/seen", "write-file " + dir + "/new x"}) ==
          std::vector<std::string>{"ok yes", "errno=EROFS"});
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
}

TEST_CASE("7. a sandboxed peer that reaches the socket anyway is refused (the second layer)") {
  // The socket hard-linked into the workspace: the mask does not cover that path. In the
  // confining modes the host-IPC broker refuses the connect (a host socket); --allow-socket
  // lets it through, and danger-full-access reaches it as the host does, so the peer check
  // must refuse the connection. --allow-uid 65534 makes the uid check pass for the sandbox
  // uid, as it always does for a non-root supervisor (whose commands run as its own uid), so the
  // sandbox check is the only gate (the nonroot run needs no flag for that).
  ServerAt s(kHostDir, nonroot() ? std::vector<std::string>{} : std::vector<std::string>{"--allow-uid", "65534"});
  Tree t;
  const std::string link = t.ws + "/sock-link";
  REQUIRE(::link(s.socket().c_str(), link.c_str()) == 0);
  const std::string refused = "connected closed said: commands run by corral may not use its socket";
  for (const auto& mode : kModes) {
    CAPTURE(mode);
    const bool full = mode == "danger-full-access";
    CHECK(attempt(s.socket(), {"--mode", mode, "--workspace", t.ws}, {"unix-connect", link}) ==
          (full ? refused : "errno=EACCES"));
    CHECK(attempt(s.socket(), {"--mode", mode, "--workspace", t.ws, "--allow-socket", link}, {"unix-connect", link}) ==
          refused);
  }
  // The connecting process hands its connections to a child and exits at once: the supervisor
  // must still know they come from a sandbox.
  CHECK(attempt(s.socket(), {"--workspace", t.ws}, {"unix-connect-orphan", link, "20"}) == "connect failed");
  CHECK(attempt(s.socket(), {"--workspace", t.ws, "--allow-socket", link}, {"unix-connect-orphan", link, "20"}) ==
        "open=0 of 640");

  // What such a connection is worth: from a read-only, network-denied sandbox, ask the
  // supervisor for a danger-full-access command with the network, writing outside.
  proto::ExecArgs a;
  a.argv = {kHelper, "write-file", t.outside + "/escaped", "escaped"};
  a.mode = proto::Mode::danger_full_access;
  a.network = proto::Network::allowed;
  proto::Frame hello = proto::make_hello("escapee"), exec = proto::make_exec(1, a);
  std::string frames(hello.begin(), hello.end());
  frames.append(exec.begin(), exec.end());
  put(t.ws + "/frames", frames);
  std::string r = attempt(s.socket(), {"--mode", "read-only", "--workspace", t.ws, "--allow-socket", link},
                          {"orphan-exec", link, "20", t.ws + "/frames"});
  CAPTURE(r);
  CHECK(r == "open=0 of 640");
  CHECK_FALSE(path_exists(t.outside + "/escaped"));
  if (path_exists(t.outside + "/escaped")) MESSAGE("escaped: " << read_file(t.outside + "/escaped"));
}

TEST_CASE("8. /proc shows only the sandbox; host processes cannot be signalled") {
  Supervisor s;
  const std::string me = std::to_string(::getpid()), server = std::to_string(s.pid());
  for (const auto& mode : kModes) {
    CAPTURE(mode);
    // init (PID 1) and the command itself.
    CHECK(attempts(s.socket(), {"--mode", mode}, {"proc-count", "kill0 " + me, "kill0 " + server}) ==
          std::vector<std::string>{"2", "errno=ESRCH", "errno=ESRCH"});
  }
}

TEST_CASE("9. ptrace is refused") {
  Supervisor s;
  for (const auto& mode : kModes) {
    CAPTURE(mode);
    CHECK(attempts(s.socket(), {"--mode", mode}, {"ptrace-traceme", "ptrace-attach-child", "ptrace-attach 1"}) ==
          std::vector<std::string>{"errno=EPERM", "errno=EPERM", "errno=EPERM"});
  }
}

TEST_CASE("10. the supervisor's environment cannot be read through /proc") {
  const std::string secret = "corral-escape-secret-" + std::to_string(::getpid());
  Supervisor s({}, {"CORRAL_ESCAPE_SECRET=" + secret});
  REQUIRE(read_file("/proc/" + std::to_string(s.pid()) + "/environ").find(secret) != std::string::npos);
  for (const auto& mode : kModes) {
    CAPTURE(mode);
    // /proc/1 is the sandbox's init, a clone of the supervisor: its environ is the supervisor's,
    // and reading it needs ptrace access to init, which the command does not have.
    CHECK(attempts(s.socket(), {"--mode", mode},
                   {"environ-has /proc/1/environ " + secret, "environ-scan " + secret,
                    "environ-has /proc/self/environ " + secret, "read-file /proc/1/mem"}) ==
          std::vector<std::string>{"errno=EACCES", "secret=absent", "ok secret=absent", "errno=EACCES"});
  }
}

TEST_CASE("11. a fork bomb under --pids 16 ends, leaves nothing, and the supervisor still serves") {
  Supervisor s;
  for (const auto& mode : kModes) {
    CAPTURE(mode);
    const std::string marker = unique_marker("bomb");
    if (nonroot()) {
      MESSAGE("non-root supervisor: no cgroup-pids, so --pids is refused and the bomb never starts");
      check_cap_refused(s.socket(), "cgroup-pids",
                        {"exec", "--json", "--mode", mode, "--pids", "16", "--", kHelper, "fork-bomb", marker});
      CHECK(processes_with(marker).empty());
      CHECK(attempt(s.socket(), {"--mode", mode}, {"write-file", "/tmp/after"}) == "ok");
      continue;
    }
    auto start = std::chrono::steady_clock::now();
    auto r = client({"exec", "--json", "--mode", mode, "--pids", "16", "--timeout", "20s", "--", kHelper, "fork-bomb",
                  marker},
                 s.socket());
    auto took = std::chrono::steady_clock::now() - start;
    CAPTURE(r.out);
    CHECK(r.exit_code == 0);
    CHECK(json_field(r.out, "status") == "exited");
    CHECK(json_field(r.out, "stdout") == "fork errno=EAGAIN\\n");
    CHECK(took < 10s);
    CHECK(r.out.find("\"cgroup-pids\"") != std::string::npos);
    CHECK(wait_until([&] { return processes_with(marker).empty(); }, 5s));
    CHECK(attempt(s.socket(), {"--mode", mode}, {"write-file", "/tmp/after"}) == "ok");
  }
}

TEST_CASE("11b. without --pids, a fork bomb ends at the supervisor's default bound, with or without cgroups") {
  // RLIMIT_NPROC, counted in the sandbox's own user namespace: root and non-root alike.
  Supervisor s({"--default-pids", "64"});
  auto st = client({"status"}, s.socket());
  CHECK(st.out.find("at most 64 processes per command without --pids") != std::string::npos);
  for (const auto& mode : kModes) {
    CAPTURE(mode);
    const std::string marker = unique_marker("bomb");
    auto r = client({"exec", "--json", "--mode", mode, "--timeout", "20s", "--", kHelper, "fork-bomb", marker}, s.socket());
    CAPTURE(r.out);
    CHECK(r.exit_code == 0);
    CHECK(json_field(r.out, "status") == "exited");
    CHECK(json_field(r.out, "stdout") == "fork errno=EAGAIN\\n");  // the bomb stopped before 256
    CHECK(r.out.find("\"rlimits\"") != std::string::npos);
    CHECK(wait_until([&] { return processes_with(marker).empty(); }, 5s));
  }
  // The default (2048) lets the same bomb reach its own end; 0 means none.
  Supervisor plain;
  CHECK(client({"status"}, plain.socket()).out.find("at most 2048 processes per command") != std::string::npos);
  auto r = client({"exec", "--json", "--", kHelper, "fork-bomb", unique_marker("bomb")}, plain.socket());
  CHECK(json_field(r.out, "stdout") == "fork ok\\n");
  Supervisor none({"--default-pids", "0"});
  CHECK(client({"status"}, none.socket()).out.find("no process bound without --pids") != std::string::npos);
  // --pids 0 is unlimited, said explicitly: the default bound does not apply to it.
  auto lifted = client({"exec", "--json", "--pids", "0", "--", kHelper, "fork-bomb", unique_marker("bomb")}, s.socket());
  CAPTURE(lifted.out);
  CHECK(json_field(lifted.out, "stdout") == "fork ok\\n");
  auto bad = client({"serve", "--socket", s.dir() + "/x.sock", "--default-pids", "2000000"}, "");
  CHECK(bad.exit_code != 0);
}

TEST_CASE("12. past --memory 64M: memory_limit") {
  Supervisor s;
  if (nonroot()) {
    MESSAGE("non-root supervisor: no cgroup-memory, so --memory is refused");
    check_cap_refused(s.socket(), "cgroup-memory", {"exec", "--json", "--memory", "64M", "--", kHelper, "alloc", "200"});
    return;
  }
  auto r = client({"exec", "--json", "--memory", "64M", "--timeout", "20s", "--", kHelper, "alloc", "200"}, s.socket());
  CAPTURE(r.out);
  CHECK(r.exit_code == 137);
  CHECK(json_field(r.out, "status") == "memory_limit");
  CHECK(json_field(r.out, "stdout").empty());
  CHECK(json_number(r.out, "memory_peak_kb") >= 60000);
  CHECK(r.out.find("\"cgroup-memory\"") != std::string::npos);
}

TEST_CASE("12b. without --memory, a command ends at the supervisor's default memory bound; --memory 0 lifts it") {
  Supervisor s({"--default-memory", "64M"});
  auto st = client({"status"}, s.socket());
  CAPTURE(st.out);
  // Enforced exactly where the host has a memory cgroup (root here; a non-root supervisor has none).
  const bool cgroup = missing_layer(s.socket(), "cgroup-memory").empty();
  CHECK(cgroup == (st.out.find("  memory     64M     yes  a memory cgroup per command") != std::string::npos));
  if (!cgroup) {
    // Not enforced is said, never refused: the same command runs, and its result lacks the layer.
    MESSAGE("no memory cgroup for this supervisor: the default is reported not enforced");
    CHECK(st.out.find("  memory     64M     no   no memory cgroup on this host") != std::string::npos);
    auto r = client({"exec", "--json", "--", "true"}, s.socket());
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("\"cgroup-memory\"") == std::string::npos);
    return;
  }
  auto r = client({"exec", "--json", "--timeout", "20s", "--", kHelper, "alloc", "200"}, s.socket());
  CAPTURE(r.out);
  CHECK(r.exit_code == 137);
  CHECK(json_field(r.out, "status") == "memory_limit");
  CHECK(r.out.find("\"cgroup-memory\"") != std::string::npos);
  // 0 is unlimited, said explicitly: no default applies.
  auto free = client({"exec", "--json", "--memory", "0", "--timeout", "20s", "--", kHelper, "alloc", "200"}, s.socket());
  CAPTURE(free.out);
  CHECK(free.exit_code == 0);
  CHECK(json_field(free.out, "status") == "exited");
  CHECK(free.out.find("\"cgroup-memory\"") == std::string::npos);
  // A named scope's cap is a ceiling: 0 is over it, refused naming both sides.
  auto scope = client({"scope", "create", "--memory", "100M"}, s.socket());
  REQUIRE(scope.exit_code == 0);
  const std::string id = scope.out.substr(0, scope.out.find('\n'));
  auto over = client({"exec", "--scope", id, "--memory", "0", "--", "true"}, s.socket());
  CHECK(over.exit_code == 125);
  CHECK(over.err.find("--memory 0 (unlimited) is over the scope's --memory 100M") != std::string::npos);
  // --default-memory 0: no bound, and status says so.
  Supervisor none({"--default-memory", "0"});
  CHECK(client({"status"}, none.socket()).out.find("serve --default-memory 0: no memory bound") != std::string::npos);
  auto unbounded = client({"exec", "--json", "--timeout", "20s", "--", kHelper, "alloc", "200"}, none.socket());
  CHECK(json_field(unbounded.out, "status") == "exited");
  auto bad = client({"serve", "--socket", s.dir() + "/x.sock", "--default-memory", "1K"}, "");
  CHECK(bad.exit_code != 0);
}

TEST_CASE("13. past --cpu-time 500ms: cpu_limit, long before the timeout") {
  Supervisor s;
  if (nonroot()) {
    MESSAGE("non-root supervisor: no cgroup-cpu-time, so --cpu-time is refused (and --cpus, no cgroup-cpu)");
    check_cap_refused(s.socket(), "cgroup-cpu-time", {"exec", "--json", "--cpu-time", "500ms", "--", kHelper, "spin", "30"});
    check_cap_refused(s.socket(), "cgroup-cpu", {"exec", "--json", "--cpus", "1", "--", kHelper, "spin", "30"});
    return;
  }
  auto start = std::chrono::steady_clock::now();
  auto r = client({"exec", "--json", "--cpu-time", "500ms", "--timeout", "20s", "--", kHelper, "spin", "30"}, s.socket());
  auto took = std::chrono::steady_clock::now() - start;
  CAPTURE(r.out);
  CHECK(r.exit_code == 137);
  CHECK(json_field(r.out, "status") == "cpu_limit");
  CHECK(json_field(r.out, "timed_out") == "false");
  CHECK(json_number(r.out, "wall_ms") >= 500);
  CHECK(json_number(r.out, "wall_ms") < 20000);
  CHECK(took < 20s);
  CHECK(json_number(r.out, "user_cpu_ms") + json_number(r.out, "sys_cpu_ms") >= 450);
}

TEST_CASE("14. past --max-file-size 1M: EFBIG, and the file stops at 1 MiB") {
  Supervisor s;
  Tree t;
  for (const auto& mode : kModes) {
    CAPTURE(mode);
    const std::string file = mode == "read-only" ? "/tmp/big" : t.ws + "/big-" + mode;
    CHECK(attempt(s.socket(), {"--mode", mode, "--workspace", t.ws, "--max-file-size", "1M"},
                  {"fill-file", file, "4000000"}) == "errno=EFBIG after=1048576");
    if (mode != "read-only") CHECK(std::filesystem::file_size(file) == 1048576);
  }
}

TEST_CASE("15. setsid + double fork + SIGTERM ignored, under --timeout 1s: timed_out, nothing left") {
  Supervisor s;
  for (const auto& mode : kModes) {
    CAPTURE(mode);
    const std::string marker = "/tmp/" + unique_marker("escape") + ".pids";  // inside the sandbox's /tmp
    auto start = std::chrono::steady_clock::now();
    auto r = client({"exec", "--json", "--mode", mode, "--timeout", "1s", "--grace", "200ms", "--", kHelper, "escape",
                  marker},
                 s.socket());
    auto took = std::chrono::steady_clock::now() - start;
    CAPTURE(r.out);
    CHECK(r.exit_code == 124);
    CHECK(json_field(r.out, "status") == "timed_out");
    CHECK(json_field(r.out, "timed_out") == "true");
    CHECK(took < 10s);
    CHECK(wait_until([&] { return processes_with(marker).empty(); }, 5s));
  }
}

TEST_CASE("16. file tools through the CLI: every refused path shape, and the working cases") {
  Supervisor s;
  Tree t;
  const std::string ws = t.ws;
  REQUIRE(::symlink((t.outside + "/file").c_str(), (ws + "/esc").c_str()) == 0);
  REQUIRE(::symlink("../outside/file", (ws + "/esc-rel").c_str()) == 0);
  REQUIRE(::symlink((t.outside + "/created").c_str(), (ws + "/esc-new").c_str()) == 0);
  REQUIRE(::symlink("/proc/self/root", (ws + "/procroot").c_str()) == 0);
  hand_over(ws);  // before the hard link, which shares the outside file's inode
  REQUIRE(::link((t.outside + "/file").c_str(), (ws + "/hard").c_str()) == 0);
  const std::string escapes =
      "is or goes through a symlink, which corral does not follow below a directory a sandbox may write";
  struct Refusal {
    std::string tool;  // read | write | ls
    std::vector<std::string> extra;
    std::string path, message;
  };
  const std::vector<Refusal> refusals = {
      {"read", {}, ws + "/../outside/file", "'" + ws + "/../outside/file': '..' is not allowed"},
      {"write", {}, ws + "/../outside/new", "'" + ws + "/../outside/new': '..' is not allowed"},
      {"read", {}, "../x", "'../x': '..' is not allowed"},
      {"ls", {}, ws + "/..", "'" + ws + "/..': '..' is not allowed"},
      {"read", {}, t.outside + "/file", "'" + t.outside + "/file': not beneath any allowed root"},
      {"write", {}, t.outside + "/new", "'" + t.outside + "/new': not beneath any allowed root"},
      {"read", {}, "/etc/shadow", "'/etc/shadow': not beneath any allowed root"},
      {"ls", {}, t.outside, "'" + t.outside + "': not beneath any allowed root"},
      {"read", {}, "/proc/self/root/etc/passwd", "'/proc/self/root/etc/passwd': not beneath any allowed root"},
      {"read", {}, ws + "/esc", "'" + ws + "/esc': " + escapes},
      {"read", {}, ws + "/esc-rel", "'" + ws + "/esc-rel': " + escapes},
      {"write", {}, ws + "/esc", "'" + ws + "/esc': " + escapes},
      {"write", {}, ws + "/esc-new", "'" + ws + "/esc-new': " + escapes},
      {"read", {}, ws + "/procroot/etc/passwd", "'" + ws + "/procroot/etc/passwd': " + escapes},
      {"write", {}, ws + "/procroot" + t.outside + "/new", "'" + ws + "/procroot" + t.outside + "/new': " + escapes},
      {"ls", {}, ws + "/procroot", "'" + ws + "/procroot': " + escapes},
      {"write", {"--mode", "read-only"}, ws + "/ro.txt", "writes are refused in read-only mode (but to /tmp, the scope's temp dir)"},
  };
  for (const auto& r : refusals) {
    CAPTURE(r.tool);
    CAPTURE(r.path);
    std::vector<std::string> args = {r.tool, "--workspace", ws};
    args.insert(args.end(), r.extra.begin(), r.extra.end());
    args.push_back(r.path);
    CliRun run = cli_in(args, s.socket(), "pwned");
    CHECK(run.exit_code == 1);
    CHECK(run.out.empty());
    CHECK(run.err == "corral: " + r.message + "\n");
  }
  // A read-only scope's /tmp is writable, to its commands and so to the file tools.
  const std::string ro = scope_id_of(cli_in({"scope", "create", "--mode", "read-only"}, s.socket(), ""));
  CliRun put_tmp = cli_in({"write", "--scope", ro, "/tmp/in.txt"}, s.socket(), "data\n");
  CHECK(put_tmp.exit_code == 0);
  CHECK(cli_in({"exec", "--scope", ro, "--", "/bin/cat", "/tmp/in.txt"}, s.socket(), "").out == "data\n");
  CHECK(cli_in({"write", "--scope", ro, "--workspace", ws, ws + "/ro2.txt"}, s.socket(), "x").exit_code == 1);
  CHECK_FALSE(path_exists(ws + "/ro2.txt"));
  cli_in({"scope", "close", ro}, s.socket(), "");
  // Invalid UTF-8 needs --binary.
  CliRun bad = cli_in({"write", "--workspace", ws, ws + "/bin"}, s.socket(), "ok\xff");
  CHECK(bad.exit_code == 1);
  CHECK(bad.err == "corral: '" + ws + "/bin': data is not valid UTF-8 (byte offset 2); write it with --binary\n");
  CHECK_FALSE(path_exists(ws + "/bin"));
  // Usage errors.
  CHECK(cli_in({"write", "--workspace", ws}, s.socket(), "x").exit_code == 2);
  CHECK(cli_in({"read", "--mode", "bogus", ws + "/x"}, s.socket(), "").exit_code == 2);

  // Nothing outside changed; the links are still links.
  CHECK(read_file(t.outside + "/file") == kOriginal);
  CHECK_FALSE(path_exists(t.outside + "/new"));
  CHECK_FALSE(path_exists(t.outside + "/created"));
  CHECK(std::filesystem::is_symlink(ws + "/esc"));

  // The working cases.
  CliRun w = cli_in({"write", "--workspace", ws, ws + "/hello.txt"}, s.socket(), "hello\n");
  CHECK(w.exit_code == 0);
  CHECK(w.err.empty());
  CHECK(read_file(ws + "/hello.txt") == "hello\n");
  CliRun rd = cli_in({"read", "--workspace", ws, ws + "/hello.txt"}, s.socket(), "");
  CHECK(rd.exit_code == 0);
  CHECK(rd.out == "hello\n");
  CliRun ls = cli_in({"ls", "--json", "--workspace", ws, ws}, s.socket(), "");
  CHECK(ls.exit_code == 0);
  CHECK(ls.out.find("{\"name\":\"hello.txt\",\"type\":\"file\",\"size\":6,") != std::string::npos);
  CHECK(cli_in({"write", "--binary", "--workspace", ws, ws + "/bin"}, s.socket(), "ok\xff").exit_code == 0);
  CHECK(read_file(ws + "/bin") == "ok\xff");
  // A hard link in the workspace to a file outside: the atomic write replaces the link, never
  // the file outside.
  CHECK(cli_in({"write", "--workspace", ws, ws + "/hard"}, s.socket(), "mine").exit_code == 0);
  CHECK(read_file(ws + "/hard") == "mine");
  CHECK(read_file(t.outside + "/file") == kOriginal);
}

TEST_CASE("17. status reports every layer available; a default exec enforces the base layers") {
  Supervisor s;
  // The supervisor under test is who this run says: root, or nobody with no supplementary group.
  const std::string proc = read_file("/proc/" + std::to_string(s.pid()) + "/status");
  const std::string id = nonroot() ? "65534" : "0";
  CHECK(proc.find("\nUid:\t" + id + "\t" + id + "\t" + id + "\t" + id + "\n") != std::string::npos);
  CHECK(proc.find("\nGid:\t" + id + "\t" + id + "\t" + id + "\t" + id + "\n") != std::string::npos);
  if (nonroot()) CHECK(proc.find("\nGroups:\t \n") != std::string::npos);  // none (the kernel ends the list with ' ')
  auto st = client({"status", "--json"}, s.socket());
  CHECK(st.exit_code == 0);
  auto reported = [&](const std::string& layer, bool available) {
    return st.out.find("{\"name\":\"" + layer + "\",\"available\":" + (available ? "true," : "false,")) !=
           std::string::npos;
  };
  for (const char* layer : {"user-ns", "mount-ns", "pid-ns", "ipc-ns", "uts-ns", "net-ns", "landlock", "seccomp",
                            "mount-view", "host-ipc"}) {
    CAPTURE(layer);
    CHECK(reported(layer, true));
  }
  const std::vector<std::string> cgroups = {"cgroup-memory", "cgroup-pids", "cgroup-cpu", "cgroup-cpu-time", "cgroup-kill"};
  if (!nonroot()) {
    for (const auto& layer : cgroups) CHECK_MESSAGE(reported(layer, true), layer);
    CHECK(reported("idmapped-mounts", true));
    CHECK(reported("temp-size", true));
  } else {
    // The documented differences of a non-root supervisor (README, "Who the command runs as"):
    // cgroups belong to root (the suite delegates none to nobody), so every cgroup layer is
    // missing; idmapping a mount needs root, so the layer is not probed at all (workspaces are
    // bound as they are); nobody has no /etc/subgid range, so groups-dropped is missing.
    for (const auto& layer : cgroups) CHECK_MESSAGE(reported(layer, false), layer);
    CHECK(st.out.find("\"name\":\"idmapped-mounts\"") == std::string::npos);
    CHECK(reported("groups-dropped", false));
    CHECK(st.out.find("uid 65534 has no range in /etc/subgid") != std::string::npos);
    CHECK(reported("temp-size", false));  // no tmpfs: plain host directories, unbounded
    CHECK(st.out.find("a non-root supervisor cannot mount a tmpfs") != std::string::npos);
  }
  auto r = client({"exec", "--json", "--", kHelper, "exit", "0"}, s.socket());
  CHECK(r.exit_code == 0);
  auto from = r.out.find("\"enforced\":[");
  REQUIRE(from != std::string::npos);
  const std::string enforced = r.out.substr(from, r.out.find(']', from) - from);
  for (const char* layer : {"user-ns", "mount-ns", "pid-ns", "net-ns", "landlock", "seccomp", "mount-view", "host-ipc"}) {
    CAPTURE(layer);
    CHECK(enforced.find("\"" + std::string(layer) + "\"") != std::string::npos);
  }
  CHECK((enforced.find("\"temp-size\"") != std::string::npos) == !nonroot());
}

TEST_CASE("extra: another scope's temp dir is out of reach when the temp root is outside /tmp") {
  // Each scope has a private temp dir under the temp root; the sandbox uid owns them all. Under
  // /tmp the sandbox's own /tmp hides them; elsewhere the mount view must. Scope A is a detached
  // scope (it outlives the CLI that made it); each attempt below runs in its connection's own.
  ServerAt s(kHostDir);
  CliRun created = client({"scope", "create", "--detach"}, s.socket());
  REQUIRE(created.exit_code == 0);
  const std::string scope_a = scope_id_of(created);
  CliRun wrote = client({"exec", "--json", "--scope", scope_a, "--", kHelper, "write-file", "/tmp/scope-secret",
                         "SCOPE A SECRET"},
                        s.socket());
  REQUIRE(json_field(wrote.out, "stdout") == "ok\\n");
  const std::string temp_a = json_field(wrote.out, "temp_dir");
  REQUIRE(read_file(temp_a + "/scope-secret") == "SCOPE A SECRET");
  for (const auto& mode : kModes) {
    CAPTURE(mode);
    auto r = attempts(s.socket(), {"--mode", mode},
                      {"read-file " + temp_a + "/scope-secret", "write-file " + temp_a + "/from-b"});
    // The temp root is masked (an empty mode-000 tmpfs) in every mode.
    CHECK(r == std::vector<std::string>{"errno=EACCES", "errno=EACCES"});
  }
  CHECK_FALSE(path_exists(temp_a + "/from-b"));
  CHECK(client({"scope", "close", scope_a}, s.socket()).exit_code == 0);
}

namespace {

// `corral scope create OPTS`: the new scope's id (the last line of its output).
std::string make_scope(const std::string& socket, std::vector<std::string> opts) {
  std::vector<std::string> args = {"scope", "create"};
  args.insert(args.end(), opts.begin(), opts.end());
  CliRun r = client(args, socket);
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  return scope_id_of(r);
}

}  // namespace

TEST_CASE("18. an explicit stricter mode or network holds inside a looser scope") {
  Supervisor s;
  Tree t;
  Listener l;
  const std::string port = std::to_string(l.port());
  const std::string loose = make_scope(s.socket(), {"--mode", "danger-full-access", "--net", "allowed"});
  // Absent: the scope's (the host's loopback, the host's file system).
  CHECK(attempt(s.socket(), {"--scope", loose}, {"tcp-connect", "127.0.0.1", port}) == "ok");
  CHECK(wait_until([&] { return l.accepted() == 1; }, 2s));
  CHECK(attempt(s.socket(), {"--scope", loose}, {"write-file", t.outside + "/by-scope"}) == "ok");
  // Explicit --net denied: the command's own network namespace, whatever its mode.
  for (const auto& mode : kModes) {
    CAPTURE(mode);
    CHECK(attempt(s.socket(), {"--scope", loose, "--mode", mode, "--net", "denied"}, {"tcp-connect", "127.0.0.1", port}) ==
          "connect errno=ECONNREFUSED");
  }
  CHECK(l.accepted() == 1);
  // Explicit --mode workspace-write / read-only: confined.
  CHECK(attempts(s.socket(), {"--scope", loose, "--mode", "workspace-write", "--workspace", t.ws},
                 {"write-file " + t.outside + "/file", "write-file " + t.ws + "/mine", "read-file /etc/shadow"}) ==
        std::vector<std::string>{"errno=EROFS", "ok", "errno=EACCES"});
  CHECK(attempts(s.socket(), {"--scope", loose, "--mode", "read-only", "--workspace", t.ws},
                 {"write-file " + t.outside + "/file", "write-file " + t.ws + "/mine2"}) ==
        std::vector<std::string>{"errno=EROFS", "errno=EROFS"});
  CHECK(read_file(t.outside + "/file") == kOriginal);
  CHECK_FALSE(path_exists(t.ws + "/mine2"));
}

TEST_CASE("19. a request over its scope's ceiling is refused, naming both sides, for everything that runs in it") {
  Supervisor s;
  Tree t;
  std::vector<std::string> ceiling_opts = {"--mode", "read-only", "--net", "denied", "--workspace", t.ws, "--memory", "64M"};
  // A non-root supervisor has no cgroup-memory: a scope with a memory cap is refused, naming
  // the layer, and the ceiling is tested without one.
  const std::string no_memory = nonroot() ? missing_layer(s.socket(), "cgroup-memory") : "";
  if (nonroot()) {
    REQUIRE(!no_memory.empty());
    std::vector<std::string> args = {"scope", "create"};
    args.insert(args.end(), ceiling_opts.begin(), ceiling_opts.end());
    CliRun r = client(args, s.socket());
    CHECK(r.exit_code == 1);
    CHECK(r.err == refusal("cgroup-memory", no_memory));
    ceiling_opts.resize(ceiling_opts.size() - 2);
  }
  const std::string ceiling = make_scope(s.socket(), ceiling_opts);
  struct Over {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Over> overs = {
      {{"exec", "--scope", ceiling, "--mode", "workspace-write", "--", "true"},
       "mode workspace-write is over the scope's mode read-only"},
      {{"exec", "--scope", ceiling, "--mode", "danger-full-access", "--", "true"},
       "mode danger-full-access is over the scope's mode read-only"},
      {{"exec", "--scope", ceiling, "--net", "allowed", "--", "true"}, "network allowed is over the scope's network denied"},
      {{"exec", "--scope", ceiling, "--workspace", t.outside, "--", "true"},
       "workspace " + t.outside + " is not beneath the scope's workspaces " + t.ws},
      // The nonroot ceiling has no cap: the request's passes the ceiling and lacks its layer.
      {{"exec", "--scope", ceiling, "--memory", "128M", "--", "true"},
       nonroot() ? chomp(refusal("cgroup-memory", no_memory).substr(8)) : "--memory 128M is over the scope's --memory 64M"},
      {{"exec", "--scope", ceiling, "--bind", t.ws + ":/tmp/w:rw", "--", "true"},
       "--bind " + t.ws + ":/tmp/w:rw is writable; the scope's mode is read-only"},
      {{"exec", "--scope", ceiling, "--background", "--net", "allowed", "--", "true"},
       "network allowed is over the scope's network denied"},
      {{"exec", "--scope", ceiling, "--authorize-cmd", "true", "--mode", "workspace-write", "--", "true"},
       "mode workspace-write is over the scope's mode read-only"},
      {{"worker", "start", "w", "--scope", ceiling, "--python", "--net", "allowed"},
       "network allowed is over the scope's network denied"},
      {{"scope", "create", "--parent", ceiling, "--mode", "danger-full-access"},
       "mode danger-full-access is over the scope's mode read-only"},
      {{"write", "--scope", ceiling, "--mode", "workspace-write", t.ws + "/x"},
       "mode workspace-write is over the scope's mode read-only"},
  };
  for (const auto& o : overs) {
    CAPTURE(o.args);
    CliRun r = cli_in(o.args, s.socket(), "data");
    CHECK(r.exit_code == (o.args[0] == "exec" ? 125 : 1));
    CHECK(r.err == "corral: " + o.message + "\n");
  }
  CHECK_FALSE(path_exists(t.ws + "/x"));
  // What stays within the ceiling runs, under the scope's cap when it asks for none (nonroot:
  // no cap, so the allocation succeeds and no peak is measured).
  CliRun within = client({"exec", "--scope", ceiling, "--json", "--workspace", t.ws, "--", kHelper, "alloc", "128"}, s.socket());
  CHECK(json_field(within.out, "status") == (nonroot() ? "exited" : "memory_limit"));
  if (nonroot()) CHECK(json_field(within.out, "memory_peak_kb") == "null");
  CHECK(json_field(within.out, "mode") == "read-only");
  CHECK(json_field(within.out, "network") == "denied");
  // A child scope narrows further; its own children are bounded by it.
  if (!nonroot()) {
    const std::string child = make_scope(s.socket(), {"--parent", ceiling, "--memory", "32M"});
    CHECK(client({"exec", "--scope", child, "--memory", "64M", "--", "true"}, s.socket()).err ==
          "corral: --memory 64M is over the scope's --memory 32M\n");
    CHECK(client({"scope", "create", "--parent", child, "--net", "allowed"}, s.socket()).err ==
          "corral: network allowed is over the scope's network denied\n");
    return;
  }
  const std::string child = make_scope(s.socket(), {"--parent", ceiling, "--workspace", t.ws});
  CHECK(client({"exec", "--scope", child, "--mode", "workspace-write", "--", "true"}, s.socket()).err ==
        "corral: mode workspace-write is over the scope's mode read-only\n");
  CHECK(client({"scope", "create", "--parent", child, "--net", "allowed"}, s.socket()).err ==
        "corral: network allowed is over the scope's network denied\n");
}

TEST_CASE("20. file tools obey the scope: no write in a read-only scope, its deny-read and protect apply") {
  Supervisor s;
  Tree t;
  put(t.ws + "/secret", "SCOPE SECRET");
  REQUIRE(::mkdir((t.ws + "/.git").c_str(), 0755) == 0);
  put(t.ws + "/.git/config", kOriginal);
  REQUIRE(::symlink("secret", (t.ws + "/to-secret").c_str()) == 0);
  hand_over(t.ws);
  const std::string ro = make_scope(s.socket(), {"--mode", "read-only", "--workspace", t.ws});
  for (const auto& extra : {std::vector<std::string>{}, std::vector<std::string>{"--mode", "read-only"}}) {
    std::vector<std::string> args = {"write", "--scope", ro};
    args.insert(args.end(), extra.begin(), extra.end());
    args.push_back(t.ws + "/new");
    CliRun w = cli_in(args, s.socket(), "pwned");
    CHECK(w.exit_code == 1);
    CHECK(w.err == "corral: writes are refused in read-only mode (but to /tmp, the scope's temp dir)\n");
  }
  CHECK_FALSE(path_exists(t.ws + "/new"));
  CHECK(cli_in({"read", "--scope", ro, t.ws + "/secret"}, s.socket(), "").out == "SCOPE SECRET");

  const std::string guarded = make_scope(
      s.socket(), {"--workspace", t.ws, "--deny-read", t.ws + "/secret", "--protect", t.ws + "/.git"});
  const std::string denied = "is unreadable here (--deny-read)";
  // A symlink to the denied file is refused before it is followed: file tools follow no link
  // beneath their roots (escape_test 23).
  const std::string link = "is or goes through a symlink, which corral does not follow below a directory a sandbox may write";
  for (const std::string& path : {t.ws + "/secret", t.ws + "/to-secret", std::string("secret")}) {
    CAPTURE(path);
    const std::string why = path == t.ws + "/to-secret" ? link : denied;
    CliRun r = cli_in({"read", "--scope", guarded, path}, s.socket(), "");
    CHECK(r.exit_code == 1);
    CHECK(r.err == "corral: '" + path + "': " + why + "\n");
    CliRun w = cli_in({"write", "--scope", guarded, path}, s.socket(), "pwned");
    CHECK(w.exit_code == 1);
    CHECK(w.err == "corral: '" + path + "': " + why + "\n");
  }
  CliRun p = cli_in({"write", "--scope", guarded, t.ws + "/.git/config"}, s.socket(), "pwned");
  CHECK(p.exit_code == 1);
  CHECK(p.err == "corral: '" + t.ws + "/.git/config': read-only (--protect " + t.ws + "/.git)\n");
  CHECK(cli_in({"write", "--scope", guarded, t.ws + "/.git/hooks-new"}, s.socket(), "x").exit_code == 1);
  CHECK(read_file(t.ws + "/secret") == "SCOPE SECRET");
  CHECK(read_file(t.ws + "/.git/config") == kOriginal);
  CHECK_FALSE(path_exists(t.ws + "/.git/hooks-new"));
  // Control: the rest of the workspace is written and read as before.
  CHECK(cli_in({"write", "--scope", guarded, t.ws + "/ok.txt"}, s.socket(), "fine").exit_code == 0);
  CHECK(cli_in({"read", "--scope", guarded, "ok.txt"}, s.socket(), "").out == "fine");
}

TEST_CASE("21. a scope's --deny-read and --protect apply to every request in it, in every mode") {
  Supervisor s;
  Tree t;
  put(t.ws + "/secret", "SCOPE SECRET");
  REQUIRE(::mkdir((t.ws + "/.git").c_str(), 0755) == 0);
  hand_over(t.ws);
  const std::string scope = make_scope(s.socket(), {"--mode", "danger-full-access", "--workspace", t.ws, "--deny-read",
                                                    t.ws + "/secret", "--protect", t.ws + "/.git"});
  for (const auto& mode : kModes) {
    CAPTURE(mode);
    CHECK(attempts(s.socket(), {"--scope", scope, "--mode", mode, "--deny-read", t.outside + "/file"},
                   {"read-file " + t.ws + "/secret", "read-file " + t.outside + "/file", "write-file " + t.ws + "/.git/x"}) ==
          std::vector<std::string>{"errno=EACCES", "errno=EACCES", "errno=EROFS"});
  }
  CHECK(read_file(t.ws + "/secret") == "SCOPE SECRET");
  CHECK_FALSE(path_exists(t.ws + "/.git/x"));
  // The result record shows the effective policy.
  CliRun r = client({"exec", "--scope", scope, "--json", "--mode", "read-only", "--", "true"}, s.socket());
  CHECK(json_field(r.out, "mode") == "read-only");
  CHECK(json_field(r.out, "network") == "denied");
  CHECK(r.out.find("\"deny_read\":[\"" + t.ws + "/secret\"]") != std::string::npos);
  CHECK(r.out.find("\"protect\":[\"" + t.ws + "/.git\"]") != std::string::npos);
  // So does the authorization description the client judges.
  const std::string desc = t.outside + "/description.json";  // the client writes it: any uid may
  CliRun a = client({"exec", "--scope", scope, "--mode", "read-only", "--authorize-cmd", "cat > " + desc, "--", "true"},
                 s.socket());
  CHECK(a.exit_code == 0);
  const std::string d = read_file(desc);
  CAPTURE(d);
  CHECK(d.find("\"mode\":\"read-only\"") != std::string::npos);
  CHECK(d.find("\"network\":\"denied\"") != std::string::npos);
  CHECK(d.find("\"deny_read\":[\"" + t.ws + "/secret\"]") != std::string::npos);
  CHECK(d.find("\"protect\":[\"" + t.ws + "/.git\"]") != std::string::npos);
}

TEST_CASE("22. /sys/fs/cgroup and /proc/self/cgroup show neither host pids nor any supervisor's cgroups") {
  Supervisor s;
  // The host's /proc/self/cgroup lines, each with its path replaced by "/": what a command in
  // a cgroup namespace of its own reads (read-file shows newlines as '.').
  std::string expected = "ok ";
  {
    std::istringstream in(read_file("/proc/self/cgroup"));
    for (std::string line; std::getline(in, line);) expected += line.substr(0, line.rfind(':') + 1) + "/.";
  }
  REQUIRE(expected.size() > 3);
  for (const auto& mode : kModes) {
    for (const auto& caps : {std::vector<std::string>{}, std::vector<std::string>{"--pids", "64"}}) {
      CAPTURE(mode);
      CAPTURE(caps);
      std::vector<std::string> opts = {"--mode", mode};
      opts.insert(opts.end(), caps.begin(), caps.end());
      if (nonroot() && !caps.empty()) {
        MESSAGE("non-root supervisor: no cgroup-pids, so the capped variant is refused");
        check_cap_refused(s.socket(), "cgroup-pids", {"exec", "--mode", mode, "--pids", "64", "--", kHelper, "exit", "0"});
        continue;
      }
      CHECK(attempts(s.socket(), opts, {"list-dir /sys/fs/cgroup", "list-dir /sys/fs/cgroup/pids", "read-file /proc/self/cgroup"}) ==
            std::vector<std::string>{"errno=EACCES", "errno=EACCES", expected});
    }
  }
}

namespace {

// Unix sockets on the host, mode 0777, in an ordinary directory: a stream listener that
// answers every connection with "host-listener" and closes it, and a datagram socket that
// counts what it receives.
class HostUnix {
 public:
  explicit HostUnix(const std::string& dir) : stream_path_(dir + "/host.sock"), dgram_path_(dir + "/host.dgram") {
    stream_ = bound(SOCK_STREAM, stream_path_);
    REQUIRE(::listen(stream_, 16) == 0);
    dgram_ = bound(SOCK_DGRAM, dgram_path_);
    thread_ = std::thread([this] {
      while (!stop_) {
        pollfd p{stream_, POLLIN, 0};
        if (::poll(&p, 1, 50) <= 0) continue;
        int c = ::accept4(stream_, nullptr, nullptr, SOCK_CLOEXEC);
        if (c < 0) continue;
        ++accepted_;
        [[maybe_unused]] auto n = ::send(c, "host-listener", 13, MSG_NOSIGNAL);
        ::close(c);
      }
    });
  }
  ~HostUnix() {
    stop_ = true;
    thread_.join();
    ::close(stream_);
    ::close(dgram_);
    ::unlink(stream_path_.c_str());
    ::unlink(dgram_path_.c_str());
  }
  const std::string& stream_path() const { return stream_path_; }
  const std::string& dgram_path() const { return dgram_path_; }
  int accepted() const { return accepted_; }
  int datagrams() {
    char buf[64];
    while (::recv(dgram_, buf, sizeof buf, MSG_DONTWAIT) > 0) ++datagrams_;
    return datagrams_;
  }

 private:
  static int bound(int type, const std::string& path) {
    int fd = ::socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
    REQUIRE(fd >= 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    REQUIRE(path.size() < sizeof a.sun_path);
    std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
    ::unlink(path.c_str());
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::chmod(path.c_str(), 0777) == 0);
    return fd;
  }
  std::string stream_path_, dgram_path_;
  int stream_ = -1, dgram_ = -1;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  int datagrams_ = 0;
  std::thread thread_;
};

const std::string kReached = "connected closed said: host-listener";

}  // namespace

TEST_CASE("19. host IPC: host Unix sockets are out of reach in the confining modes, with the network denied or allowed") {
  Supervisor s;
  Tree t;
  HostUnix outside(t.outside);  // an ordinary directory, visible read-only
  HostUnix in_ws(t.ws);         // inside the workspace, writable in workspace-write
  const std::string var_tmp = make_dir_under("/var/tmp", "corral-escape-host-");
  REQUIRE(::chmod(var_tmp.c_str(), 0755) == 0);
  HostUnix host_var_tmp(var_tmp);  // under the host's /var/tmp, which the sandbox does not see
  int reached = 0, datagrams = 0;
  for (const auto& mode : kModes) {
    for (const std::string net : {"denied", "allowed"}) {
      CAPTURE(mode);
      CAPTURE(net);
      const bool full = mode == "danger-full-access";
      auto r = attempts(s.socket(), {"--mode", mode, "--net", net, "--workspace", t.ws},
                        {"unix-connect " + outside.stream_path(), "unix-connect " + in_ws.stream_path(),
                         "unix-connect " + host_var_tmp.stream_path(),
                         "unix-connect /proc/self/root" + outside.stream_path(),
                         "unix-dgram-send " + outside.dgram_path(), "socketpair-dgram",
                         // The command's own sockets: by absolute and relative path (cwd /tmp), abstract
                         // (named per test process: with the network allowed, parallel runs share it).
                         "unix-self /tmp/own.sock", "unix-self own-relative.sock", "unix-self @corral-own-" + mode + net + "-" + std::to_string(::getpid())});
      if (full) {
        CHECK(r == std::vector<std::string>{kReached, kReached, kReached, kReached, "ok", "ok", "ok", "ok", "ok"});
        reached += 4;
        ++datagrams;
      } else {
        // /proc/self/root is a magic link: refused before any lookup.
        CHECK(r == std::vector<std::string>{"errno=EACCES", "errno=EACCES", "errno=ENOENT", "errno=ELOOP",
                                            "socket errno=EAFNOSUPPORT", "errno=EAFNOSUPPORT", "ok", "ok", "ok"});
      }
    }
  }
  CHECK(wait_until([&] { return outside.accepted() + in_ws.accepted() + host_var_tmp.accepted() == reached; }, 3s));
  CHECK(outside.datagrams() == datagrams);
  std::error_code ec;
  std::filesystem::remove_all(var_tmp, ec);
}

TEST_CASE("19. host IPC: /run and /var/run are empty, /var/tmp is private like /tmp") {
  Supervisor s;
  const std::string marker = unique_marker("var-tmp");
  for (const auto& mode : kModes) {
    CAPTURE(mode);
    const bool full = mode == "danger-full-access";
    auto r = attempts(s.socket(), {"--mode", mode},
                      {"list-dir /run", "list-dir /var/run", "write-file /var/tmp/" + marker, "read-file /tmp/" + marker});
    REQUIRE(r.size() == 4);
    if (full) {
      CHECK(r[0] != "ok");
      CHECK(r[2] == "ok");
      CHECK(r[3] == "errno=ENOENT");
      CHECK(path_exists("/var/tmp/" + marker));
      std::remove(("/var/tmp/" + marker).c_str());
    } else {
      CHECK(r == std::vector<std::string>{"ok", "ok", "ok", "ok pwned"});
      CHECK_FALSE(path_exists("/var/tmp/" + marker));
    }
  }
}

TEST_CASE("19. host IPC: --allow-socket makes exactly the named host socket reachable, and is audited") {
  Supervisor s;
  Tree t;
  HostUnix outside(t.outside), other(t.ws);
  const std::string var_tmp = make_dir_under("/var/tmp", "corral-escape-host-");
  REQUIRE(::chmod(var_tmp.c_str(), 0755) == 0);
  HostUnix hidden(var_tmp);  // not in the view at all: --allow-socket shows it at its own path
  int reached = 0;
  for (const std::string mode : {"read-only", "workspace-write"}) {
    for (const std::string net : {"denied", "allowed"}) {
      CAPTURE(mode);
      CAPTURE(net);
      auto r = attempts(s.socket(),
                        {"--mode", mode, "--net", net, "--workspace", t.ws, "--allow-socket", outside.stream_path(),
                         "--allow-socket", hidden.stream_path()},
                        {"unix-connect " + outside.stream_path(), "unix-connect " + hidden.stream_path(),
                         "unix-connect " + other.stream_path(), "unix-dgram-send " + outside.dgram_path()});
      CHECK(r == std::vector<std::string>{kReached, kReached, "errno=EACCES", "socket errno=EAFNOSUPPORT"});
      reached += 2;
    }
  }
  CHECK(wait_until([&] { return outside.accepted() + hidden.accepted() == reached; }, 3s));
  CHECK(other.accepted() == 0);
  CHECK(s.log().find("\"allow_sockets\":[\"" + outside.stream_path() + "\",\"" + hidden.stream_path() + "\"]") !=
        std::string::npos);

  // Refused: a path through a symlink (a sandbox could have planted it), and a non-socket.
  REQUIRE(::symlink(outside.stream_path().c_str(), (t.ws + "/link.sock").c_str()) == 0);
  auto link = client({"exec", "--allow-socket", t.ws + "/link.sock", "--", kHelper, "exit", "0"}, s.socket());
  CHECK(link.exit_code == 125);
  CHECK(link.err.find("goes through a symlink") != std::string::npos);
  auto file = client({"exec", "--allow-socket", t.outside + "/file", "--", kHelper, "exit", "0"}, s.socket());
  CHECK(file.exit_code == 125);
  CHECK(file.err.find("is not a socket") != std::string::npos);
  std::error_code ec;
  std::filesystem::remove_all(var_tmp, ec);
}

TEST_CASE("19. host IPC: a second supervisor owned by the sandbox uid cannot be used from a sandbox") {
  // `corral serve` run by uid 65534 (the sandbox uid of a root supervisor, and the uid of the
  // nonroot run's supervisor, whose sandboxes run as itself) with a 0777 socket in an
  // ordinary directory: the uid check passes for a sandboxed peer (same uid), so the broker is
  // the first gate and the peer check (any corral sandbox, not only its own) the second.
  Supervisor s;
  Tree t;
  const std::string dir = t.base + "/nested";
  REQUIRE(::mkdir(dir.c_str(), 0755) == 0);
  REQUIRE(::chown(dir.c_str(), 65534, 65534) == 0);
  const std::string sock = dir + "/sock/corral.sock";
  pid_t nested = spawn_as(nobody(), {kCorral, "serve", "--socket", sock, "--temp-root", dir}, "", dir + "/serve.log",
                          dir + "/serve.log");
  REQUIRE(nested > 0);
  REQUIRE(wait_until([&] { return path_exists(sock); }, 20s));
  REQUIRE(::chmod(sock.c_str(), 0777) == 0);
  REQUIRE(::chmod((dir + "/sock").c_str(), 0755) == 0);
  const std::string refused = "connected closed said: commands run by corral may not use its socket";
  for (const auto& mode : kModes) {
    for (const std::string net : {"denied", "allowed"}) {
      CAPTURE(mode);
      CAPTURE(net);
      const bool full = mode == "danger-full-access";
      CHECK(attempt(s.socket(), {"--mode", mode, "--net", net}, {"unix-connect", sock}) ==
            (full ? refused : "errno=EACCES"));
      CHECK(attempt(s.socket(), {"--mode", mode, "--net", net, "--allow-socket", sock}, {"unix-connect", sock}) ==
            refused);
    }
  }
  // The nested supervisor names why: the peer runs inside another supervisor's sandbox.
  CHECK(read_file(dir + "/serve.log").find("it runs inside a corral sandbox (another supervisor's)") !=
        std::string::npos);
  ::kill(nested, SIGTERM);
  wait_process(nested, 30s);
}

TEST_CASE("19. host IPC with a non-root supervisor: the same rules") {
  Tree t;
  HostUnix outside(t.outside);
  const std::string dir = t.base + "/user";
  REQUIRE(::mkdir(dir.c_str(), 0755) == 0);
  REQUIRE(::chown(dir.c_str(), 65534, 65534) == 0);
  const std::string sock = dir + "/sock/corral.sock";
  auto as_nobody = [&](const std::vector<std::string>& argv, const std::string& out) {
    pid_t pid = spawn_as(nobody(), argv, "", out, out);
    REQUIRE(pid > 0);
    return pid;
  };
  // No /etc/subgid range for nobody: kept groups accepted explicitly (escape_test 26).
  pid_t server = as_nobody({kCorral, "serve", "--socket", sock, "--temp-root", dir, "--allow-supplementary-groups"},
                           t.base + "/serve.log");
  REQUIRE(wait_until([&] { return path_exists(sock); }, 20s));
  int reached = 0;
  for (const auto& mode : kModes) {
    for (const std::string net : {"denied", "allowed"}) {
      CAPTURE(mode);
      CAPTURE(net);
      const bool full = mode == "danger-full-access";
      const std::string out = t.base + "/exec.out";
      pid_t exec = as_nobody({kCorral, "exec", "--socket", sock, "--mode", mode, "--net", net, "--", kHelper, "batch",
                              "unix-connect " + outside.stream_path(), "unix-self /tmp/own.sock",
                              "unix-self @corral-own"},
                             out);
      CHECK(wait_process(exec, 30s) == 0);
      CHECK(read_file(out) == (full ? kReached : "errno=EACCES") + "\nok\nok\n");
      if (full) ++reached;
      pid_t allowed = as_nobody({kCorral, "exec", "--socket", sock, "--mode", mode, "--net", net, "--allow-socket",
                                 outside.stream_path(), "--", kHelper, "unix-connect", outside.stream_path()},
                                out);
      CHECK(wait_process(allowed, 30s) == 0);
      CHECK(read_file(out) == kReached + "\n");
      ++reached;
    }
  }
  CHECK(wait_until([&] { return outside.accepted() == reached; }, 3s));
  ::kill(server, SIGTERM);
  wait_process(server, 30s);
}

TEST_CASE("23. a link planted by one run never redirects a later exec, bind or file-tool call") {
  Supervisor s;
  Tree t;
  const std::string secret_dir = t.base + "/root-only";
  REQUIRE(::mkdir(secret_dir.c_str(), 0700) == 0);
  put(secret_dir + "/secret", "ROOT ONLY");
  // Run 1: a workspace-write command plants links in its (root-owned, idmapped) workspace.
  CHECK(attempt(s.socket(), {"--workspace", t.ws}, {"symlink", secret_dir, t.ws + "/out"}) == "ok");
  CHECK(attempt(s.socket(), {"--workspace", t.ws}, {"symlink", "/etc", t.ws + "/etc-link"}) == "ok");
  struct stat st {};
  REQUIRE(::lstat((t.ws + "/out").c_str(), &st) == 0);
  REQUIRE(S_ISLNK(st.st_mode));
  // Owned by root on the host (root supervisor, idmapped workspace) or by the supervisor's uid
  // (non-root): either way, ownership proves nothing.
  CHECK(st.st_uid == workspace_owner());

  // Run 2, in every mode: the link is refused wherever a host path is named.
  for (const auto& mode : kModes) {
    CAPTURE(mode);
    for (const std::vector<std::string>& opts :
         {std::vector<std::string>{"--mode", mode, "--workspace", t.ws + "/out"},
          std::vector<std::string>{"--mode", mode, "--workspace", t.ws, "--bind", t.ws + "/out:/mnt/out:ro"},
          std::vector<std::string>{"--mode", mode, "--workspace", t.ws + "/out/.", "--protect", t.ws + "/etc-link"},
          std::vector<std::string>{"--mode", mode, "--workspace", t.ws, "--deny-read", t.ws + "/out/secret"}}) {
      CAPTURE(opts);
      std::string r = attempt(s.socket(), opts, {"write-file", secret_dir + "/planted"});
      CHECK(r.find("corral exec exit ") == 0);
      CHECK(r.find("is a symlink below a directory a sandbox may write") != std::string::npos);
    }
  }
  // The file tools: the workspace root and the path itself.
  CliRun w = cli_in({"write", "--workspace", t.ws + "/out", t.ws + "/out/planted"}, s.socket(), "pwned");
  CHECK(w.exit_code == 1);
  CHECK(w.err.find("is a symlink below a directory a sandbox may write") != std::string::npos);
  CliRun rd = cli_in({"read", "--workspace", t.ws + "/out", t.ws + "/out/secret"}, s.socket(), "");
  CHECK(rd.exit_code == 1);
  CHECK(rd.out.find("ROOT ONLY") == std::string::npos);
  CHECK_FALSE(path_exists(secret_dir + "/planted"));
  CHECK(read_file(secret_dir + "/secret") == "ROOT ONLY");
  // Control: links in system directories are still followed (merged /usr: /bin -> usr/bin).
  CHECK(attempt(s.socket(), {"--bind", "/bin:/tmp/bin:ro"}, {"stat", "/tmp/bin/sh"}).rfind("corral exec exit", 0) != 0);
}

// Root supervisor only: what it checks is that a root supervisor, which takes each peer's own
// credentials, gives an allowed uid no more than that uid's reach. A non-root supervisor cannot
// take another uid's credentials and documents that an allowed uid gets the supervisor uid's
// reach (README, "--allow-uid and a non-root supervisor"); host_path_test covers that side.
// The nonroot run excludes the suite "root-supervisor" (tests/CMakeLists.txt).
TEST_CASE("24. an allowed non-root peer gains nothing its uid lacks (root supervisor)" *
          doctest::test_suite("root-supervisor")) {
  if (nonroot()) {
    MESSAGE("not applicable to a non-root supervisor: it cannot take a peer's credentials (see above)");
    return;
  }
  if (::geteuid() != 0) {
    MESSAGE("skipped: needs a root supervisor and a second uid (this test runs as uid " << ::geteuid() << ")");
    return;
  }
  ServerAt s("/var/tmp", {"--allow-uid", "65534", "--allow-uid", "1001"});
  Tree t;  // ws: root-owned 0755, not writable by 65534
  const std::string own = t.base + "/nobody-ws";
  REQUIRE(::mkdir(own.c_str(), 0755) == 0);
  REQUIRE(::chown(own.c_str(), 65534, 65534) == 0);
  const std::string root_only = t.base + "/root-only";
  REQUIRE(::mkdir(root_only.c_str(), 0700) == 0);
  put(root_only + "/secret", "ROOT ONLY");

  // A root-owned workspace: refused, in exec and in the file tools.
  CliRun r = cli_as(65534, {"exec", "--workspace", t.ws, "--", kHelper, "write-file", t.ws + "/by-nobody"}, s.socket());
  CHECK(r.exit_code != 0);
  CHECK(r.err.find("the requesting uid may not write it") != std::string::npos);
  CHECK_FALSE(path_exists(t.ws + "/by-nobody"));
  r = cli_as(65534, {"write", "--workspace", t.ws, t.ws + "/by-nobody"}, s.socket(), "pwned");
  CHECK(r.exit_code == 1);
  CHECK_FALSE(path_exists(t.ws + "/by-nobody"));
  // Nor can it read what its uid cannot: a bind source, a file-tool read.
  r = cli_as(65534, {"exec", "--bind", root_only + ":/mnt/x:ro", "--", kHelper, "read-file", "/mnt/x/secret"}, s.socket());
  CHECK(r.exit_code != 0);
  CHECK(r.out.find("ROOT ONLY") == std::string::npos);
  r = cli_as(65534, {"read", "--mode", "danger-full-access", root_only + "/secret"}, s.socket());
  CHECK(r.exit_code == 1);
  CHECK(r.out.find("ROOT ONLY") == std::string::npos);
  // Root may: the same requests from root work.
  CHECK(cli_in({"read", "--mode", "danger-full-access", root_only + "/secret"}, s.socket(), "").out == "ROOT ONLY");

  // Its own workspace works, for commands and file tools; what it writes is its own.
  r = cli_as(65534, {"exec", "--workspace", own, "--", kHelper, "write-file", own + "/from-sandbox", "mine"}, s.socket());
  CHECK(r.exit_code == 0);
  CHECK(r.out == "ok\n");
  CHECK(read_file(own + "/from-sandbox") == "mine");
  r = cli_as(65534, {"write", "--workspace", own, own + "/from-tool"}, s.socket(), "tool");
  CHECK(r.exit_code == 0);
  struct stat st {};
  REQUIRE(::stat((own + "/from-tool").c_str(), &st) == 0);
  CHECK(st.st_uid == 65534);

  // Another owner's workspace (uid 1001, mode 0755: the sandbox uid could not write it as it
  // is): idmapped to the sandbox uid, so its owner's commands write there, as that owner.
  const std::string other = t.base + "/uid1001-ws";
  REQUIRE(::mkdir(other.c_str(), 0755) == 0);
  REQUIRE(::chown(other.c_str(), 1001, 1001) == 0);
  r = cli_as(1001, {"exec", "--workspace", other, "--", kHelper, "write-file", other + "/from-sandbox", "1001's"}, s.socket());
  CHECK(r.exit_code == 0);
  CHECK(r.out == "ok\n");
  REQUIRE(::stat((other + "/from-sandbox").c_str(), &st) == 0);
  CHECK(st.st_uid == 1001);
  // ... and 65534 may not name it writable.
  r = cli_as(65534, {"exec", "--workspace", other, "--", kHelper, "write-file", other + "/x"}, s.socket());
  CHECK(r.exit_code != 0);
  CHECK_FALSE(path_exists(other + "/x"));

  // A directory anyone may write (root's, sticky, as /var/tmp) is a workspace 65534 may name,
  // but writing a directory is not owning what is in it: root's and 1001's files there stay
  // theirs (the idmap carries the peer's ids, not the owner's), and what it creates is 65534's.
  const std::string shared = t.base + "/sticky";
  REQUIRE(::mkdir(shared.c_str(), 0755) == 0);
  REQUIRE(::chmod(shared.c_str(), 01777) == 0);
  put(shared + "/root-secret", "ROOT ONLY");
  REQUIRE(::chmod((shared + "/root-secret").c_str(), 0600) == 0);
  put(shared + "/root-code", "root's");
  REQUIRE(::chmod((shared + "/root-code").c_str(), 0644) == 0);
  put(shared + "/1001-secret", "1001 ONLY");
  REQUIRE(::chown((shared + "/1001-secret").c_str(), 1001, 1001) == 0);
  REQUIRE(::chmod((shared + "/1001-secret").c_str(), 0600) == 0);
  const std::vector<std::string> peer_ws = {"exec", "--workspace", shared, "--", kHelper};
  auto as_nobody = [&](std::vector<std::string> op) {
    std::vector<std::string> args = peer_ws;
    args.insert(args.end(), op.begin(), op.end());
    return cli_as(65534, args, s.socket());
  };
  r = as_nobody({"read-file", shared + "/root-secret"});
  CHECK(r.out.find("ROOT ONLY") == std::string::npos);
  CHECK(r.out.find("EACCES") != std::string::npos);
  r = as_nobody({"read-file", shared + "/1001-secret"});
  CHECK(r.out.find("1001 ONLY") == std::string::npos);
  CHECK(r.out.find("EACCES") != std::string::npos);
  r = as_nobody({"write-file", shared + "/root-code", "pwned"});
  CHECK(r.out.find("EACCES") != std::string::npos);
  CHECK(read_file(shared + "/root-code") == "root's");
  r = as_nobody({"chmod", shared + "/root-secret", "0666"});
  CHECK(r.out.find("EPERM") != std::string::npos);
  r = as_nobody({"write-file", shared + "/by-nobody", "mine"});
  CHECK(r.out == "ok\n");
  REQUIRE(::stat((shared + "/by-nobody").c_str(), &st) == 0);
  CHECK(st.st_uid == 65534);
  REQUIRE(::stat((shared + "/root-secret").c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0600);
}

TEST_CASE("25. --protect and --deny-read guard the thing: no ancestor can be renamed, within a run or across runs") {
  Supervisor s;
  Tree t;
  const std::string git = t.ws + "/.git";
  REQUIRE(::mkdir(git.c_str(), 0755) == 0);
  REQUIRE(::mkdir((git + "/hooks").c_str(), 0755) == 0);
  put(git + "/hooks/sample", "sample");
  REQUIRE(::mkdir((t.ws + "/a").c_str(), 0755) == 0);
  REQUIRE(::mkdir((t.ws + "/a/b").c_str(), 0755) == 0);
  put(t.ws + "/a/b/secret", "SECRET");
  hand_over(t.ws);
  for (const auto& mode : kModes) {
    CAPTURE(mode);
    const std::string busy = mode == "read-only" ? "errno=EROFS" : "errno=EBUSY";
    const std::vector<std::string> opts = {"--mode", mode, "--workspace", t.ws, "--protect", git + "/hooks",
                                           "--deny-read", t.ws + "/a/b/secret"};
    // Within a run: move the parent away and recreate the path.
    auto r = attempts(s.socket(), opts,
                      {"rename " + git + " " + t.ws + "/.git.orig", "mkdir " + git + "/hooks2",
                       "write-file " + git + "/hooks/pre-commit", "rename " + t.ws + "/a " + t.ws + "/c",
                       "rename " + t.ws + "/a/b " + t.ws + "/a/d", "read-file " + t.ws + "/a/b/secret"});
    CHECK(r == std::vector<std::string>{busy, mode == "read-only" ? "errno=EROFS" : "ok", "errno=EROFS", busy, busy,
                                        "errno=EACCES"});
    ::rmdir((git + "/hooks2").c_str());
    // Across runs: run 1 renames the denied file's directory, run 2 reads under the new name.
    CHECK(attempt(s.socket(), opts, {"rename", t.ws + "/a", t.ws + "/moved"}) == busy);
    CHECK(attempt(s.socket(), opts, {"read-file", t.ws + "/moved/b/secret"}) == "errno=ENOENT");
  }
  CHECK_FALSE(path_exists(git + "/hooks/pre-commit"));
  CHECK_FALSE(path_exists(t.ws + "/.git.orig"));
  CHECK(read_file(t.ws + "/a/b/secret") == "SECRET");

  // .git may be a file (a worktree or submodule): guarded the same way.
  const std::string wt = t.base + "/wt";
  REQUIRE(::mkdir(wt.c_str(), 0755) == 0);
  put(wt + "/.git", "gitdir: /elsewhere\n");
  hand_over(wt);
  const std::vector<std::string> opts = {"--workspace", wt, "--protect", wt + "/.git"};
  auto r = attempts(s.socket(), opts, {"write-file " + wt + "/.git", "rename " + wt + "/.git " + wt + "/x", "unlink " + wt + "/.git"});
  CHECK(r == std::vector<std::string>{"errno=EROFS", "errno=EBUSY", "errno=EBUSY"});
  CHECK(read_file(wt + "/.git") == "gitdir: /elsewhere\n");
  // A guarded path that does not exist cannot be guarded, so the request is refused.
  std::string missing = attempt(s.socket(), {"--workspace", t.ws, "--protect", t.ws + "/nope/hooks"}, {"exit", "0"});
  CHECK(missing.find("corral exec exit") == 0);
  CHECK(missing.find("No such file or directory") != std::string::npos);
}

namespace {

// `corral serve` as uid/gid 65534 holding the supplementary group 4242, as an unprivileged user
// in some group would; with `subgid` non-empty it sees that text as /etc/subgid (bound over it
// in a mount namespace of its own, so the host's file is untouched).
struct NobodyServer {
  TempDir dir;
  std::string socket;
  pid_t pid = -1;
  // `nproc_soft` > 0: its soft RLIMIT_NPROC.
  NobodyServer(const std::string& subgid, std::vector<std::string> extra = {}, rlim_t nproc_soft = 0) {
    ::chmod(dir.path().c_str(), 0777);
    socket = dir.path() + "/nobody/corral.sock";
    put(dir.path() + "/subgid", subgid);
    std::vector<std::string> argv = {kCorral, "serve", "--socket", socket, "--temp-root", dir.path()};
    extra = with_prepare_flags(std::move(extra));
    argv.insert(argv.end(), extra.begin(), extra.end());
    // Bind the subgid text over /etc/subgid in a mount namespace of the child's own, before it
    // becomes nobody; the paths are made here, the child only makes system calls.
    const std::string subgid_file = dir.path() + "/subgid";
    auto bind_subgid = [&subgid, &subgid_file, nproc_soft] {
      struct rlimit nproc {};
      if (nproc_soft && (::getrlimit(RLIMIT_NPROC, &nproc) != 0 || (nproc.rlim_cur = nproc_soft,
                                                                    ::setrlimit(RLIMIT_NPROC, &nproc) != 0)))
        return false;
      return subgid.empty() ||
             (::unshare(CLONE_NEWNS) == 0 && ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0 &&
              ::mount(subgid_file.c_str(), "/etc/subgid", nullptr, MS_BIND, nullptr) == 0);
    };
    const std::string log = dir.path() + "/serve.log";
    pid = spawn_as(Identity{65534, 65534, {4242}}, argv, "", log, log, {}, bind_subgid);
    REQUIRE(pid > 0);
    REQUIRE(wait_until([&] { return proto::Client::connect_raw(socket).ok() || !running(pid); }, 20s));
    REQUIRE(running(pid));
  }
  ~NobodyServer() {
    ::kill(pid, SIGTERM);
    wait_process(pid, 30s);
  }
  std::string log() const { return read_file(dir.path() + "/serve.log"); }
};

std::string groups_line(const std::string& out) {
  auto at = out.find("Groups:");
  if (at == std::string::npos) return "<no Groups line: " + out + ">";
  std::string line = out.substr(at, out.find('\n', at) - at);
  while (!line.empty() && (line.back() == ' ' || line.back() == '\t')) line.pop_back();
  return line;
}

}  // namespace

TEST_CASE("25. a root inside a guarded path is refused: no bind or workspace shows what a guard hides") {
  Supervisor s;
  Tree t;
  const std::string hooks = t.ws + "/.git/hooks";
  REQUIRE(std::filesystem::create_directories(hooks));
  put(hooks + "/pre-commit", "#!/bin/sh\n");
  REQUIRE(std::filesystem::create_directories(t.ws + "/secrets/sub"));
  put(t.ws + "/secrets/sub/key", "KEY");
  hand_over(t.ws);
  auto expect_refused = [&](std::vector<std::string> args, const std::string& says) {
    std::string line;
    for (const auto& a : args) line += a + " ";
    CAPTURE(line);
    CliRun r = client(args, s.socket());
    CHECK(r.exit_code != 0);
    CHECK(r.err.find(says) != std::string::npos);
  };
  // The scope's guards are the ceiling's: a request may not step inside them.
  CliRun created = client({"scope", "create", "--workspace", t.ws, "--protect", t.ws + "/.git", "--deny-read",
                           t.ws + "/secrets"},
                          s.socket());
  REQUIRE(created.exit_code == 0);
  const std::string scope = scope_id_of(created);
  expect_refused({"exec", "--scope", scope, "--bind", hooks + ":/opt/h:rw", "--", kHelper, "write-file",
                  "/opt/h/pre-commit", "pwned"},
                 "--bind source " + hooks + " is or lies beneath --protect " + t.ws + "/.git");
  expect_refused({"exec", "--scope", scope, "--workspace", hooks, "--", kHelper, "write-file", hooks + "/pre-commit"},
                 "workspace root " + hooks + " is or lies beneath --protect");
  expect_refused({"exec", "--scope", scope, "--bind", t.ws + "/secrets/sub:/opt/s", "--", kHelper, "read-file",
                  "/opt/s/key"},
                 "--bind source " + t.ws + "/secrets/sub lies beneath --deny-read " + t.ws + "/secrets");
  // The same from a request's own guards, and in a scope created with both.
  expect_refused({"exec", "--workspace", t.ws, "--protect", t.ws + "/.git", "--bind", hooks + ":/opt/h:rw", "--",
                  kHelper, "exit", "0"},
                 "lies beneath --protect");
  expect_refused({"scope", "create", "--deny-read", t.ws + "/secrets", "--workspace", t.ws + "/secrets/sub"},
                 "lies beneath --deny-read");
  // The host's /proc is no bind source: the command has its own.
  expect_refused({"exec", "--bind", "/proc:/opt/p", "--", kHelper, "exit", "0"}, "lies in the host's /proc");
  expect_refused({"exec", "--bind", "/proc/sys:/opt/p", "--", kHelper, "exit", "0"}, "lies in the host's /proc");
  expect_refused({"exec", "--mode", "danger-full-access", "--bind", "/proc/1:/opt/p", "--", kHelper, "exit", "0"},
                 "lies in the host's /proc");
  // A read-only bind inside a protected path protects nothing less: allowed, and read-only.
  CHECK(attempt(s.socket(), {"--scope", scope, "--bind", hooks + ":/opt/h"}, {"write-file", "/opt/h/pre-commit"}) ==
        "errno=EROFS");
  CHECK(read_file(hooks + "/pre-commit") == "#!/bin/sh\n");
  CHECK(read_file(t.ws + "/secrets/sub/key") == "KEY");
  client({"scope", "close", scope}, s.socket());
}

TEST_CASE("26. no sandbox holds supplementary groups, under root and non-root supervisors") {
  const std::vector<std::string> show = {"exec", "--", "/bin/grep", "^Groups:", "/proc/self/status"};
  {
    Supervisor s;
    CliRun r = client(show, s.socket());
    CHECK(r.exit_code == 0);
    CHECK(groups_line(r.out) == "Groups:");
  }
  if (::geteuid() != 0) {
    MESSAGE("skipped the non-root supervisor half: starting one as another uid needs root");
    return;
  }
  REQUIRE(::access("/usr/bin/newgidmap", X_OK) == 0);  // tools/setup.sh installs uidmap
  {
    // With a subgid range, newgidmap lets the sandbox drop the group 4242 the supervisor holds.
    NobodyServer s("nobody:300000:65536\n");
    CAPTURE(s.log());
    CliRun st = cli_as(65534, {"status", "--json"}, s.socket);
    CHECK(st.out.find("{\"name\":\"groups-dropped\",\"available\":true,") != std::string::npos);
    CliRun r = cli_as(65534, show, s.socket);
    CHECK(r.exit_code == 0);
    CHECK(groups_line(r.out) == "Groups:");
  }
  {
    // Without one, the layer is missing: commands are refused, naming it...
    NobodyServer s("");
    CAPTURE(s.log());
    CliRun st = cli_as(65534, {"status", "--json"}, s.socket);
    CHECK(st.out.find("{\"name\":\"groups-dropped\",\"available\":false,") != std::string::npos);
    CliRun r = cli_as(65534, show, s.socket);
    CHECK(r.exit_code == 125);
    CHECK(r.err.find("this host cannot enforce groups-dropped") != std::string::npos);
  }
  {
    // ... unless the operator accepts it explicitly; then the group shows, as documented.
    NobodyServer s("", {"--allow-supplementary-groups"});
    CliRun r = cli_as(65534, show, s.socket);
    CAPTURE(r.err);
    CAPTURE(s.log());
    CHECK(r.exit_code == 0);
    // 4242 is not mapped in the sandbox's user namespace: it shows as the overflow gid.
    CHECK(groups_line(r.out) == "Groups:\t65534");
  }
}

TEST_CASE("26. a non-root supervisor's commands inherit its soft RLIMIT_NPROC, however they start") {
  if (::geteuid() != 0) {
    MESSAGE("skipped: starting a supervisor as another uid needs root");
    return;
  }
  struct rlimit host {};
  REQUIRE(::getrlimit(RLIMIT_NPROC, &host) == 0);
  const rlim_t soft = 4321;
  if (host.rlim_max != RLIM_INFINITY && host.rlim_max <= soft) {
    MESSAGE("skipped: this host's hard RLIMIT_NPROC is " << host.rlim_max);
    return;
  }
  // No process bound of corral's own (--default-pids 0): what the command shows is inherited.
  // The second command of each scope (with --prepare-after 1, also the first) starts from a
  // prepared sandbox, whose server must not pass on a limit lifted above the supervisor's.
  for (const char* after : {"0", "1"}) {
    CAPTURE(after);
    NobodyServer s("", {"--allow-supplementary-groups", "--default-pids", "0", "--prepare-after", after}, soft);
    CAPTURE(s.log());
    CliRun created = cli_as(65534, {"scope", "create", "--detach"}, s.socket);
    REQUIRE(created.exit_code == 0);
    const std::string scope = scope_id_of(created);
    for (int i = 0; i < 2; ++i) {
      CliRun r = cli_as(65534, {"exec", "--scope", scope, "--", "/bin/grep", "^Max processes", "/proc/self/limits"},
                        s.socket);
      CHECK(r.exit_code == 0);
      std::istringstream fields(r.out);
      std::string max, processes, value;
      fields >> max >> processes >> value;
      CHECK(value == std::to_string(soft));
    }
  }
}

TEST_CASE("27. a worker runs the program that was checked, never one planted at its name inside the view") {
  Supervisor s;
  // The trusted program lives under the host's /tmp, a name that inside the view falls in the
  // scope's temp dir, where an earlier command of the scope can plant a file.
  TempDir d;
  REQUIRE(::chmod(d.path().c_str(), 0755) == 0);
  const std::string prog = d.path() + "/prog";
  std::filesystem::copy_file(CORRAL_ECHO_WORKER, prog);
  REQUIRE(::chmod(prog.c_str(), 0755) == 0);
  CliRun created = client({"scope", "create", "--detach"}, s.socket());
  REQUIRE(created.exit_code == 0);
  const std::string scope = scope_id_of(created);
  CliRun plant = client({"exec", "--scope", scope, "--sh",
                      "mkdir -p " + d.path() + " && printf '#!/bin/sh\\ntouch /tmp/planted-ran\\n' > " + prog +
                          " && chmod 755 " + prog + " && echo planted"},
                     s.socket());
  REQUIRE(plant.out == "planted\n");
  CHECK(client({"worker", "start", "w", "--scope", scope, "--", prog}, s.socket()).exit_code == 0);
  CliRun ev = client({"worker", "eval", "w", "--scope", scope, "--request", "hello"}, s.socket());
  CHECK(ev.exit_code == 0);
  CHECK(ev.out == "echo:hello");
  CHECK(client({"exec", "--scope", scope, "--", "/bin/test", "-e", "/tmp/planted-ran"}, s.socket()).exit_code == 1);
  CHECK(client({"scope", "close", scope}, s.socket()).exit_code == 0);
}

// Root supervisor only: a non-root supervisor cannot mount a tmpfs, so its scope temp dirs are
// host directories whose path is the mount root of /tmp (docs/threat-model.md, "What a command
// can still learn about the host"); escape_test 17 checks that it reports temp-size missing.
TEST_CASE("28. /proc/self/mountinfo shows no host temp path and no supervisor pid; /tmp is a bounded tmpfs" *
          doctest::test_suite("root-supervisor")) {
  if (nonroot()) {
    MESSAGE("not applicable to a non-root supervisor: it cannot mount a tmpfs (see above)");
    return;
  }
  Supervisor s;
  for (const auto& mode : kModes) {
    CAPTURE(mode);
    auto r = client({"exec", "--mode", mode, "--", "/bin/cat", "/proc/self/mountinfo"}, s.socket());
    REQUIRE(r.exit_code == 0);
    CAPTURE(r.out);
    // The temp root (corral-<pid>-XXXXXX) and the scope dirs (corral-scope-XXXXXX) appear nowhere.
    CHECK(r.out.find("corral-") == std::string::npos);
    CHECK(r.out.find(s.dir()) == std::string::npos);
    // /tmp (and in the confining modes /var/tmp and /dev/shm) is the root of a tmpfs of its own.
    std::vector<std::string> private_dirs = {"/tmp"};
    if (mode != "danger-full-access") private_dirs.insert(private_dirs.end(), {"/var/tmp", "/dev/shm"});
    for (const auto& dir : private_dirs) {
      CAPTURE(dir);
      std::istringstream in(r.out);
      std::string line, last;
      // mountinfo: ID PARENT MAJ:MIN ROOT MOUNTPOINT ...; the last mount at a path is what it shows.
      while (std::getline(in, line)) {
        std::istringstream f(line);
        std::string id, parent, dev, root, point;
        f >> id >> parent >> dev >> root >> point;
        if (point == dir) last = line;
      }
      CHECK(last.find(" / " + dir + " ") != std::string::npos);
      CHECK(last.find(" - tmpfs ") != std::string::npos);
    }
  }
  // What the scope writes to /tmp is bounded by --temp-size, in the host's memory.
  Supervisor small({"--temp-size", "1M"});
  auto r = client({"exec", "--", "/bin/sh", "-c",
                   "head -c 2000000 /dev/zero > /tmp/f; echo rc=$?; wc -c < /tmp/f; df -k /tmp | tail -n 1"},
                  small.socket());
  CAPTURE(r.out);
  CAPTURE(r.err);
  CHECK(r.out.find("rc=1\n1048576\ntmpfs ") == 0);
  CHECK(r.err.find("No space left on device") != std::string::npos);
  // 0: plain host directories, reported as such.
  Supervisor plain({"--temp-size", "0"});
  auto st = client({"status", "--json"}, plain.socket());
  CHECK(st.out.find("{\"name\":\"temp-size\",\"available\":false,") != std::string::npos);
  auto bad = client({"serve", "--socket", small.dir() + "/other.sock", "--temp-size", "1K"}, "");
  CHECK(bad.exit_code != 0);
  CHECK(bad.err.find("--temp-size must be 0 (unbounded host directories) or between 1M and") != std::string::npos);
}

TEST_CASE("28. init's command line (a copy of the supervisor's) names no supervisor path, prepared or not") {
  Supervisor s;
  for (const auto& mode : kModes) {
    CAPTURE(mode);
    const std::string scope = scope_id_of(client({"scope", "create", "--mode", mode}, s.socket()));
    // A new scope's usual launch, then three in one scope (a prepared sandbox from the second).
    std::vector<std::vector<std::string>> runs = {{"exec", "--mode", mode, "--", "/bin/cat", "/proc/1/cmdline"}};
    for (int i = 0; i < 3; ++i)
      runs.push_back({"exec", "--scope", scope, "--mode", mode, "--", "/bin/cat", "/proc/1/cmdline"});
    for (const auto& run : runs) {
      auto r = client(run, s.socket());
      REQUIRE(r.exit_code == 0);
      CAPTURE(r.out);
      // The area keeps its length (the kernel shows it to its end): blanked after the name.
      CHECK(r.out.rfind("corral-init", 0) == 0);
      CHECK(r.out.find_first_not_of('\0', 11) == std::string::npos);
      CHECK(r.out.find(s.socket()) == std::string::npos);
      CHECK(r.out.find(s.dir()) == std::string::npos);
    }
    client({"scope", "close", scope}, s.socket());
  }
}

TEST_CASE("28. a supervisor whose socket is directly in /tmp leaves its commands' /tmp usable") {
  std::string sock = "/tmp/corral-escape-XXXXXX";
  REQUIRE(::mkdtemp(sock.data()) != nullptr);
  REQUIRE(::rmdir(sock.c_str()) == 0);
  sock += ".sock";
  TempDir logs;
  if (nonroot()) REQUIRE(::chown(logs.path().c_str(), nobody().uid, nobody().gid) == 0);
  const pid_t server = spawn_as(supervisor_as(), serve_argv({"--socket", sock, "--temp-root", logs.path()}), "",
                                logs.path() + "/serve.out", logs.path() + "/serve.log");
  REQUIRE(wait_until(
      [&] { return proto::Client::connect_raw(sock).ok() || !running(server); },
      20s));
  if (nonroot()) {
    // A non-root supervisor's socket directory must be its own: /tmp (root's) is refused.
    CHECK(wait_process(server, 30s) != 0);
    CHECK(read_file(logs.path() + "/serve.log").find("socket directory /tmp is owned by uid 0") != std::string::npos);
    return;
  }
  REQUIRE(running(server));
  for (const auto& mode : kModes) {
    CAPTURE(mode);
    auto r = client({"exec", "--mode", mode, "--", "/bin/sh", "-c", "echo hi > /tmp/f && cat /tmp/f"}, sock);
    CHECK(r.exit_code == 0);
    CHECK(r.out == "hi\n");
    // The socket itself stays out of reach: /tmp in the view is not the host's.
    CHECK(attempts(sock, {"--mode", mode}, {"unix-connect " + sock}) == std::vector<std::string>{"errno=ENOENT"});
  }
  ::kill(server, SIGTERM);
  CHECK(wait_process(server, 30s) == 0);
  std::error_code ec;
  std::filesystem::remove(sock, ec);
  std::filesystem::remove(sock + ".lock", ec);
}

TEST_CASE("29. a command cannot freeze the supervisor by holding its own stdout pipe's lock") {
  // splice(socket -> stdout) holds the stdout pipe's lock while it waits for the socket, which
  // never sends: the supervisor's next read of that pipe would wait uninterruptibly, its loop
  // frozen (no status, no deadline). The filter refuses splice, vmsplice and sendfile.
  Supervisor s;
  const std::string script =
      "import os, socket, sys, threading, time\n"
      "a, b = socket.socketpair()\n"
      "threading.Thread(target=lambda: os.write(1, b'x' * 1500000)).start()\n"
      "time.sleep(0.2)\n"
      "for name, call in (('splice', lambda: os.splice(a.fileno(), 1, 65536)),\n"
      "                   ('sendfile', lambda: os.sendfile(1, a.fileno(), None, 65536))):\n"
      "    try:\n"
      "        call()\n"
      "        print(name, 'ran', file=sys.stderr)\n"
      "    except OSError as e:\n"
      "        print(name, 'errno', e.errno, file=sys.stderr)\n";
  TempDir d;
  if (nonroot()) REQUIRE(::chown(d.path().c_str(), nobody().uid, nobody().gid) == 0);
  for (const auto& mode : kModes) {
    CAPTURE(mode);
    const pid_t cli_pid =
        spawn_as(supervisor_as(),
                 {kCorral, "exec", "--socket", s.socket(), "--mode", mode, "--max-output", "8M", "--timeout", "20s", "--",
                  "/usr/bin/python3", "-c", script},
                 "", d.path() + "/out", d.path() + "/err");
    // Meanwhile the supervisor answers others (the CLI gives up after 10 s without a hello).
    std::this_thread::sleep_for(500ms);
    CHECK(client({"status"}, s.socket()).exit_code == 0);
    const int status = wait_process(cli_pid, 30s);
    CHECK(WIFEXITED(status));
    const std::string err = read_file(d.path() + "/err");
    CHECK_MESSAGE(err.find("splice errno 1\n") != std::string::npos, err);
    CHECK_MESSAGE(err.find("sendfile errno 1\n") != std::string::npos, err);
    CHECK(read_file(d.path() + "/out").size() == 1500000);
  }
}
