// corral_test_helper: a program whose behaviour the tests pick from argv, so that engine
// and end-to-end tests assert exact outcomes instead of relying on shell tricks.
//
//   exit N                    exit with status N
//   signal N                  raise signal N (with the default disposition)
//   sleep SECONDS             sleep, then exit 0
//   write N [out|err|both]    write N bytes ('a'+i%26) to stdout, stderr or alternately
//   env                       print the environment, one NAME=value per line
//   fds                       print the numbers of open fds (from /proc/self/fd), space-separated
//   pwd                       print the working directory
//   cat                       copy stdin to stdout
//   ignore-term SECONDS       ignore SIGTERM and sleep
//   tree PIDFILE N            fork N children that sleep forever; write all pids to PIDFILE
//   escape PIDFILE            double-fork a grandchild that calls setsid and ignores SIGTERM,
//                             write its pid to PIDFILE, then sleep forever
//   flood-then-sleep N S      write N bytes to stdout, then sleep S seconds
//
// Escape attempts (tests/escape_test.cc). Each prints one stable line and exits 0: `ok`
// (sometimes with a detail) or `errno=NAME` for the call that failed, so tests compare strings.
//   write-file PATH [DATA]    open(O_WRONLY|O_CREAT|O_TRUNC) and write DATA (default "pwned")
//   read-file PATH            read it: `ok <first 200 bytes, non-printables as '.'>`
//   list-dir PATH             `ok NAME NAME...` (sorted, without . and ..)
//   link OLD NEW | symlink TARGET PATH | rename OLD NEW | mkdir PATH | unlink PATH
//   socket inet|inet6|unix|netlink|netlink-audit|packet|vsock   socket() of that family
//                             (netlink: NETLINK_ROUTE)
//   loopback tcp|udp IP       a server and its client on IP (127.0.0.1, ::1) inside this one
//                             process, one message each way: `ok` or `CALL errno=..`
//   tcp-connect IP PORT       `socket errno=..`, `connect errno=..` or `ok` (after sending "hi")
//   unix-connect PATH         `errno=..`; else `connected`, then what the server did within 3 s:
//                             ` closed` (+ ` said: TEXT`, the longest printable run it sent) or
//                             ` open` (the server kept the connection)
//   unix-connect-orphan PATH N  up to N times, until a connection stays open: a child makes 32
//                             connections at once, hands them to a grandchild and exits (reaped, so
//                             its pid may be gone when the server looks it up); 100 ms later the
//                             grandchild counts the connections the server has not closed.
//                             `open=K of M`: K kept open of the M made
//   orphan-exec PATH N FRAMES   the same, and on the first connection left open, send the bytes
//                             of file FRAMES (prepared by the test) and wait up to 3 s for the
//                             server to act on them; `open=K of M, frames sent` if it could
//   unix-dgram-send PATH      socket(AF_UNIX, SOCK_DGRAM) and sendto PATH: `socket errno=..`,
//                             `errno=..` or `ok`
//   socketpair-dgram          socketpair(AF_UNIX, SOCK_DGRAM): `ok` or `errno=..`
//   unix-self PATH            a server and a client in this process: bind PATH (relative to the
//                             cwd, or `@NAME` for an abstract name), listen, connect, send "ping"
//                             through: `ok`, or `STEP errno=..`
//   copy SRC DST              copy a file (DST created 0755)
//   chmod PATH OCTAL          chmod
//   create-mode PATH OCTAL    open(O_WRONLY|O_CREAT|O_EXCL) with that mode
//   stat PATH                 `dir|file|socket|other mode=NNNN fs=tmpfs|other` or `errno=..`
//   caps                      `CapInh=.. CapPrm=.. CapEff=.. CapBnd=.. CapAmb=..` (hex, from
//                             /proc/self/status)
//   netns-owner               `own` when our user namespace owns our network namespace,
//                             else `other` or the errno of asking (`errno=EPERM`: an ancestor's)
//   proc-count                number of numeric entries in /proc
//   kill0 PID                 kill(PID, 0)
//   ptrace-traceme | ptrace-attach PID | ptrace-attach-child
//   environ-has PATH SECRET   read PATH: `errno=..`, or `ok secret=absent|present`
//   environ-scan SECRET       every /proc/*/environ: `secret=absent|present`
//   fork-bomb MARKER          fork until fork fails (each child forks once more and sleeps);
//                             `fork errno=NAME` at the first failure, `fork ok` if 256 worked
//   alloc MIB                 allocate and touch MIB MiB, then `ok`
//   spin SECONDS              busy loop for SECONDS of wall time, then `ok`
//   fill-file PATH BYTES      SIGXFSZ ignored; write BYTES in 64 KiB pieces: `ok` or
//                             `errno=NAME after=BYTES_WRITTEN`
//   batch 'ACTION ARGS' ...   several attempts (space-separated words), one line each
#include <arpa/inet.h>
#include <dirent.h>
#include <linux/magic.h>
#include <linux/netlink.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
// This program runs inside sandboxes, where LeakSanitizer cannot work (it needs ptrace, which
// seccomp refuses): an ASan build checks its memory accesses, not its leaks.
extern "C" const char* __asan_default_options() { return "detect_leaks=0"; }
#endif


