#include "client/status.h"

#include <zmq.hpp>

#include <new>

#include "wire/wire.h"

namespace sonopipe::client {
namespace {

thread_local std::string last_error;

}  // namespace

void require(const void* pointer, const char* what) {
  if (pointer == nullptr) throw ClientError(SP_ERROR_ARGUMENT, std::string(what) + " is NULL");
}

void set_last_error(const char* function, const char* message) {
  try {
    last_error = std::string(function) + ": " + message;
  } catch (...) {
    last_error.clear();  // out of memory for the message itself: the status code still tells
  }
}

void clear_last_error() { last_error.clear(); }

int status_of_current_exception(const char* function) noexcept {
  try {
    throw;
  } catch (const ClientError& e) {
    set_last_error(function, e.what());
    return e.status;
  } catch (const wire::WireError& e) {
    set_last_error(function, e.what());
    return e.reason == wire::RejectReason::size_mismatch ? SP_ERROR_SIZE_MISMATCH : SP_ERROR_BAD_HEADER;
  } catch (const zmq::error_t& e) {
    set_last_error(function, (std::string("ZeroMQ: ") + e.what()).c_str());
    return SP_ERROR_SOCKET;
  } catch (const std::bad_alloc&) {
    set_last_error(function, "out of memory");
    return SP_ERROR_MEMORY;
  } catch (const std::exception& e) {
    set_last_error(function, e.what());
    return SP_ERROR_INTERNAL;
  } catch (...) {
    set_last_error(function, "unknown exception");
    return SP_ERROR_INTERNAL;
  }
}

}  // namespace sonopipe::client

extern "C" const char* sp_last_error(void) { return sonopipe::client::last_error.c_str(); }
