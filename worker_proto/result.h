// Result<T>: how the client library, the worker SDK and the JSON codec report failure. A
// call returns its value or a Failure, never a bool beside an out-string, so a caller cannot
// read a stale message or forget to look. Header-only: worker programs link worker_proto
// alone, without runtime/ (whose Status plays the same part for setup code).
#pragma once

#include <cerrno>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace corral::proto {

// Why a call failed. The kind is what callers branch on (a timeout may be retried, a closed
// peer may not); the message is for people and is printed as it is. Not named Error: that
// is the protocol's Error message (corral.fbs).
struct Failure {
  enum class Kind {
    io,        // a system call failed (socket, connect, read, write)
    closed,    // the peer went away (EOF), between frames or inside one
    timeout,   // nothing complete arrived within the time asked for
    protocol,  // the peer sent something malformed, oversized or out of place
    refused,   // the peer answered with an error: a refused hello, a failed host call
    invalid,   // the caller's input is wrong: JSON that does not parse, a call out of turn
  };
  Kind kind = Kind::io;
  std::string message;
};

// What a failed write's errno says: EPIPE and ECONNRESET mean the peer is gone, as its reader
// would say (closed); anything else is the system's (io).
inline Failure::Kind write_failure_kind(int err) {
  return err == EPIPE || err == ECONNRESET ? Failure::Kind::closed : Failure::Kind::io;
}

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}          // NOLINT: implicit, so `return value;` works
  Result(Failure failure) : v_(std::move(failure)) {}  // NOLINT: and `return Failure{...};`

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  // On the wrong alternative these throw std::bad_variant_access rather than read garbage.
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const Failure& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Failure> v_;
};

// Success with nothing to return.
template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Failure failure) : failure_(std::move(failure)) {}  // NOLINT: implicit, as above

  bool ok() const { return !failure_; }
  explicit operator bool() const { return ok(); }
  const Failure& error() const { return failure_.value(); }

 private:
  std::optional<Failure> failure_;
};

}  // namespace corral::proto