extern char** environ;

namespace {

void write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      std::exit(3);
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

// Byte i of the whole output (both streams counted together) is 'a' + i % 26.
void write_pattern(long n, const std::string& where) {
  std::vector<char> buf(65536);
  long written = 0;
  int turn = 0;
  while (written < n) {
    // Alternate in 100-byte pieces for "both", so both streams are busy.
    long piece = where == "both" ? 100 : static_cast<long>(buf.size());
    long k = std::min(piece, n - written);
    for (long j = 0; j < k; ++j) buf[static_cast<size_t>(j)] = static_cast<char>('a' + (written + j) % 26);
    int fd = where == "err" ? 2 : where == "both" ? (turn++ % 2 ? 2 : 1) : 1;
    write_all(fd, buf.data(), static_cast<size_t>(k));
    written += k;
  }
}

void write_pids(const char* path, const std::vector<pid_t>& pids) {
  std::string s;
  for (pid_t p : pids) s += std::to_string(p) + "\n";
  std::string tmp = std::string(path) + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  write_all(fd, s.data(), s.size());
  ::close(fd);
  ::rename(tmp.c_str(), path);  // the test sees the whole file or none
}

[[noreturn]] void sleep_forever() {
  for (;;) ::pause();
}

std::string errno_str(int err) {
  const char* name = ::strerrorname_np(err);
  return std::string("errno=") + (name ? name : std::to_string(err).c_str());
}
std::string result_of(long rc) { return rc < 0 ? errno_str(errno) : "ok"; }

std::string printable(const std::string& data, std::size_t max) {
  std::string out;
  for (std::size_t i = 0; i < data.size() && i < max; ++i)
    out += (data[i] >= 0x20 && data[i] < 0x7f) ? data[i] : '.';
  return out;
}

// Reads all of `path` into `out`; errno on failure, 0 on success.
int slurp(const std::string& path, std::string& out) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  char buf[65536];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<std::size_t>(n));
  int err = n < 0 ? errno : 0;
  ::close(fd);
  return err;
}

std::string write_file_attempt(const std::string& path, const std::string& data) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) return errno_str(errno);
  ssize_t w = ::write(fd, data.data(), data.size());
  int err = errno;
  ::close(fd);
  if (w < 0) return errno_str(err);
  return w == static_cast<ssize_t>(data.size()) ? "ok" : "short write";
}

