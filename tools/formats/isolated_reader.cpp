#include "tools/formats/isolated_reader.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <google/protobuf/stubs/logging.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <new>
#include <optional>
#include <stdexcept>
#include <utility>

#include "wire/wire.h"

// Sanitizers reserve terabytes of address space: an address-space limit would stop the child at once.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SONOPIPE_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define SONOPIPE_SANITIZED 1
#endif
#endif

namespace sonopipe::formats::isolation {

namespace {

// The defaults, with seconds_per_step from SONOPIPE_READER_SECONDS_PER_STEP when it holds a whole
// number (docs/clients.md: slower disks or huge files want more, the damage tests less).
std::optional<int> seconds_from_environment() {
  if (const char* text = std::getenv("SONOPIPE_READER_SECONDS_PER_STEP")) {
    char* end = nullptr;
    const long seconds = std::strtol(text, &end, 10);
    if (end != text && *end == '\0' && seconds >= 0 && seconds <= 86400) return static_cast<int>(seconds);
  }
  return std::nullopt;
}

Limits limits_from_environment() {
  Limits limits;
  if (const std::optional<int> seconds = seconds_from_environment()) limits.seconds_per_step = *seconds;
  return limits;
}

Limits current_limits = limits_from_environment();

// The shared page where the child notes what it is reading (null outside a child).
constexpr std::size_t kProgressBytes = 4096;
char* child_progress = nullptr;

enum class Status : std::uint8_t { ok = 0, refused = 1 };

// A request is a frame index; with this bit set it asks for the frame's FrameInfo only.
constexpr std::uint64_t kFrameInfoRequest = std::uint64_t{1} << 63;

// ---------------------------------------------------------------- bytes over the socket

void append_number(std::string& out, std::uint64_t value) { out.append(reinterpret_cast<const char*>(&value), sizeof value); }
void append_text(std::string& out, const std::string& text) {
  append_number(out, text.size());
  out += text;
}

// Reads what append_* wrote; a short or inconsistent message is the child's fault (throws).
class Cursor {
 public:
  explicit Cursor(std::string bytes) : bytes_(std::move(bytes)) {}
  std::uint64_t number() {
    std::uint64_t value = 0;
    take(&value, sizeof value);
    return value;
  }
  std::string text() {
    const std::uint64_t size = number();
    if (size > bytes_.size() - used_) throw std::runtime_error("short message");
    std::string out = bytes_.substr(used_, size);
    used_ += size;
    return out;
  }
  std::string rest() { return bytes_.substr(std::exchange(used_, bytes_.size())); }

