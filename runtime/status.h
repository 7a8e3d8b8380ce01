// Status and StatusOr: how setup code in corral reports failure without exceptions.
// A Status carries the step that failed (a short stable word: "chdir", "exec", "pipe"),
// the errno when a syscall failed (0 otherwise) and a human-readable message.
#pragma once

#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace corral {

class [[nodiscard]] Status {
 public:
  Status() = default;  // ok
  static Status error(std::string step, int err, std::string message) {
    Status s;
    s.ok_ = false;
    s.step_ = std::move(step);
    s.errno_ = err;
    s.message_ = std::move(message);
    return s;
  }
  // A failed syscall: message is "<step>: <strerror(err)>" plus optional detail.
  static Status from_errno(std::string step, int err, std::string_view detail = {}) {
    std::string msg = step;
    if (!detail.empty()) msg.append(" ").append(detail);
    msg.append(": ").append(std::strerror(err));
    return error(std::move(step), err, std::move(msg));
  }
  static Status invalid(std::string message) { return error("validate", 0, std::move(message)); }

  bool ok() const { return ok_; }
  const std::string& step() const { return step_; }
  int err() const { return errno_; }
  const std::string& message() const { return message_; }

 private:
  bool ok_ = true;
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
