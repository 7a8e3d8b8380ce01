// Status and StatusOr: how setup code in corral reports failure without exceptions.
// A Status carries a code (what kind of failure: what control flow branches on), the step
// that failed (a short stable word for messages and records: "chdir", "exec", "pipe"), the
// errno when a syscall failed (0 otherwise) and a human-readable message.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace corral {

// What kind of failure a Status is. Code that decides what to do next (which error code a
// client gets, whether a failed launch counts as a setup error) looks at this, never at the
// step's or the message's text.
enum class StatusCode : std::uint8_t {
  ok,
  failed,   // something on the host failed (a system call: err() says which errno)
  invalid,  // the input is wrong: a value out of range, a malformed path (Status::invalid)
  refused,  // the policy says no: over a scope's ceiling, a read-only root, --deny-read, --protect
};

class [[nodiscard]] Status {
 public:
  Status() = default;  // ok
  static Status error(std::string step, int err, std::string message) {
    return make(StatusCode::failed, std::move(step), err, std::move(message));
  }
  // A failed syscall: message is "<step>: <strerror(err)>" plus optional detail.
  static Status from_errno(std::string step, int err, std::string_view detail = {}) {
    std::string msg = step;
    if (!detail.empty()) msg.append(" ").append(detail);
    msg.append(": ").append(std::strerror(err));
    return error(std::move(step), err, std::move(msg));
  }
  static Status invalid(std::string message) { return make(StatusCode::invalid, "validate", 0, std::move(message)); }
  // The policy refuses: `step` names the rule ("ceiling", "readonly", "denied").
  static Status refused(std::string step, int err, std::string message) {
    return make(StatusCode::refused, std::move(step), err, std::move(message));
  }

  bool ok() const { return code_ == StatusCode::ok; }
  StatusCode code() const { return code_; }
  const std::string& step() const { return step_; }
  int err() const { return errno_; }
  const std::string& message() const { return message_; }

 private:
  static Status make(StatusCode code, std::string step, int err, std::string message) {
    Status s;
    s.code_ = code;
    s.step_ = std::move(step);
    s.errno_ = err;
    s.message_ = std::move(message);
    return s;
  }
  StatusCode code_ = StatusCode::ok;
  int errno_ = 0;
  std::string step_;
  std::string message_;
};

template <class T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : v_(std::move(value)) {}            // NOLINT: implicit by design
  StatusOr(Status status) : v_(std::move(status)) {}     // NOLINT: must not be ok
  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const { return std::get<Status>(v_); }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace corral