std::string list_dir_attempt(const std::string& path) {
  DIR* d = ::opendir(path.c_str());
  if (!d) return errno_str(errno);
  std::vector<std::string> names;
  errno = 0;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  int err = errno;
  ::closedir(d);
  if (err) return errno_str(err);
  std::sort(names.begin(), names.end());
  std::string out = "ok";
  for (const auto& n : names) out += " " + n;
  return out;
}

int family_of(const std::string& name) {
  if (name == "inet") return AF_INET;
  if (name == "inet6") return AF_INET6;
  if (name == "unix") return AF_UNIX;
  if (name == "netlink") return AF_NETLINK;
  if (name == "packet") return AF_PACKET;
  if (name == "vsock") return AF_VSOCK;
  if (name == "netlink-audit") return AF_NETLINK;
  return -1;
}

std::string socket_attempt(const std::string& family) {
  int f = family_of(family);
  if (f < 0) return "unknown family";
  int type = f == AF_NETLINK ? SOCK_RAW : f == AF_PACKET ? SOCK_DGRAM : SOCK_STREAM;
  int s = ::socket(f, type | SOCK_CLOEXEC, family == "netlink-audit" ? NETLINK_AUDIT : 0);
  if (s < 0) return errno_str(errno);
  ::close(s);
  return "ok";
}

// A server and its client on the command's own loopback, in one process: TCP (listen,
// connect, accept, one message each way) or UDP (bind, sendto, recvfrom). `ok`, or the call
// that failed and its errno.
std::string loopback_attempt(const std::string& proto, const std::string& ip) {
  const bool v6 = ip.find(':') != std::string::npos;
  const int family = v6 ? AF_INET6 : AF_INET;
  sockaddr_storage addr{};
  socklen_t len = v6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  if (v6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&addr);
    a->sin6_family = AF_INET6;
    ::inet_pton(AF_INET6, ip.c_str(), &a->sin6_addr);
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&addr);
    a->sin_family = AF_INET;
    ::inet_pton(AF_INET, ip.c_str(), &a->sin_addr);
  }
  auto* sa = reinterpret_cast<sockaddr*>(&addr);
  const bool tcp = proto == "tcp";
  int server = ::socket(family, (tcp ? SOCK_STREAM : SOCK_DGRAM) | SOCK_CLOEXEC, 0);
  if (server < 0) return "socket " + errno_str(errno);
  if (::bind(server, sa, len) < 0) return "bind " + errno_str(errno);
  if (::getsockname(server, sa, &len) < 0) return "getsockname " + errno_str(errno);
  if (tcp && ::listen(server, 1) < 0) return "listen " + errno_str(errno);
  int client = ::socket(family, (tcp ? SOCK_STREAM : SOCK_DGRAM) | SOCK_CLOEXEC, 0);
  if (client < 0) return "socket " + errno_str(errno);
  char buf[8] = {};
  if (tcp) {
    if (::connect(client, sa, len) < 0) return "connect " + errno_str(errno);
    int conn = ::accept4(server, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) return "accept " + errno_str(errno);
    if (::send(client, "ping", 4, MSG_NOSIGNAL) != 4) return "send " + errno_str(errno);
    if (::recv(conn, buf, 4, MSG_WAITALL) != 4 || std::string(buf, 4) != "ping") return "recv " + errno_str(errno);
    if (::send(conn, "pong", 4, MSG_NOSIGNAL) != 4) return "send " + errno_str(errno);
    if (::recv(client, buf, 4, MSG_WAITALL) != 4 || std::string(buf, 4) != "pong") return "recv " + errno_str(errno);
    ::close(conn);
  } else {
    if (::sendto(client, "ping", 4, 0, sa, len) != 4) return "sendto " + errno_str(errno);
    if (::recv(server, buf, sizeof buf, 0) != 4 || std::string(buf, 4) != "ping") return "recv " + errno_str(errno);
  }
  ::close(client);
  ::close(server);
  return "ok";
}

