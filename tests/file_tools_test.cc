// Confined file tools: every refused path shape with its exact Status, and the read window,
// atomic write and listing semantics. Runs against a private temp tree:
//   <base>/root      writable, roots[0] (relative paths land here)
//   <base>/root2     writable, second root
//   <base>/ro        read-only root
//   <base>/outside   not a root; holds "secret"
#include "runtime/file_tools.h"

#include <dirent.h>
#include <doctest/doctest.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using namespace corral;
using namespace corral::files;

namespace {

void put(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
}

std::string get(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

bool is_symlink(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
}

std::size_t open_fd_count() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

struct Tree {
  std::string base, root, root2, ro, outside;
  Roots roots;

  Tree() {
    std::string t = "/tmp/corral-files-XXXXXX";
    REQUIRE(::mkdtemp(t.data()) != nullptr);
    char real[PATH_MAX];
    REQUIRE(::realpath(t.c_str(), real) != nullptr);  // roots must be canonical
    base = real;
    root = base + "/root";
    root2 = base + "/root2";
    ro = base + "/ro";
    outside = base + "/outside";
    for (const auto& d : {root, root2, ro, outside}) REQUIRE(::mkdir(d.c_str(), 0755) == 0);
    put(outside + "/secret", "TOP SECRET");
    roots.roots = {root, root2, ro};
    roots.writable = {true, true, false};
  }
  ~Tree() {
    std::error_code ec;
    std::filesystem::remove_all(base, ec);
  }
  void link(const std::string& target, const std::string& at) const {
    REQUIRE(::symlink(target.c_str(), at.c_str()) == 0);
  }
};

void check_refused(const Status& s, const std::string& step, int err, const std::string& message) {
  CHECK_FALSE(s.ok());
  CHECK(s.step() == step);
  CHECK(s.err() == err);
  CHECK(s.message() == message);
  // The policy's own refusals are told apart by their code, not by the step's text.
  const bool policy = step == "readonly" || step == "denied";
  CHECK((s.code() == StatusCode::refused) == policy);
}
template <class T>
void check_refused(const StatusOr<T>& r, const std::string& step, int err,
                   const std::string& message) {
  REQUIRE_FALSE(r.ok());
  check_refused(r.status(), step, err, message);
}

// Every tool refuses `path` the same way.
void check_all_refuse(const Tree& t, const std::string& path, const std::string& step, int err,
                      const std::string& message) {
  CAPTURE(path);
  check_refused(read_text(t.roots, path, 0, kDefaultReadText), step, err, message);
  check_refused(read_bytes(t.roots, path, 0, kDefaultReadBytes), step, err, message);
  check_refused(write_file(t.roots, path, "x", false, kDefaultWrite), step, err, message);
  check_refused(list_dir(t.roots, path, kMaxListEntries), step, err, message);
}

// Every root is a directory some sandbox may write: no link in it is followed (host_path.h).
const std::string kEscape =
    "is or goes through a symlink, which corral does not follow below a directory a sandbox may write";
const std::string& kMagic = kEscape;

}  // namespace

TEST_CASE("resolve: relative paths go to roots[0], absolute ones to the longest root") {
  Tree t;
  auto a = resolve(t.roots, "a/./b//c/", false);
  REQUIRE(a.ok());
  CHECK(a->root_index == 0);
  CHECK(a->rel == "a/b/c");
  CHECK(a->root_fd.valid());
  CHECK((::fcntl(a->root_fd.get(), F_GETFD) & FD_CLOEXEC) != 0);

  auto b = resolve(t.roots, t.root2 + "/x/y", true);
  REQUIRE(b.ok());
  CHECK(b->root_index == 1);
  CHECK(b->rel == "x/y");

  auto c = resolve(t.roots, t.root, false);
  REQUIRE(c.ok());
  CHECK(c->rel == ".");
  auto d = resolve(t.roots, ".", false);
  REQUIRE(d.ok());
  CHECK(d->rel == ".");

  // A root nested in another is matched first, however the path is spelled.
  Roots nested{{t.root, t.root + "/sub"}, {true, false}, {}};
  REQUIRE(::mkdir((t.root + "/sub").c_str(), 0755) == 0);
  auto e = resolve(nested, t.root + "/sub/f", false);
  REQUIRE(e.ok());
  CHECK(e->root_index == 1);
  CHECK(e->rel == "f");
  check_refused(resolve(nested, "sub/f", true), "readonly", EROFS,
                "'sub/f': read-only (root '" + t.root + "/sub' is not writable)");
  check_refused(write_file(nested, t.root + "/sub/f", "x", false, kDefaultWrite), "readonly", EROFS,
                "'" + t.root + "/sub/f': read-only (root '" + t.root + "/sub' is not writable)");
  CHECK(write_file(nested, "f", "x", false, kDefaultWrite).ok());

  // Malformed Roots are the caller's bug.
  CHECK(resolve(Roots{}, "x", false).status().step() == "validate");
  CHECK(resolve(Roots{{t.root}, {}, {}}, "x", false).status().step() == "validate");
  CHECK(resolve(Roots{{"relative"}, {true}, {}}, "x", false).status().step() == "validate");
}

TEST_CASE("'..' is refused in every position, even when it would stay inside") {
  Tree t;
  REQUIRE(::mkdir((t.root + "/a").c_str(), 0755) == 0);
  put(t.root + "/b", "b");
  for (const std::string& p :
       std::vector<std::string>{"..", "../x", "a/../b", "a/..", "./../root/b", "a/b/../../b"})
    check_all_refuse(t, p, "path", EXDEV, "'" + p + "': '..' is not allowed");
  const std::string abs = t.root + "/../root/b";
  check_all_refuse(t, abs, "path", EXDEV, "'" + abs + "': '..' is not allowed");
  check_refused(resolve(t.roots, "a/..", false), "path", EXDEV, "'a/..': '..' is not allowed");

  // Names that merely contain dots are names.
  put(t.root + "/a..b", "dots");
  put(t.root + "/...", "three");
  CHECK(read_text(t.roots, "a..b", 0, 100)->data == "dots");
  CHECK(read_text(t.roots, "...", 0, 100)->data == "three");
}

TEST_CASE("absolute paths outside every root are refused lexically") {
  Tree t;
  for (const std::string& p :
       std::vector<std::string>{std::string("/etc/passwd"), std::string("/"), t.outside + "/secret",
                                t.base, t.root + "x/file", t.root.substr(0, t.root.size() - 1),
                                std::string("/proc/self/root/etc/passwd")})
    check_all_refuse(t, p, "path", EXDEV, "'" + p + "': not beneath any allowed root");
}

TEST_CASE("empty paths and NUL bytes are refused") {
  Tree t;
  check_all_refuse(t, "", "path", 0, "'': empty path");
  const std::string nul("a\0b", 3);
  check_all_refuse(t, nul, "path", 0, "'a\\x00b': contains a NUL byte");
  check_all_refuse(t, std::string("\0", 1), "path", 0, "'\\x00': contains a NUL byte");
}

TEST_CASE("symlinks escaping the root are refused for read, write and list") {
  Tree t;
  t.link(t.outside + "/secret", t.root + "/abs_link");
  t.link("../outside/secret", t.root + "/rel_link");
  t.link(t.outside, t.root + "/abs_dir");
  t.link("../outside", t.root + "/rel_dir");
  t.link("../outside/created", t.root + "/dangling");
  REQUIRE(::mkdir((t.root + "/sub").c_str(), 0755) == 0);
  t.link("../../outside/secret", t.root + "/sub/deep_link");

  for (const std::string& p :
       std::vector<std::string>{"abs_link", "rel_link", "abs_dir/secret", "rel_dir/secret",
                                "sub/deep_link", "dangling"}) {
    CAPTURE(p);
    check_refused(read_text(t.roots, p, 0, kDefaultReadText), "resolve", ELOOP,
                  "'" + p + "': " + kEscape);
    check_refused(read_bytes(t.roots, p, 0, kDefaultReadBytes), "resolve", ELOOP,
                  "'" + p + "': " + kEscape);
    check_refused(write_file(t.roots, p, "pwned", false, kDefaultWrite), "resolve", ELOOP,
                  "'" + p + "': " + kEscape);
  }
  // An intermediate component that escapes, for a new file and for the listing itself.
  for (const std::string& p : std::vector<std::string>{"abs_dir/new", "rel_dir/new"})
    check_refused(write_file(t.roots, p, "pwned", false, kDefaultWrite), "resolve", ELOOP,
                  "'" + p + "': " + kEscape);
  for (const std::string& p :
       std::vector<std::string>{"abs_dir", "rel_dir", "abs_dir/", "rel_dir/."})
    check_refused(list_dir(t.roots, p, 10), "resolve", ELOOP, "'" + p + "': " + kEscape);
  // Through an absolute path under the root, too.
  check_refused(read_text(t.roots, t.root + "/rel_link", 0, 100), "resolve", ELOOP,
                "'" + t.root + "/rel_link': " + kEscape);

  // Nothing outside changed, and the links are still links.
  CHECK(names_in(t.outside) == std::vector<std::string>{"secret"});
  CHECK(get(t.outside + "/secret") == "TOP SECRET");
  for (const auto& l : {"abs_link", "rel_link", "abs_dir", "rel_dir", "dangling"})
    CHECK(is_symlink(t.root + "/" + l));

  // A symlink with an absolute target is never followed, even when it points inside the root.
  put(t.root + "/inside", "in");
  t.link(t.root + "/inside", t.root + "/abs_inside");
  check_refused(read_text(t.roots, "abs_inside", 0, 100), "resolve", ELOOP,
                "'abs_inside': " + kEscape);
  check_refused(write_file(t.roots, "abs_inside", "x", false, 100), "resolve", ELOOP,
                "'abs_inside': " + kEscape);
  CHECK(get(t.root + "/inside") == "in");
}

TEST_CASE("magic links are refused, planted in the root or met beneath a /proc root") {
  Tree t;
  int secret_fd = ::open((t.outside + "/secret").c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(secret_fd >= 0);
  const std::string n = std::to_string(secret_fd);
  // Planted symlinks to magic links are symlinks first: RESOLVE_NO_SYMLINKS stops
  // them before the magic link is reached.
  t.link("/proc/self/root", t.root + "/proc_root");
  t.link("/proc/self/fd/" + n, t.root + "/fd_link");
  t.link("/proc/self/cwd", t.root + "/cwd_link");
  t.link("../../../../../../../../../../proc/self/root", t.root + "/rel_proc_root");
  for (const std::string& p : std::vector<std::string>{"proc_root/etc/passwd", "fd_link",
                                                       "cwd_link/x", "rel_proc_root/etc/passwd"}) {
    CAPTURE(p);
    check_refused(read_text(t.roots, p, 0, 100), "resolve", ELOOP, "'" + p + "': " + kEscape);
    check_refused(read_bytes(t.roots, p, 0, 100), "resolve", ELOOP, "'" + p + "': " + kEscape);
    check_refused(write_file(t.roots, p, "x", false, 100), "resolve", ELOOP,
                  "'" + p + "': " + kEscape);
  }
  for (const std::string& p : std::vector<std::string>{"proc_root", "rel_proc_root", "cwd_link"})
    check_refused(list_dir(t.roots, p, 10), "resolve", ELOOP, "'" + p + "': " + kEscape);

  // With /proc/<pid> itself as a root, the magic links are reached and RESOLVE_NO_SYMLINKS
  // refuses them (ELOOP).
  const std::string proc = "/proc/" + std::to_string(::getpid());
  Roots pr{{proc}, {true}, {}};
  for (const std::string& p :
       std::vector<std::string>{"root/etc/passwd", "fd/" + n, "cwd/x", "exe", proc + "/root/etc"}) {
    CAPTURE(p);
    check_refused(read_bytes(pr, p, 0, 100), "resolve", ELOOP, "'" + p + "': " + kMagic);
  }
  check_refused(list_dir(pr, "root", 10), "resolve", ELOOP, "'root': " + kMagic);
  check_refused(write_file(pr, "root/tmp/x", "x", false, 100), "resolve", ELOOP,
                "'root/tmp/x': " + kMagic);
  ::close(secret_fd);
  CHECK(get(t.outside + "/secret") == "TOP SECRET");
}

TEST_CASE("a symlink loop is refused") {
  Tree t;
  t.link("loop_b", t.root + "/loop_a");
  t.link("loop_a", t.root + "/loop_b");
  check_refused(read_text(t.roots, "loop_a", 0, 100), "resolve", ELOOP,
                "'loop_a': " + kEscape);
  check_refused(list_dir(t.roots, "loop_a", 10), "resolve", ELOOP,
                "'loop_a': " + kEscape);
  check_refused(write_file(t.roots, "loop_a", "x", false, 100), "resolve", ELOOP,
                "'loop_a': " + kEscape);
}

TEST_CASE("symlinks staying beneath the root are refused too: a planted one could point at a guarded file") {
  Tree t;
  REQUIRE(::mkdir((t.root + "/data").c_str(), 0755) == 0);
  put(t.root + "/data/file.txt", "hello");
  t.link("data/file.txt", t.root + "/in_link");
  t.link("../data/file.txt", t.root + "/data/up");
  t.link("data", t.root + "/dir_link");
  t.link("in_link", t.root + "/chain");
  t.link("data/later", t.root + "/later_link");

  for (const std::string& p : std::vector<std::string>{"in_link", "data/up", "dir_link/file.txt", "chain",
                                                       t.root + "/dir_link/up", "later_link"}) {
    CAPTURE(p);
    check_refused(read_text(t.roots, p, 0, 100), "resolve", ELOOP, "'" + p + "': " + kEscape);
    check_refused(write_file(t.roots, p, "x", false, 100), "resolve", ELOOP, "'" + p + "': " + kEscape);
  }
  check_refused(list_dir(t.roots, "dir_link", 10), "resolve", ELOOP, "'dir_link': " + kEscape);
  check_refused(write_file(t.roots, "dir_link/created", "x", false, 100), "resolve", ELOOP,
                "'dir_link/created': " + kEscape);
  // Listing shows links as links; nothing was written through them.
  auto l = list_dir(t.roots, "data", 10);
  REQUIRE(l.ok());
  REQUIRE(l->entries.size() == 2);
  CHECK(l->entries[1].name == "up");
  CHECK(l->entries[1].type == "symlink");
  CHECK(get(t.root + "/data/file.txt") == "hello");
  CHECK(names_in(t.root + "/data") == std::vector<std::string>{"file.txt", "up"});
  for (const auto& link : {"in_link", "chain", "dir_link", "later_link"}) CHECK(is_symlink(t.root + "/" + link));
}

TEST_CASE("a hard link in the root to a file outside is readable (the mount layer's problem)") {
  // Hard links are not a path property: the link IS a file in the root. Keeping such files out
  // of a workspace is up to the mount view (binds, --deny-read), not the file tools.
  Tree t;
  REQUIRE(::link((t.outside + "/secret").c_str(), (t.root + "/hard").c_str()) == 0);
  auto r = read_text(t.roots, "hard", 0, 100);
  REQUIRE(r.ok());
  CHECK(r->data == "TOP SECRET");
  // An atomic write replaces the link in the root, never the file outside.
  REQUIRE(write_file(t.roots, "hard", "mine", false, 100).ok());
  CHECK(get(t.root + "/hard") == "mine");
  CHECK(get(t.outside + "/secret") == "TOP SECRET");
}

TEST_CASE("writing to a read-only root is refused with EROFS") {
  Tree t;
  put(t.ro + "/existing", "keep");
  for (const std::string& p : std::vector<std::string>{t.ro + "/new", t.ro + "/existing", t.ro}) {
    check_refused(write_file(t.roots, p, "x", false, 100), "readonly", EROFS,
                  "'" + p + "': read-only (root '" + t.ro + "' is not writable)");
  }
  CHECK(names_in(t.ro) == std::vector<std::string>{"existing"});
  CHECK(get(t.ro + "/existing") == "keep");
  // Reading and listing a read-only root are fine.
  CHECK(read_text(t.roots, t.ro + "/existing", 0, 100)->data == "keep");
  CHECK(list_dir(t.roots, t.ro, 10)->entries.size() == 1);
  // The second, writable root takes absolute writes.
  REQUIRE(write_file(t.roots, t.root2 + "/f", "two", false, 100).ok());
  CHECK(get(t.root2 + "/f") == "two");
}

TEST_CASE("size limits on writes and read windows") {
  Tree t;
  check_refused(write_file(t.roots, "f", "12345", false, 4), "size", 0,
                "'f': 5 bytes is over the 4-byte limit");
  check_refused(write_file(t.roots, "f", "x", false, kMaxWrite + 1), "size", 0,
                "'f': a write limit of 67108865 bytes is over the 67108864-byte limit");
  check_refused(write_file(t.roots, "f", "", false, 0), "size", 0,
                "'f': a write limit of 0 bytes is not allowed");
  CHECK(names_in(t.root).empty());
  REQUIRE(write_file(t.roots, "f", "1234", false, 4).ok());
  CHECK(get(t.root + "/f") == "1234");

  check_refused(read_bytes(t.roots, "f", 0, kMaxReadBytes + 1), "size", 0,
                "'f': a read window of 268435457 bytes is over the 268435456-byte limit");
  check_refused(read_text(t.roots, "f", 0, 0), "size", 0,
                "'f': a read window of 0 bytes is not allowed");
  check_refused(list_dir(t.roots, ".", 0), "size", 0, "'.': a listing of 0 entries is not allowed");
  check_refused(list_dir(t.roots, ".", kMaxListEntries + 1), "size", 0,
                "'.': a listing of 10001 entries is over the 10000-entry limit");
  CHECK(kDefaultReadText == 1048576);
  CHECK(kDefaultReadBytes == 52428800);
  CHECK(kDefaultWrite == 1048576);
}

TEST_CASE("writing invalid UTF-8 needs binary") {
  Tree t;
  struct Bad {
    std::string data;
    std::size_t at;
  };
  for (const Bad& b : {Bad{"ok\xff", 2}, Bad{"\xc0\xaf", 0}, Bad{"a\xed\xa0\x80", 1},
                       Bad{"ab\xe2\x82", 2}, Bad{"\xf4\x90\x80\x80", 0}, Bad{"x\x80", 1}}) {
    CAPTURE(b.data);
    check_refused(write_file(t.roots, "f", b.data, false, 100), "utf8", 0,
                  "'f': data is not valid UTF-8 (byte offset " + std::to_string(b.at) +
                      "); write it with --binary");
  }
  CHECK(names_in(t.root).empty());
  const std::string bin("\x00\xff\xfe ok", 6);
  REQUIRE(write_file(t.roots, "f", bin, true, 100).ok());
  CHECK(get(t.root + "/f") == bin);
  CHECK(read_bytes(t.roots, "f", 0, 100)->data == bin);
  REQUIRE(write_file(t.roots, "g", "h\xc3\xa9llo \xf0\x9f\x98\x80", false, 100).ok());
  CHECK(valid_utf8("h\xc3\xa9llo \xf0\x9f\x98\x80"));
  CHECK_FALSE(valid_utf8("\xed\xbf\xbf"));  // a surrogate
}

TEST_CASE("non-regular files are refused, and a fifo never blocks") {
  Tree t;
  REQUIRE(::mkdir((t.root + "/dir").c_str(), 0755) == 0);
  REQUIRE(::mkfifo((t.root + "/fifo").c_str(), 0644) == 0);
  t.link("fifo", t.root + "/fifo_link");
  put(t.root + "/file", "f");

  auto start = std::chrono::steady_clock::now();
  check_refused(read_text(t.roots, "fifo", 0, 100), "type", 0,
                "'fifo': is a fifo, not a regular file");
  check_refused(read_bytes(t.roots, "fifo_link", 0, 100), "resolve", ELOOP, "'fifo_link': " + kEscape);
  check_refused(write_file(t.roots, "fifo", "x", false, 100), "type", 0,
                "'fifo': is a fifo, not a regular file");
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(1));

  check_refused(read_text(t.roots, "dir", 0, 100), "type", EISDIR,
                "'dir': is a directory, not a regular file");
  check_refused(read_bytes(t.roots, ".", 0, 100), "type", EISDIR,
                "'.': is a directory, not a regular file");
  check_refused(read_bytes(t.roots, "/dev/null", 0, 100), "path", EXDEV,
                "'/dev/null': not beneath any allowed root");
  Roots dev{{"/dev"}, {false}, {}};
  check_refused(read_bytes(dev, "null", 0, 100), "type", 0,
                "'null': is a character device, not a regular file");
  check_refused(write_file(t.roots, "dir", "x", false, 100), "type", EISDIR,
                "'dir': is a directory, not a regular file");
  check_refused(write_file(t.roots, "file/", "x", false, 100), "type", EISDIR,
                "'file/': names a directory, not a file");
  check_refused(write_file(t.roots, ".", "x", false, 100), "type", EISDIR,
                "'.': names a directory, not a file");
  check_refused(list_dir(t.roots, "file", 10), "type", 0,
                "'file': is a regular file, not a directory");
  check_refused(list_dir(t.roots, "fifo", 10), "type", 0, "'fifo': is a fifo, not a directory");
  check_refused(read_text(t.roots, "missing", 0, 100), "open", ENOENT,
                "'missing': No such file or directory");
  check_refused(read_text(t.roots, "file/x", 0, 100), "open", ENOTDIR, "'file/x': Not a directory");
}

TEST_CASE("read windows: offset, size, EOF and cut characters") {
  Tree t;
  put(t.root + "/digits", "0123456789");
  auto r = read_bytes(t.roots, "digits", 0, 4);
  REQUIRE(r.ok());
  CHECK(r->data == "0123");
  CHECK(r->offset == 0);
  CHECK(r->file_size == 10);
  CHECK(r->truncated);
  r = read_text(t.roots, "digits", 8, 4);
  REQUIRE(r.ok());
  CHECK(r->data == "89");
  CHECK(r->offset == 8);
  CHECK_FALSE(r->truncated);
  r = read_text(t.roots, "digits", 6, 4);
  REQUIRE(r.ok());
  CHECK(r->data == "6789");
  CHECK_FALSE(r->truncated);
  for (std::uint64_t off : {10ULL, 11ULL, 1ULL << 40}) {
    CAPTURE(off);
    r = read_bytes(t.roots, "digits", off, 4);
    REQUIRE(r.ok());
    CHECK(r->data.empty());
    CHECK(r->offset == off);
    CHECK(r->file_size == 10);
    CHECK_FALSE(r->truncated);
  }
  put(t.root + "/empty", "");
  r = read_text(t.roots, "empty", 0, 100);
  REQUIRE(r.ok());
  CHECK(r->data.empty());
  CHECK_FALSE(r->truncated);

  // "a" U+00E9 "b": a 2-byte window cuts the é, which is dropped and the window is truncated.
  put(t.root + "/accent",
      "a\xc3\xa9"
      "b");
  r = read_text(t.roots, "accent", 0, 2);
  REQUIRE(r.ok());
  CHECK(r->data == "a");
  CHECK(r->truncated);
  CHECK(r->file_size == 4);
  r = read_text(t.roots, "accent", 1, 2);
  REQUIRE(r.ok());
  CHECK(r->data == "\xc3\xa9");
  CHECK(r->truncated);
  r = read_text(t.roots, "accent", 1, 3);
  REQUIRE(r.ok());
  CHECK(r->data ==
        "\xc3\xa9"
        "b");
  CHECK_FALSE(r->truncated);
  // read_bytes keeps the exact bytes under the cap.
  r = read_bytes(t.roots, "accent", 0, 2);
  REQUIRE(r.ok());
  CHECK(r->data == "a\xc3");
  CHECK(r->truncated);
  // A 4-byte character cut after 3 bytes: nothing whole fits.
  put(t.root + "/emoji", "\xf0\x9f\x98\x80x");
  r = read_text(t.roots, "emoji", 0, 3);
  REQUIRE(r.ok());
  CHECK(r->data.empty());
  CHECK(r->truncated);
  r = read_text(t.roots, "emoji", 0, 4);
  REQUIRE(r.ok());
  CHECK(r->data == "\xf0\x9f\x98\x80");
  CHECK(r->truncated);

  // Invalid bytes elsewhere: the file offset is named, whatever the window's start.
  put(t.root + "/bad.txt",
      "ab\xff"
      "cd");
  check_refused(read_text(t.roots, "bad.txt", 0, 100), "utf8", 0,
                "'bad.txt': invalid UTF-8 at byte offset 2; read it with --binary");
  check_refused(read_text(t.roots, "bad.txt", 1, 100), "utf8", 0,
                "'bad.txt': invalid UTF-8 at byte offset 2; read it with --binary");
  CHECK(read_text(t.roots, "bad.txt", 3, 100)->data == "cd");
  CHECK(read_bytes(t.roots, "bad.txt", 0, 100)->data ==
        "ab\xff"
        "cd");
  // A window starting inside a character, and a file ending inside one.
  check_refused(read_text(t.roots, "accent", 2, 100), "utf8", 0,
                "'accent': invalid UTF-8 at byte offset 2; read it with --binary");
  put(t.root + "/cut", "a\xc3");
  check_refused(read_text(t.roots, "cut", 0, 100), "utf8", 0,
                "'cut': invalid UTF-8 at byte offset 1; read it with --binary");
}

TEST_CASE("atomic write: replaces content, keeps or sets the mode, leaves no temp file") {
  Tree t;
  mode_t old_umask = ::umask(077);  // a new file is 0644 whatever the umask
  REQUIRE(write_file(t.roots, "new.txt", "first", false, 100).ok());
  ::umask(old_umask);
  struct stat st;
  REQUIRE(::stat((t.root + "/new.txt").c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0644);
  CHECK(get(t.root + "/new.txt") == "first");

  put(t.root + "/old.txt", "a much longer old content");
  REQUIRE(::chmod((t.root + "/old.txt").c_str(), 0600) == 0);
  struct stat before;
  REQUIRE(::stat((t.root + "/old.txt").c_str(), &before) == 0);
  REQUIRE(write_file(t.roots, "old.txt", "short", false, 100).ok());
  struct stat after;
  REQUIRE(::stat((t.root + "/old.txt").c_str(), &after) == 0);
  CHECK(get(t.root + "/old.txt") == "short");
  CHECK((after.st_mode & 07777) == 0600);
  CHECK(after.st_ino != before.st_ino);  // renamed over, not rewritten in place
  REQUIRE(write_file(t.roots, "old.txt", "", false, 100).ok());
  CHECK(get(t.root + "/old.txt").empty());

  REQUIRE(::mkdir((t.root + "/sub").c_str(), 0755) == 0);
  REQUIRE(write_file(t.roots, t.root + "/sub/deep.txt", "deep", false, 100).ok());
  CHECK(names_in(t.root) == std::vector<std::string>{"new.txt", "old.txt", "sub"});
  CHECK(names_in(t.root + "/sub") == std::vector<std::string>{"deep.txt"});
  auto l = list_dir(t.roots, ".", 100);
  REQUIRE(l.ok());
  CHECK(l->entries.size() == 3);

  // No mkdir -p: the parent must exist.
  check_refused(write_file(t.roots, "nope/x.txt", "x", false, 100), "open", ENOENT,
                "'nope/x.txt': parent directory: No such file or directory");
  check_refused(write_file(t.roots, "new.txt/x", "x", false, 100), "open", ENOTDIR,
                "'new.txt/x': parent directory: Not a directory");
  // A failed write (here: refused before any temp file) leaves the directory as it was.
  CHECK(names_in(t.root) == std::vector<std::string>{"new.txt", "old.txt", "sub"});
}

TEST_CASE("listing: sorted, lstat types and sizes, capped") {
  Tree t;
  const std::string d = t.root + "/d";
  REQUIRE(::mkdir(d.c_str(), 0755) == 0);
  put(d + "/b.txt", "abc");
  REQUIRE(::mkdir((d + "/a_dir").c_str(), 0755) == 0);
  t.link("b.txt", d + "/c_link");
  REQUIRE(::mkfifo((d + "/d_fifo").c_str(), 0644) == 0);
  t.link(t.outside + "/secret", d + "/e_out");  // listed, never followed
  put(d + "/B_upper", "");

  auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
  auto l = list_dir(t.roots, "d", 100);
  REQUIRE(l.ok());
  CHECK_FALSE(l->truncated);
  REQUIRE(l->entries.size() == 6);
  struct Want {
    const char* name;
    const char* type;
    std::uint64_t size;
  };
  const Want want[] = {{"B_upper", "file", 0}, {"a_dir", "dir", 0},
                       {"b.txt", "file", 3},   {"c_link", "symlink", 5},
                       {"d_fifo", "other", 0}, {"e_out", "symlink", t.outside.size() + 7}};
  for (std::size_t i = 0; i < 6; ++i) {
    CAPTURE(i);
    const Entry& e = l->entries[i];
    CHECK(e.name == want[i].name);
    CHECK(e.type == want[i].type);
    if (e.type != "dir") CHECK(e.size == want[i].size);
    CHECK(e.mtime_ms > now_ms - 60000);
    CHECK(e.mtime_ms <= now_ms + 1000);
  }

  // The cap keeps the first names in sorted order, however the directory orders them.
  const std::string many = t.root + "/many";
  REQUIRE(::mkdir(many.c_str(), 0755) == 0);
  for (int i = 19; i >= 0; --i) put(many + "/f" + (i < 10 ? "0" : "") + std::to_string(i), "");
  l = list_dir(t.roots, "many", 3);
  REQUIRE(l.ok());
  CHECK(l->truncated);
  REQUIRE(l->entries.size() == 3);
  CHECK(l->entries[0].name == "f00");
  CHECK(l->entries[1].name == "f01");
  CHECK(l->entries[2].name == "f02");
  l = list_dir(t.roots, t.root + "/many", 20);
  REQUIRE(l.ok());
  CHECK_FALSE(l->truncated);
  CHECK(l->entries.size() == 20);
  CHECK(l->entries.back().name == "f19");
  l = list_dir(t.roots, t.root2, 10);
  REQUIRE(l.ok());
  CHECK(l->entries.empty());
  CHECK_FALSE(l->truncated);
  check_refused(list_dir(t.roots, "missing", 10), "open", ENOENT,
                "'missing': No such file or directory");

  // A --deny-read entry is listed as a command sees it (masked): no size, no time.
  Roots guarded = t.roots;
  guarded.denied = {d + "/b.txt"};
  l = list_dir(guarded, "d", 100);
  REQUIRE(l.ok());
  REQUIRE(l->entries.size() == 6);
  CHECK(l->entries[2].name == "b.txt");
  CHECK(l->entries[2].size == 0);
  CHECK(l->entries[2].mtime_ms == 0);
  CHECK(l->entries[0].mtime_ms > now_ms - 60000);  // the others as they are
}

TEST_CASE("no fd leaks, on success or refusal") {
  Tree t;
  put(t.root + "/f", "x");
  REQUIRE(::mkfifo((t.root + "/fifo").c_str(), 0644) == 0);
  t.link("../outside/secret", t.root + "/esc");
  const std::size_t before = open_fd_count();
  for (int i = 0; i < 20; ++i) {
    CHECK(read_text(t.roots, "f", 0, 100).ok());
    CHECK(write_file(t.roots, "f", "y", false, 100).ok());
    CHECK(list_dir(t.roots, ".", 100).ok());
    CHECK_FALSE(read_text(t.roots, "fifo", 0, 100).ok());
    CHECK_FALSE(read_text(t.roots, "esc", 0, 100).ok());
    CHECK_FALSE(write_file(t.roots, "esc", "z", false, 100).ok());
    CHECK_FALSE(write_file(t.roots, "nope/f", "z", false, 100).ok());
  }
  CHECK(open_fd_count() == before);
}