 private:
  void take(void* out, std::size_t size) {
    if (size > bytes_.size() - used_) throw std::runtime_error("short message");
    std::memcpy(out, bytes_.data() + used_, size);
    used_ += size;
  }
  std::string bytes_;
  std::size_t used_ = 0;
};

bool send_all(int socket, const void* data, std::size_t size) {
  const char* bytes = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t sent = ::send(socket, bytes, size, MSG_NOSIGNAL);
    if (sent < 0 && errno == EINTR) continue;
    if (sent <= 0) return false;
    bytes += sent;
    size -= static_cast<std::size_t>(sent);
  }
  return true;
}

enum class Received { all, closed, late };

// Everything asked for, the end of the stream (or an error), or `deadline` passed first (no
// deadline: wait as long as it takes).
Received receive_all(int socket, void* data, std::size_t size,
                     std::optional<std::chrono::steady_clock::time_point> deadline) {
  char* bytes = static_cast<char*>(data);
  while (size > 0) {
    if (deadline) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return Received::late;
      pollfd wait{socket, POLLIN, 0};
      const int ready = ::poll(&wait, 1, static_cast<int>(std::min<std::int64_t>(left.count() + 1, 1 << 30)));
      if (ready < 0 && errno == EINTR) continue;
      if (ready == 0) return Received::late;
      if (ready < 0) return Received::closed;
    }
    const ssize_t got = ::recv(socket, bytes, size, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return Received::closed;
    bytes += got;
    size -= static_cast<std::size_t>(got);
  }
  return Received::all;
}

bool send_reply(int socket, Status status, const std::string& body) {
  std::string head(1, static_cast<char>(status));
  append_number(head, body.size());
  return send_all(socket, head.data(), head.size()) && send_all(socket, body.data(), body.size());
}

// ---------------------------------------------------------------- the child

// Whether `text` is well-formed UTF-8 (RFC 3629: no overlong forms, surrogates or code points
// past U+10FFFF), as protobuf's string fields require.
bool is_utf8(const std::string& text) {
  const auto* byte = reinterpret_cast<const unsigned char*>(text.data());
  const auto* end = byte + text.size();
  while (byte < end) {
    const unsigned char lead = *byte++;
    if (lead < 0x80) continue;
    int more = 0;
    std::uint32_t code = 0, least = 0;
    if ((lead & 0xE0) == 0xC0) more = 1, code = lead & 0x1F, least = 0x80;
    else if ((lead & 0xF0) == 0xE0) more = 2, code = lead & 0x0F, least = 0x800;
    else if ((lead & 0xF8) == 0xF0) more = 3, code = lead & 0x07, least = 0x10000;
    else return false;
    if (end - byte < more) return false;
    for (int k = 0; k < more; ++k) {
      if ((byte[k] & 0xC0) != 0x80) return false;
      code = (code << 6) | (byte[k] & 0x3F);
    }
    byte += more;
    if (code < least || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return false;
  }
  return true;
}

// The first text of `meta` that is not UTF-8 ("attribute key", ...), or "" when all of it is. Such
// a frame cannot travel as a FrameHeader (to the parent, or later to the daemon): it is refused.
std::string text_not_utf8(const FrameMeta& meta) {
  for (const Axis& axis : meta.payload.axes) {
    if (!is_utf8(axis.name)) return "an axis name";
    if (!is_utf8(axis.unit)) return "an axis unit";
  }
  if (!is_utf8(meta.payload.unit)) return "the unit";
  for (const auto& [key, value] : meta.attributes) {
    if (!is_utf8(key)) return "an attribute key";
    if (!is_utf8(value)) return "the value of attribute '" + (is_utf8(key) ? key : std::string("?")) + "'";
  }
  for (const auto& [name, values] : meta.vectors)
    if (!is_utf8(name)) return "a vector name";
  return "";
}

// A message for an exception that is not a FormatError (which names its file and object itself).
std::string refusal(const std::string& path, const std::string& what) {
  const std::string object = child_progress && child_progress[0] ? child_progress : "/";
  return path + ": " + object + ": " + what;
}

void prepare_child(int socket, char* progress, const Limits& limits) {
  // Crashes end the child with its signal (the parent reports it), not in inherited handlers
  // (a fuzzer's or a test framework's, which would report them as the parent's).
  for (int signal : {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL, SIGTERM, SIGINT, SIGALRM})
    ::signal(signal, SIG_DFL);
  ::signal(SIGPIPE, SIG_IGN);
  // The child's only output is its reply. What a library prints on its way down would be extra
  // lines on the tool's stderr before its one-line refusal: glibc's "free(): invalid pointer" when
  // libmatio aborts on a damaged file (the refusal names the signal and what was being read), or
  // protobuf's warnings about the file's text ("invalid UTF-8 data when parsing", whose parse
  // failure the reader's FormatError reports). So stdout and stderr go to /dev/null, and protobuf's
  // warnings are not even formatted. Fatal ones still end the child.
  if (const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC); null >= 0) {
    ::dup2(null, STDOUT_FILENO);
    ::dup2(null, STDERR_FILENO);
    if (null > STDERR_FILENO) ::close(null);  // a tool started without stdout got it as fd 1
  }
  google::protobuf::SetLogHandler([](google::protobuf::LogLevel, const char*, int, const std::string&) {});
#ifndef SONOPIPE_SANITIZED
  const rlimit memory{limits.address_space_bytes, limits.address_space_bytes};
  ::setrlimit(RLIMIT_AS, &memory);
#endif
  child_progress = progress;
  (void)socket;
}

[[noreturn]] void run_reader_child(int socket, char* progress, const std::string& path, const ImportOptions& options,
                                   const Opener& open, const Limits& limits) {
  prepare_child(socket, progress, limits);
  std::unique_ptr<AcquisitionReader> reader;
  try {
    reader = open(path, options);
    std::string summary;
    append_text(summary, reader->description());
    append_number(summary, reader->frame_count());
    const auto attributes = reader->source_attributes();
    append_number(summary, attributes.size());
    for (const auto& [key, value] : attributes) {
      append_text(summary, key);
      append_text(summary, value);
    }
    if (!send_reply(socket, Status::ok, summary)) ::_exit(0);
  } catch (const FormatError& error) {
    send_reply(socket, Status::refused, error.what());
    ::_exit(0);
  } catch (const std::bad_alloc&) {
    send_reply(socket, Status::refused, refusal(path, "declares sizes too large to allocate (damaged file)"));
    ::_exit(0);
  } catch (const std::exception& error) {
    send_reply(socket, Status::refused, refusal(path, error.what()));
    ::_exit(0);
  }
  for (;;) {
    std::uint64_t index = 0;
    if (receive_all(socket, &index, sizeof index, std::nullopt) != Received::all) ::_exit(0);  // the parent is done
    try {
      if (index & kFrameInfoRequest) {
        const AcquisitionReader::FrameInfo info = reader->frame_info(index & ~kFrameInfoRequest);
        std::string body;
        append_number(body, info.stream_id);
        append_number(body, static_cast<std::uint64_t>(info.acquisition_time_ns));
        if (!send_reply(socket, Status::ok, body)) ::_exit(0);
        continue;
      }
      const recording::Frame frame = reader->read_frame(index);
      if (const std::string text = text_not_utf8(frame.meta); !text.empty())
        fail(path, "frame " + std::to_string(index), text + " is not UTF-8 text (damaged file?)");
      std::string body;
      append_text(body, wire::frame_header_from_meta(frame.meta).SerializeAsString());
      body.append(reinterpret_cast<const char*>(frame.payload.data()), frame.payload.size());
      if (!send_reply(socket, Status::ok, body)) ::_exit(0);
    } catch (const FormatError& error) {
      if (!send_reply(socket, Status::refused, error.what())) ::_exit(0);
    } catch (const std::bad_alloc&) {
      if (!send_reply(socket, Status::refused, refusal(path, "declares sizes too large to allocate (damaged file)")))
        ::_exit(0);
    } catch (const std::exception& error) {
      if (!send_reply(socket, Status::refused, refusal(path, error.what()))) ::_exit(0);
    }
  }
}

// ---------------------------------------------------------------- the parent

// A child process with its socket and progress page; ended (and reaped) when destroyed.
class Child {
 public:
  template <typename Body>
  Child(const std::string& path, const Limits& limits, Body body) : path_(path), limits_(limits) {
    int sockets[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sockets) != 0)
      fail(path, "", std::string("cannot create the reader's socket: ") + std::strerror(errno));
    void* page = ::mmap(nullptr, kProgressBytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED) {
      ::close(sockets[0]);
      ::close(sockets[1]);
      fail(path, "", std::string("cannot map the reader's progress page: ") + std::strerror(errno));
    }
    progress_ = static_cast<char*>(page);
    pid_ = ::fork();
    if (pid_ < 0) {
      ::close(sockets[0]);
      ::close(sockets[1]);
      ::munmap(progress_, kProgressBytes);
      fail(path, "", std::string("cannot start the reader process: ") + std::strerror(errno));
    }
    if (pid_ == 0) {
      ::close(sockets[0]);
      body(sockets[1], progress_);
      ::_exit(0);
    }
    ::close(sockets[1]);
    socket_ = sockets[0];
  }
  ~Child() { stop(); }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  bool send(const void* data, std::size_t size) { return pid_ > 0 && send_all(socket_, data, size); }

