// Confined file tools: read, write and list files beneath a set of allowed roots
// (docs/threat-model.md "Policy by mode", docs/protocol.md "Files"). The supervisor runs these on behalf of clients, so
// every path is hostile until resolved:
//  - lexically: empty paths, NUL bytes and `..` components are refused outright (even a `..`
//    that would stay inside); an absolute path must lie beneath one of the roots, compared
//    component by component (root `/a/b` does not cover `/a/bc`);
//  - by the kernel: the remainder is opened with openat2(2) (Linux >= 5.6) relative to the root
//    with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS: no symlink is followed, not even one staying
//    beneath the root (every root is a directory some sandbox may write, so a link in it may
//    have been planted to redirect this very call; runtime/host_path.h), nor any magic link.
//    Under the root "/" (danger-full-access) the directory part is walked as a host path
//    instead, so links in system directories (/bin -> usr/bin) are followed there.
// Hard links are not a path property: a hard link inside a root to a file outside IS a file in
// the root and is read like any other. Keeping such links out is the mount layer's job (binds,
// --protect/--deny-read), not this one's.
//
// Failures are Status values whose message names the path as the client gave it and why. Steps
// (stable words): "path" (lexical refusal), "resolve" (escape or magic link; errno EXDEV or
// ELOOP), "readonly" (EROFS), "type" (not a regular file / not a directory), "utf8", "size"
// (data or window over a limit), "denied" (beneath a `denied` path; errno EACCES), "open",
// "read", "write", "rename" (errno from the syscall),
// "validate" (a malformed Roots value: the caller's bug, not the client's).
//
// Every fd opened here is O_CLOEXEC and owned by a UniqueFd; none outlives a call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/status.h"
#include "runtime/unique_fd.h"

namespace corral::files {

// Where file tools may act. Paths given by a client are either relative (taken as
// roots[0]/path) or absolute; either way the path is resolved beneath the longest root that
// lexically contains it, with the remainder (so a read-only root nested inside a writable one
// stays read-only when named through the outer one). Roots must be absolute canonical
// directories (no symlinks, no trailing slash except "/" itself); `writable` is parallel to
// `roots`. A symlink inside an outer root leading into a nested read-only root is not seen by
// this lexical check: enforcing read-only there is the mount layer's job.
// `denied` and `read_only` are the policy's guards (--deny-read and the supervisor's hidden
// paths; --protect), as canonical host paths: what a tool actually opened (the kernel's name
// for the handle, so a symlink cannot dodge them) must not lie beneath a denied path (step
// "denied"), and a write must not land beneath a read-only one (step "readonly").
struct Roots {
  std::vector<std::string> roots;  // first = the default for relative paths
  std::vector<bool> writable;      // parallel to roots
  std::vector<std::string> denied = {};
  std::vector<std::string> read_only = {};
  // Beneath these `denied` does not apply: the scope's temp dir, which commands see at /tmp
  // and not at its host path (where the supervisor's temp area is masked).
  std::vector<std::string> not_denied = {};
  // Optional, parallel to roots: each root as the descriptor it was resolved to
  // (runtime/host_path.h; borrowed). When given, the tools start from these, never from the
  // names, so a root swapped for a link after it was checked is not followed.
  std::vector<int> fds = {};
};

// A path resolved lexically: the root it falls under, opened (O_PATH | O_DIRECTORY), and the
// remainder relative to it ("." for the root itself; never empty, never with `..`).
struct Resolved {
  UniqueFd root_fd;
  std::string rel;
  std::size_t root_index = 0;
};

// Lexical resolution plus opening the root. Nothing beneath the root is touched yet: the kernel
// checks the remainder when a tool opens it. for_write on a non-writable root fails with step
// "readonly", errno EROFS.
StatusOr<Resolved> resolve(const Roots& roots, const std::string& path, bool for_write);

inline constexpr std::uint64_t kDefaultReadText = 1 << 20;    // bytes (1 MiB)
inline constexpr std::uint64_t kDefaultReadBytes = 50 << 20;  // bytes (50 MiB)
inline constexpr std::uint64_t kDefaultWrite = 1 << 20;       // bytes (1 MiB)
inline constexpr std::uint64_t kMaxReadBytes = 256 << 20;     // bytes: ceiling for any read window
inline constexpr std::uint64_t kMaxWrite = 64 << 20;          // bytes: ceiling for any write
inline constexpr std::size_t kMaxListEntries = 10000;         // entries: ceiling for a listing

struct ReadResult {
  std::string data;
  std::uint64_t offset = 0;     // bytes: where `data` starts in the file (as requested)
  std::uint64_t file_size = 0;  // bytes: from fstat on the handle that was read
  bool truncated = false;       // more bytes follow the window (next read: offset + data.size())
};

// Reads at most max_bytes (1..kMaxReadBytes, else step "size") starting at `offset` through one
// open handle (fstat + pread). Refuses anything but a regular file (step "type"; a fifo or device
// is never opened for reading, and the read open is O_NONBLOCK, so this never blocks). An offset
// at or past EOF gives empty data with truncated false.
// read_text also validates UTF-8: when the window cuts a multi-byte character at its end, the
// partial character is dropped and truncated is set (max_bytes >= 4 guarantees progress); any
// other invalid byte (a window starting inside a character included) fails with step "utf8" and
// a message naming the file offset of the byte and suggesting --binary.
StatusOr<ReadResult> read_text(const Roots& roots, const std::string& path, std::uint64_t offset,
                               std::uint64_t max_bytes);
StatusOr<ReadResult> read_bytes(const Roots& roots, const std::string& path, std::uint64_t offset,
                                std::uint64_t max_bytes);

// Atomic write: refuses data over max_bytes (max_bytes itself 1..kMaxWrite; step "size"), and
// invalid UTF-8 unless `binary` (step "utf8"). The parent directory must exist (no mkdir -p).
// Writes a temp file with a random name beside the target (O_CREAT | O_EXCL, never following a
// link), fsyncs it, renameat()s it over the target within the same directory fd, then fsyncs
// the directory; on failure the temp file is removed. A new file gets mode 0644 (umask ignored);
// a replaced file keeps its permission bits (not its owner or other links).
// A symlink anywhere on the path, the final component included, is refused (step "resolve",
// ELOOP). A path naming a directory, or ending in '/', is refused (step "type").
Status write_file(const Roots& roots, const std::string& path, std::string_view data, bool binary,
                  std::uint64_t max_bytes);

struct Entry {
  std::string name;
  std::string type;           // "file", "dir", "symlink", "other" (fifo, socket, device)
  std::uint64_t size = 0;     // bytes, st_size (for a symlink: the length of its target)
  std::int64_t mtime_ms = 0;  // milliseconds since the epoch
};
struct Listing {
  std::vector<Entry> entries;  // sorted by name (bytewise), without "." and ".."
  bool truncated = false;      // the directory has more than max_entries entries
};

// Lists a directory: the max_entries (1..kMaxListEntries, else step "size") first names in
// sorted order, with lstat semantics (a symlink is listed as a symlink, never followed). Memory is bounded
// by max_entries whatever the directory's size. An entry removed while listing is skipped.
StatusOr<Listing> list_dir(const Roots& roots, const std::string& path, std::size_t max_entries);

// True when `data` is well-formed UTF-8 (no overlongs, surrogates or code points over
// U+10FFFF). Exposed for the protocol layer and tests.
bool valid_utf8(std::string_view data);

}  // namespace corral::files