std::string tcp_connect_attempt(const std::string& ip, const std::string& port) {
  int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return "socket " + errno_str(errno);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(std::atoi(port.c_str())));
  ::inet_pton(AF_INET, ip.c_str(), &a.sin_addr);
  if (::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) < 0) {
    std::string r = "connect " + errno_str(errno);
    ::close(s);
    return r;
  }
  ssize_t w = ::send(s, "hi", 2, MSG_NOSIGNAL);
  ::close(s);
  return w == 2 ? "ok" : "send " + errno_str(errno);
}

std::string unix_connect_attempt(const std::string& path) {
  int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return "socket " + errno_str(errno);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.size() >= sizeof a.sun_path) return "path too long";
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  if (::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) < 0) {
    std::string r = errno_str(errno);
    ::close(s);
    return r;
  }
  // Whatever the server sends within 3 s, until it closes.
  std::string got;
  bool closed = false;
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while (!closed) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now()).count();
    if (left <= 0) break;
    pollfd p{s, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    char buf[4096];
    ssize_t n = ::recv(s, buf, sizeof buf, 0);
    if (n <= 0) closed = true;
    else got.append(buf, static_cast<std::size_t>(n));
  }
  ::close(s);
  std::string best, run;
  for (char c : got + '\0') {
    if (c >= 0x20 && c < 0x7f) {
      run += c;
    } else {
      if (run.size() > best.size()) best = run;
      run.clear();
    }
  }
  std::string r = closed ? "connected closed" : "connected open";
  if (!best.empty()) r += " said: " + best;
  return r;
}

// True if the server has closed `s` (after whatever it sent); false while it is still open.
bool closed_now(int s) {
  char buf[4096];
  for (;;) {
    ssize_t n = ::recv(s, buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0) return true;
    if (n < 0) return errno != EAGAIN && errno != EWOULDBLOCK;
  }
}

sockaddr_un unix_address(const std::string& path, socklen_t& len) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::string name = path;
  if (!name.empty() && name[0] == '@') name[0] = '\0';
  std::memcpy(a.sun_path, name.data(), std::min(name.size(), sizeof a.sun_path - 1));
  len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size() + (path[0] == '@' ? 0 : 1));
  return a;
}

std::string unix_dgram_send(const std::string& path) {
  int s = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return "socket " + errno_str(errno);
  socklen_t len = 0;
  sockaddr_un a = unix_address(path, len);
  ssize_t n = ::sendto(s, "dgram", 5, 0, reinterpret_cast<sockaddr*>(&a), len);
  int err = errno;
  ::close(s);
  return n == 5 ? "ok" : errno_str(err);
}

std::string socketpair_dgram() {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) < 0) return errno_str(errno);
  ::close(sv[0]);
  ::close(sv[1]);
  return "ok";
}

std::string unix_self(const std::string& path) {
  socklen_t len = 0;
  sockaddr_un a = unix_address(path, len);
  int server = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (server < 0) return "socket " + errno_str(errno);
  if (::bind(server, reinterpret_cast<sockaddr*>(&a), len) < 0) return "bind " + errno_str(errno);
  if (::listen(server, 4) < 0) return "listen " + errno_str(errno);
  int client = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (client < 0) return "socket " + errno_str(errno);
  if (::connect(client, reinterpret_cast<sockaddr*>(&a), len) < 0) return "connect " + errno_str(errno);
  int conn = ::accept4(server, nullptr, nullptr, SOCK_CLOEXEC);
  if (conn < 0) return "accept " + errno_str(errno);
  if (::write(client, "ping", 4) != 4) return "write " + errno_str(errno);
  char buf[8] = {};
  if (::read(conn, buf, 4) != 4 || std::memcmp(buf, "ping", 4) != 0) return "read " + errno_str(errno);
  ::close(conn);
  ::close(client);
  ::close(server);
  if (path[0] != '@') ::unlink(path.c_str());
  return "ok";
}

