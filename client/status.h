// How the C ABI reports failure: every entry point runs its body through `guarded`, which turns
// any exception into a status code and a one-line, per-thread message for sp_last_error().
#pragma once

#include <stdexcept>
#include <string>

#include "client/sonopipe_client.h"

namespace sonopipe::client {

// A failure the library names itself: an SP_ERROR_* code and what went wrong.
struct ClientError : std::runtime_error {
  ClientError(int status_, const std::string& message) : std::runtime_error(message), status(status_) {}
  int status;
};

// Throws SP_ERROR_ARGUMENT "<what> is NULL" when `pointer` is null.
void require(const void* pointer, const char* what);

void set_last_error(const char* function, const char* message);
void clear_last_error();
// The status code and message of the exception in flight (called inside a catch block).
int status_of_current_exception(const char* function) noexcept;

// Runs `body` (returning nothing) as the C entry point `function`: SP_OK, or the failure's status.
template <typename Body>
int guarded(const char* function, Body&& body) noexcept {
  try {
    body();
    clear_last_error();
    return SP_OK;
  } catch (...) {
    return status_of_current_exception(function);
  }
}

// For accessors that return a value: `fallback` when the body throws (the message is kept).
template <typename Value, typename Body>
Value guarded_value(const char* function, Value fallback, Body&& body) noexcept {
  try {
    return body();
  } catch (...) {
    status_of_current_exception(function);
    return fallback;
  }
}

}  // namespace sonopipe::client