  // One reply, or nullopt when the child died or ran past the time limit (then it is gone).
  std::optional<std::pair<Status, std::string>> reply(bool limited) {
    std::optional<std::chrono::steady_clock::time_point> deadline;
    if (limited && limits_.seconds_per_step > 0)
      deadline = std::chrono::steady_clock::now() + std::chrono::seconds(limits_.seconds_per_step);
    char head[1 + sizeof(std::uint64_t)];
    std::uint64_t size = 0;
    Received received = pid_ > 0 ? receive_all(socket_, head, sizeof head, deadline) : Received::closed;
    if (received == Received::all) {
      std::memcpy(&size, head + 1, sizeof size);
      std::string body;
      try {
        body.resize(size);
      } catch (const std::bad_alloc&) {
        fail(path_, "", "the reader process sent a reply too large to hold");
      }
      received = receive_all(socket_, body.data(), body.size(), deadline);
      if (received == Received::all) return std::make_pair(static_cast<Status>(head[0]), std::move(body));
    }
    // Out of time (the child is stopped), or the end of the stream: the child is exiting.
    timed_out_ = received == Received::late;
    return std::nullopt;
  }

  // Why the child is gone (after reply() gave nullopt): "<object>", "killed by signal 11 (...)".
  std::pair<std::string, std::string> death() {
    const bool running = pid_ > 0 && timed_out_;
    std::string how;
    int status = 0;
    if (running) {
      ::kill(pid_, SIGKILL);
      how = "no answer within " + std::to_string(limits_.seconds_per_step) + " s (stopped)";
    }
    if (pid_ > 0 && ::waitpid(pid_, &status, 0) == pid_ && !running) {
      if (WIFSIGNALED(status))
        how = "the reader process was killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
              ::strsignal(WTERMSIG(status)) + ")";
      else
        how = "the reader process ended (status " + std::to_string(WEXITSTATUS(status)) + ")";
    }
    pid_ = -1;
    std::string object(progress_, ::strnlen(progress_, kProgressBytes - 1));
    return {object, how};
  }