// See unix-connect-orphan and orphan-exec in the usage above.
std::string unix_connect_orphan(const std::string& path, int tries, const std::string& frames_file) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.size() >= sizeof a.sun_path) return "path too long";
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  std::string frames;
  if (!frames_file.empty())
    if (int err = slurp(frames_file, frames)) return "frames " + errno_str(err);
  constexpr int kBurst = 32;  // queued at once, so the server looks most of them up late
  int open_count = 0;
  bool sent = false;
  int made = 0;
  for (int i = 0; i < tries && open_count == 0; ++i) {
    made += kBurst;
    int verdict[2];
    if (::pipe(verdict) < 0) return "pipe " + errno_str(errno);
    pid_t c = ::fork();
    if (c < 0) return "fork " + errno_str(errno);
    if (c == 0) {
      std::vector<int> socks;
      for (int k = 0; k < kBurst; ++k) {
        int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
        if (s < 0 || ::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) < 0) {
          char v[2] = {-1, 0};
          [[maybe_unused]] auto n = ::write(verdict[1], v, 2);
          ::_exit(0);
        }
        socks.push_back(s);
      }
      if (::fork() == 0) {  // the grandchild keeps the connections
        ::usleep(100 * 1000);  // the server refuses at once: an error frame, then close
        char v[2] = {0, 0};
        for (int s : socks) {
          if (closed_now(s)) continue;
          ++v[0];
          if (!frames.empty() && !v[1]) {
            // Use the connection: send the frames, then drain replies until the server is
            // done with them (it closes) or 3 s pass.
            write_all(s, frames.data(), frames.size());
            v[1] = 1;
            auto end = std::chrono::steady_clock::now() + std::chrono::seconds(3);
            while (std::chrono::steady_clock::now() < end) {
              pollfd p{s, POLLIN, 0};
              if (::poll(&p, 1, 100) > 0 && closed_now(s)) break;
            }
          }
        }
        [[maybe_unused]] auto n = ::write(verdict[1], v, 2);
        ::_exit(0);
      }
      ::_exit(0);  // the peer the server sees is gone
    }
    ::close(verdict[1]);
    ::waitpid(c, nullptr, 0);
    char v[2] = {0, 0};
    ssize_t got = ::read(verdict[0], v, 2);
    ::close(verdict[0]);
    if (got != 2 || v[0] < 0) return "connect failed";
    open_count += v[0];
    if (v[1]) {
      sent = true;
      frames.clear();
    }
  }
  std::string r = "open=" + std::to_string(open_count) + " of " + std::to_string(made);
  if (sent) r += ", frames sent";
  return r;
}

std::string copy_attempt(const std::string& src, const std::string& dst) {
  std::string data;
  if (int err = slurp(src, data)) return "read " + errno_str(err);
  int fd = ::open(dst.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
  if (fd < 0) return errno_str(errno);
  write_all(fd, data.data(), data.size());
  ::close(fd);
  return "ok";
}

std::string stat_attempt(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) < 0) return errno_str(errno);
  struct statfs fs {};
  if (::statfs(path.c_str(), &fs) < 0) return "statfs " + errno_str(errno);
  const char* type = S_ISDIR(st.st_mode) ? "dir" : S_ISREG(st.st_mode) ? "file" : S_ISSOCK(st.st_mode) ? "socket" : "other";
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", st.st_mode & 07777);
  return std::string(type) + " mode=" + mode + " fs=" + (fs.f_type == TMPFS_MAGIC ? "tmpfs" : "other");
}

std::string caps() {
  std::string status;
  if (int err = slurp("/proc/self/status", status)) return errno_str(err);
  std::istringstream in(status);
  std::string out;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Cap", 0) != 0) continue;
    auto colon = line.find(':');
    auto value = line.find_first_not_of(" \t", colon + 1);
    // Appended piece by piece: GCC 12 at -O3 warns (-Wrestrict, a false positive) on
    // `"literal" + std::string&&`.
    if (!out.empty()) out += ' ';
    out.append(line, 0, colon).append("=").append(line, value);
  }
  return out;
}

