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
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

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
  std::fprintf(stderr, "corral_test_helper: unknown action '%s'\n", action.c_str());
  return 2;
}