 private:
  void stop() {
    if (socket_ >= 0) ::close(socket_);  // the child sees the end of its requests and exits
    socket_ = -1;
    if (pid_ > 0) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == 0) {
        // Still busy with a step the parent no longer waits for.
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
      }
    }
    pid_ = -1;
    if (progress_) ::munmap(progress_, kProgressBytes);
    progress_ = nullptr;
  }

  std::string path_;
  Limits limits_;
  pid_t pid_ = -1;
  int socket_ = -1;
  char* progress_ = nullptr;
  bool timed_out_ = false;
};

class ChildReader final : public AcquisitionReader {
 public:
  ChildReader(const std::string& path, const ImportOptions& options, const Opener& open, const std::string& parser,
              const Limits& limits)
      : path_(path), parser_(parser), child_(path, limits, [&](int socket, char* progress) {
          run_reader_child(socket, progress, path, options, open, limits);
        }) {
    Cursor summary(expect_reply());
    try {
      description_ = summary.text();
      frame_count_ = summary.number();
      for (std::uint64_t k = summary.number(); k > 0; --k) {
        std::string key = summary.text();
        attributes_[key] = summary.text();
      }
    } catch (const std::runtime_error&) {
      fail(path_, "", "the reader process sent a malformed summary");
    }
  }

  std::string description() const override { return description_; }
  std::size_t frame_count() const override { return frame_count_; }
  std::map<std::string, std::string> source_attributes() const override { return attributes_; }