std::string proc_count() {
  DIR* d = ::opendir("/proc");
  if (!d) return errno_str(errno);
  int n = 0;
  while (dirent* e = ::readdir(d))
    if (std::atoi(e->d_name) > 0) ++n;
  ::closedir(d);
  return std::to_string(n);
}

std::string ptrace_attach_attempt(pid_t pid) {
  if (::ptrace(PTRACE_ATTACH, pid, nullptr, nullptr) < 0) return errno_str(errno);
  ::ptrace(PTRACE_DETACH, pid, nullptr, nullptr);
  return "ok";
}

std::string ptrace_attach_child() {
  pid_t child = ::fork();
  if (child < 0) return "fork " + errno_str(errno);
  if (child == 0) {
    for (;;) ::pause();
  }
  std::string r = ptrace_attach_attempt(child);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  return r;
}

std::string environ_has(const std::string& path, const std::string& secret) {
  std::string data;
  if (int err = slurp(path, data)) return errno_str(err);
  return data.find(secret) == std::string::npos ? "ok secret=absent" : "ok secret=present";
}

std::string environ_scan(const std::string& secret) {
  DIR* d = ::opendir("/proc");
  if (!d) return errno_str(errno);
  bool found = false;
  while (dirent* e = ::readdir(d)) {
    if (std::atoi(e->d_name) <= 0) continue;
    std::string data;
    slurp(std::string("/proc/") + e->d_name + "/environ", data);
    if (data.find(secret) != std::string::npos) found = true;
  }
  ::closedir(d);
  return found ? "secret=present" : "secret=absent";
}

std::string fork_bomb() {
  for (int i = 0; i < 256; ++i) {
    pid_t p = ::fork();
    if (p < 0) return "fork " + errno_str(errno);
    if (p == 0) {
      ::fork();  // one more generation; its failure does not matter
      for (;;) ::pause();
    }
  }
  return "fork ok";
}

std::string alloc_attempt(long mib) {
  std::vector<char*> blocks;
  for (long i = 0; i < mib; ++i) {
    char* b = static_cast<char*>(std::malloc(1 << 20));
    if (!b) return "malloc failed after " + std::to_string(i) + " MiB";
    std::memset(b, static_cast<int>(i), 1 << 20);
    blocks.push_back(b);
  }
  return "ok";
}

std::string spin(double seconds) {
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  volatile unsigned long x = 0;
  while (std::chrono::steady_clock::now() < end)
    for (int i = 0; i < 100000; ++i) x = x + 1;
  return "ok";
}

std::string fill_file(const std::string& path, long bytes) {
  ::signal(SIGXFSZ, SIG_IGN);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return "open " + errno_str(errno);
  std::vector<char> buf(65536, 'x');
  long written = 0;
  while (written < bytes) {
    std::size_t k = static_cast<std::size_t>(std::min<long>(static_cast<long>(buf.size()), bytes - written));
    ssize_t w = ::write(fd, buf.data(), k);
    if (w < 0) {
      std::string r = errno_str(errno) + " after=" + std::to_string(written);
      ::close(fd);
      return r;
    }
    written += w;
  }
  ::close(fd);
  return "ok";
}

// Whose user namespace owns our network namespace: "own" (the one we are in), or the errno of
// asking (EPERM: one outside ours, an ancestor's).
std::string netns_owner() {
  constexpr unsigned long kNsGetUserns = 0xb701;  // NS_GET_USERNS, _IO(0xb7, 0x1)
  int net = ::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  if (net < 0) return errno_str(errno);
  int owner = ::ioctl(net, kNsGetUserns);
  const int err = errno;
  ::close(net);
  if (owner < 0) return errno_str(err);
  struct stat a {}, b {};
  const bool own = ::fstat(owner, &a) == 0 && ::stat("/proc/self/ns/user", &b) == 0 && a.st_ino == b.st_ino &&
                   a.st_dev == b.st_dev;
  ::close(owner);
  return own ? "own" : "other";
}