  // Asked of the child: a reader's cheap override (a recording's index) stays cheap.
  FrameInfo frame_info(std::size_t index) override {
    if (!gone_.empty()) throw FormatError(gone_);
    const std::uint64_t request = index | kFrameInfoRequest;
    if (!child_.send(&request, sizeof request)) report_death();
    const std::string body = expect_reply();
    std::uint64_t stream_id = 0, time_ns = 0;
    if (body.size() != sizeof stream_id + sizeof time_ns)
      fail(path_, "", "the reader process sent a malformed frame info " + std::to_string(index));
    std::memcpy(&stream_id, body.data(), sizeof stream_id);
    std::memcpy(&time_ns, body.data() + sizeof stream_id, sizeof time_ns);
    return {static_cast<std::uint32_t>(stream_id), static_cast<std::int64_t>(time_ns)};
  }

  recording::Frame read_frame(std::size_t index) override {
    if (!gone_.empty()) throw FormatError(gone_);
    const std::uint64_t request = index;
    if (!child_.send(&request, sizeof request)) report_death();
    std::string body = expect_reply();
    Cursor cursor(std::move(body));
    recording::Frame frame;
    try {
      v1::FrameHeader header;
      if (!header.ParseFromString(cursor.text())) throw std::runtime_error("header");
      frame.meta = wire::frame_meta_from_header(header);
      const std::string payload = cursor.rest();
      frame.payload.resize(payload.size());
      std::memcpy(frame.payload.data(), payload.data(), payload.size());
    } catch (const std::exception&) {
      fail(path_, "", "the reader process sent a malformed frame " + std::to_string(index));
    }
    return frame;
  }

 private:
  std::string expect_reply() {
    auto reply = child_.reply(true);
    if (!reply) report_death();
    if (reply->first != Status::ok) throw FormatError(reply->second);
    return std::move(reply->second);
  }

  [[noreturn]] void report_death() {
    const auto [object, how] = child_.death();
    try {
      fail(path_, object, parser_ + " failed reading it (damaged file?): " + how);
    } catch (const FormatError& error) {
      gone_ = error.what();
      throw;
    }
  }

  std::string path_;
  std::string parser_;
  Child child_;
  std::string description_;
  std::size_t frame_count_ = 0;
  std::map<std::string, std::string> attributes_;
  std::string gone_;  // the error every later call repeats once the child is gone
};

}  // namespace

void set_limits(const Limits& limits) { current_limits = limits; }
bool time_limit_from_environment() { return seconds_from_environment().has_value(); }
const Limits& limits() { return current_limits; }

std::unique_ptr<AcquisitionReader> open_in_child(const std::string& path, const ImportOptions& options,
                                                 const Opener& open, const std::string& parser, const Limits& limits) {
  return std::make_unique<ChildReader>(path, options, open, parser, limits);
}

int ask_in_child(const std::string& path, const std::string& parser, const std::string& doing,
                 const std::function<int()>& question, int on_exception, const Limits& limits) {
  Child child(path, limits, [&](int socket, char* progress) {
    prepare_child(socket, progress, limits);
    int answer = on_exception;
    try {
      answer = question();
    } catch (...) {
    }
    send_reply(socket, Status::ok, std::string(1, static_cast<char>(answer)));
    ::_exit(0);
  });
  const auto reply = child.reply(true);
  if (!reply || reply->second.size() != 1) {
    const auto [object, how] = child.death();
    fail(path, object, parser + " failed " + doing + " (damaged file?): " + how);
  }
  return static_cast<unsigned char>(reply->second[0]);
}

std::optional<bool> check_in_child(const std::function<bool()>& check, const Limits& limits) {
  Child child("", limits, [&](int socket, char* progress) {
    prepare_child(socket, progress, limits);
    bool answer = false;
    try {
      answer = check();
    } catch (...) {
    }
    send_reply(socket, answer ? Status::ok : Status::refused, "");
    ::_exit(0);
  });
  const auto reply = child.reply(true);
  if (!reply) return std::nullopt;
  return reply->first == Status::ok;
}

void note_progress(const std::string& object) {
  if (!child_progress) return;
  const std::size_t size = std::min(object.size(), kProgressBytes - 1);
  std::memcpy(child_progress, object.data(), size);
  child_progress[size] = '\0';
}

}  // namespace sonopipe::formats::isolation