// One escape attempt; nullopt-like "" for an unknown action.
std::string attempt(const std::vector<std::string>& a) {
  auto at = [&](std::size_t i) -> std::string { return i < a.size() ? a[i] : std::string(); };
  const std::string& act = a.empty() ? std::string() : a[0];
  if (act == "write-file") return write_file_attempt(at(1), a.size() > 2 ? at(2) : "pwned");
  if (act == "read-file") {
    std::string data;
    if (int err = slurp(at(1), data)) return errno_str(err);
    return "ok " + printable(data, 200);
  }
  if (act == "list-dir") return list_dir_attempt(at(1));
  if (act == "link") return result_of(::link(at(1).c_str(), at(2).c_str()));
  if (act == "symlink") return result_of(::symlink(at(1).c_str(), at(2).c_str()));
  if (act == "rename") return result_of(::rename(at(1).c_str(), at(2).c_str()));
  if (act == "mkdir") return result_of(::mkdir(at(1).c_str(), 0777));
  if (act == "unlink") return result_of(::unlink(at(1).c_str()));
  if (act == "socket") return socket_attempt(at(1));
  if (act == "tcp-connect") return tcp_connect_attempt(at(1), at(2));
  if (act == "loopback") return loopback_attempt(at(1), at(2));
  if (act == "unix-connect") return unix_connect_attempt(at(1));
  if (act == "unix-connect-orphan") return unix_connect_orphan(at(1), std::atoi(at(2).c_str()), "");
  if (act == "orphan-exec") return unix_connect_orphan(at(1), std::atoi(at(2).c_str()), at(3));
  if (act == "unix-dgram-send") return unix_dgram_send(at(1));
  if (act == "socketpair-dgram") return socketpair_dgram();
  if (act == "unix-self") return unix_self(at(1));
  if (act == "copy") return copy_attempt(at(1), at(2));
  if (act == "chmod") return result_of(::chmod(at(1).c_str(), static_cast<mode_t>(std::strtol(at(2).c_str(), nullptr, 8))));
  if (act == "create-mode") {
    int fd = ::open(at(1).c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
                    static_cast<mode_t>(std::strtol(at(2).c_str(), nullptr, 8)));
    if (fd < 0) return errno_str(errno);
    ::close(fd);
    return "ok";
  }
  if (act == "stat") return stat_attempt(at(1));
  if (act == "caps") return caps();
  if (act == "netns-owner") return netns_owner();
  if (act == "proc-count") return proc_count();
  if (act == "kill0") return result_of(::kill(std::atoi(at(1).c_str()), 0));
  if (act == "ptrace-traceme") return result_of(::ptrace(PTRACE_TRACEME, 0, nullptr, nullptr));
  if (act == "ptrace-attach") return ptrace_attach_attempt(std::atoi(at(1).c_str()));
  if (act == "ptrace-attach-child") return ptrace_attach_child();
  if (act == "environ-has") return environ_has(at(1), at(2));
  if (act == "environ-scan") return environ_scan(at(1));
  if (act == "fork-bomb") return fork_bomb();
  if (act == "alloc") return alloc_attempt(std::atol(at(1).c_str()));
  if (act == "spin") return spin(std::atof(at(1).c_str()));
  if (act == "fill-file") return fill_file(at(1), std::atol(at(2).c_str()));
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: corral_test_helper ACTION ARGS...\n");
    return 2;
  }
  std::string action = argv[1];
  auto arg = [&](int i) -> const char* { return i < argc ? argv[i] : ""; };

  if (action == "exit") return std::atoi(arg(2));
  if (action == "signal") {
    int sig = std::atoi(arg(2));
    ::signal(sig, SIG_DFL);
    ::raise(sig);
    return 99;
  }
  if (action == "spin-wall") {  // busy until SECONDS of wall clock have passed
    const double seconds = std::atof(arg(2));
    struct timespec start {}, now {};
    ::clock_gettime(CLOCK_MONOTONIC, &start);
    volatile unsigned long spins = 0;
    do {
      for (int i = 0; i < 100000; ++i) spins = spins + 1;
      ::clock_gettime(CLOCK_MONOTONIC, &now);
    } while ((now.tv_sec - start.tv_sec) + (now.tv_nsec - start.tv_nsec) / 1e9 < seconds);
    return 0;
  }
  if (action == "sleep") {
    ::usleep(static_cast<useconds_t>(std::atof(arg(2)) * 1e6));
    return 0;
  }
  if (action == "write") {
    write_pattern(std::atol(arg(2)), argc > 3 ? arg(3) : "out");
    return 0;
  }
  if (action == "flood-then-sleep") {
    write_pattern(std::atol(arg(2)), "out");
    ::usleep(static_cast<useconds_t>(std::atof(arg(3)) * 1e6));
    return 0;
  }
  if (action == "env") {
    for (char** e = environ; *e; ++e) std::printf("%s\n", *e);
    return 0;
  }
  if (action == "fds") {
    DIR* d = ::opendir("/proc/self/fd");
    int self = ::dirfd(d);
    std::string out;
    while (dirent* ent = ::readdir(d)) {
      if (ent->d_name[0] == '.') continue;
      if (std::atoi(ent->d_name) == self) continue;
      out += std::string(out.empty() ? "" : " ") + ent->d_name;
    }
    ::closedir(d);
    std::printf("%s\n", out.c_str());
    return 0;
  }
  if (action == "pwd") {
    char buf[4096];
    std::printf("%s\n", ::getcwd(buf, sizeof buf));
    return 0;
  }
  if (action == "cat") {
    char buf[65536];
    ssize_t n;
    while ((n = ::read(0, buf, sizeof buf)) > 0) write_all(1, buf, static_cast<size_t>(n));
    return 0;
  }
  if (action == "ignore-term") {
    ::signal(SIGTERM, SIG_IGN);
    ::usleep(static_cast<useconds_t>(std::atof(arg(2)) * 1e6));
    return 0;
  }
  if (action == "tree") {
    int n = std::atoi(arg(3));
    std::vector<pid_t> pids{::getpid()};
    for (int i = 0; i < n; ++i) {
      pid_t p = ::fork();
      if (p == 0) sleep_forever();
      pids.push_back(p);
    }
    write_pids(arg(2), pids);
    sleep_forever();
  }
  if (action == "escape") {
    int pfd[2];
    if (::pipe(pfd) < 0) return 4;
    pid_t child = ::fork();
    if (child == 0) {
      ::setsid();
      if (::fork() == 0) {
        ::signal(SIGTERM, SIG_IGN);
        ::signal(SIGHUP, SIG_IGN);
        write_pids(arg(2), {::getpid()});
        sleep_forever();
      }
      ::_exit(0);
    }
    ::close(pfd[0]);
    ::close(pfd[1]);
    sleep_forever();
  }
  if (action == "batch") {
    for (int i = 2; i < argc; ++i) {
      std::vector<std::string> words;
      std::istringstream in(argv[i]);
      for (std::string w; in >> w;) words.push_back(w);
      std::string r = attempt(words);
      std::printf("%s\n", r.empty() ? "unknown action" : r.c_str());
    }
    return 0;
  }
  if (std::string r = attempt(std::vector<std::string>(argv + 1, argv + argc)); !r.empty()) {
    std::printf("%s\n", r.c_str());
    return 0;
  }
  std::fprintf(stderr, "corral_test_helper: unknown action '%s'\n", action.c_str());
  return 2;
}
