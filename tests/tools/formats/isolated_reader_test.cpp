// The child-process reader of isolated_reader.h with readers written here that behave well, refuse,
// crash or hang on purpose: frames arrive byte for byte with their headers, a FormatError of the
// child arrives as it was, and a death or a hang of the child becomes one FormatError that names
// the file and the object the child noted last, and every later call repeats it; what a dying child
// prints reaches neither stdout nor stderr.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <thread>

#include <unistd.h>

#include "tests/support/test_support.h"
#include "tools/formats/acquisition_reader.h"
#include "tools/formats/isolated_reader.h"

using namespace sonopipe;
using namespace sonopipe::formats;

namespace {

constexpr std::size_t kSamples = 64;

// A reader of `frames` int16 frames of random samples (seeded), with one behaviour on purpose.
enum class Behaviour {
  good,
  refuses_frame_1,
  crashes_on_open,
  aborts_on_frame_1,
  prints_and_aborts_on_frame_1,  // as libmatio does on some damaged files (glibc's message, then SIGABRT)
  hangs_on_frame_1,
  latin1_key_in_frame_1
};

constexpr char kDyingWords[] = "free(): invalid pointer\n";

recording::Frame expected_frame(std::uint64_t seed, std::size_t index) {
  recording::Frame frame;
  frame.meta.stream_id = 3;
  frame.meta.sequence = index;
  frame.meta.kind = FrameKind::rf;
  frame.meta.payload.dtype = DType::int16;
  frame.meta.payload.axes = {{"sample", static_cast<std::int64_t>(kSamples), 1e-7, "s", 2e-6}};
  frame.meta.sampling_frequency_hz = 1e7;
  frame.meta.attributes["source_format"] = "test";
  frame.meta.vectors["element_x_m"] = {-1e-3, 0.0, 1e-3};
  std::mt19937_64 random(seed + index);
  frame.payload.resize(kSamples * sizeof(std::int16_t));
  for (std::byte& b : frame.payload) b = static_cast<std::byte>(random());
  return frame;
}

class TestReader final : public AcquisitionReader {
 public:
  TestReader(std::string path, std::uint64_t seed, Behaviour behaviour)
      : path_(std::move(path)), seed_(seed), behaviour_(behaviour) {
    isolation::note_progress("Header");
    if (behaviour_ == Behaviour::crashes_on_open) std::raise(SIGSEGV);
  }
  std::string description() const override { return "test reader"; }
  std::size_t frame_count() const override { return 3; }
  std::map<std::string, std::string> source_attributes() const override { return {{"format", "test"}, {"k", "v"}}; }
  recording::Frame read_frame(std::size_t index) override {
    isolation::note_progress("Data{" + std::to_string(index + 1) + "}");
    if (index == 1) {
      if (behaviour_ == Behaviour::refuses_frame_1) fail(path_, "Data{2}", "expected int16");
      if (behaviour_ == Behaviour::aborts_on_frame_1) std::abort();
      if (behaviour_ == Behaviour::prints_and_aborts_on_frame_1) {
        (void)!::write(STDOUT_FILENO, kDyingWords, sizeof kDyingWords - 1);
        (void)!::write(STDERR_FILENO, kDyingWords, sizeof kDyingWords - 1);
        std::abort();
      }
      if (behaviour_ == Behaviour::hangs_on_frame_1)
        for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
      if (behaviour_ == Behaviour::latin1_key_in_frame_1) {
        recording::Frame frame = expected_frame(seed_, index);
        frame.meta.attributes["sond\xe9"] = "x";  // Latin-1, as damage in a UFF attribute name made it
        return frame;
      }
    }
    return expected_frame(seed_, index);
  }

 private:
  std::string path_;
  std::uint64_t seed_;
  Behaviour behaviour_;
};

std::unique_ptr<AcquisitionReader> open_test(const std::string& path, std::uint64_t seed, Behaviour behaviour) {
  return isolation::open_in_child(path, ImportOptions{}, [=](const std::string& file, const ImportOptions&) {
    return std::unique_ptr<AcquisitionReader>(std::make_unique<TestReader>(file, seed, behaviour));
  }, "libmatio");
}

std::string error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const FormatError& error) {
    return error.what();
  }
  return "";
}

// What this process's stdout and stderr receive while `call` runs, from it and from any child it
// starts meanwhile (which inherits them).
std::string output_during(const std::function<void()>& call) {
  std::fflush(stdout);
  std::fflush(stderr);
  char path[] = "/tmp/sonopipe-isolated-output-XXXXXX";
  const int file = ::mkstemp(path);
  REQUIRE(file >= 0);
  ::unlink(path);
  const int out = ::dup(STDOUT_FILENO), err = ::dup(STDERR_FILENO);
  ::dup2(file, STDOUT_FILENO);
  ::dup2(file, STDERR_FILENO);
  call();
  std::fflush(stdout);
  std::fflush(stderr);
  ::dup2(out, STDOUT_FILENO);
  ::dup2(err, STDERR_FILENO);
  ::close(out);
  ::close(err);
  std::string text(1 << 16, '\0');
  const ssize_t length = ::pread(file, text.data(), text.size(), 0);
  ::close(file);
  text.resize(length > 0 ? static_cast<std::size_t>(length) : 0);
  return text;
}

}  // namespace

TEST_CASE("frames from the child process arrive byte for byte with their headers", "[formats][isolation]") {
  const std::uint64_t seed = test::fresh_seed();
  auto reader = open_test("x.mat", seed, Behaviour::good);
  CHECK(reader->description() == "test reader");
  CHECK(reader->frame_count() == 3);
  CHECK(reader->source_attributes() == std::map<std::string, std::string>{{"format", "test"}, {"k", "v"}});
  for (std::size_t index : {2u, 0u, 1u}) {
    const recording::Frame expected = expected_frame(seed, index), frame = reader->read_frame(index);
    CHECK(frame.payload == expected.payload);
    CHECK(frame.meta.sequence == index);
    CHECK(frame.meta.stream_id == expected.meta.stream_id);
    CHECK(frame.meta.payload.axes.at(0).name == "sample");
    CHECK(frame.meta.payload.axes.at(0).spacing == expected.meta.payload.axes.at(0).spacing);
    CHECK(frame.meta.attributes == expected.meta.attributes);
    CHECK(frame.meta.vectors == expected.meta.vectors);
  }
}

TEST_CASE("a FormatError in the child arrives as it was, and the child goes on", "[formats][isolation]") {
  auto reader = open_test("x.mat", 1, Behaviour::refuses_frame_1);
  CHECK(error_of([&] { reader->read_frame(1); }) == "x.mat: Data{2}: expected int16");
  CHECK(reader->read_frame(2).payload == expected_frame(1, 2).payload);
}

TEST_CASE("a child killed by a signal becomes one FormatError naming the object it was reading",
          "[formats][isolation]") {
  SECTION("while opening") {
    const std::string message = error_of([&] { open_test("x.mat", 1, Behaviour::crashes_on_open); });
    INFO(message);
    CHECK(message.rfind("x.mat: Header: libmatio failed reading it (damaged file?): ", 0) == 0);
    CHECK(message.find("signal " + std::to_string(SIGSEGV)) != std::string::npos);
  }
  SECTION("while reading a frame; later calls repeat the error") {
    auto reader = open_test("x.mat", 1, Behaviour::aborts_on_frame_1);
    CHECK(reader->read_frame(0).payload == expected_frame(1, 0).payload);
    const std::string message = error_of([&] { reader->read_frame(1); });
    INFO(message);
    CHECK(message.rfind("x.mat: Data{2}: libmatio failed reading it (damaged file?): ", 0) == 0);
    CHECK(message.find("signal " + std::to_string(SIGABRT)) != std::string::npos);
    CHECK(error_of([&] { reader->read_frame(0); }) == message);
  }
}

TEST_CASE("what a dying child prints reaches neither stdout nor stderr; its death is one FormatError",
          "[formats][isolation]") {
  std::string message;
  const std::string output = output_during([&] {
    auto reader = open_test("x.mat", 1, Behaviour::prints_and_aborts_on_frame_1);
    message = error_of([&] { reader->read_frame(1); });
  });
  INFO(message);
  CHECK(output.find("free(): invalid pointer") == std::string::npos);
  CHECK(message.rfind("x.mat: Data{2}: libmatio failed reading it (damaged file?): ", 0) == 0);
  CHECK(message.find("signal " + std::to_string(SIGABRT)) != std::string::npos);
}

TEST_CASE("a frame whose text is not UTF-8 is refused with its file and frame, and the child goes on",
          "[formats][isolation]") {
  // protobuf's string fields (the child's transport, and the daemon's wire) take UTF-8 only.
  auto reader = open_test("x.uff", 1, Behaviour::latin1_key_in_frame_1);
  CHECK(error_of([&] { reader->read_frame(1); }) == "x.uff: frame 1: an attribute key is not UTF-8 text (damaged file?)");
  CHECK(reader->read_frame(2).payload == expected_frame(1, 2).payload);
}

TEST_CASE("a child that never answers is stopped at the time limit", "[formats][isolation]") {
  // The child sleeps forever: any limit ends it; 1 s keeps the test short.
  isolation::set_limits({1, isolation::Limits{}.address_space_bytes});
  auto reader = open_test("x.mat", 1, Behaviour::hangs_on_frame_1);
  const std::string message = error_of([&] { reader->read_frame(1); });
  isolation::set_limits({});
  INFO(message);
  CHECK(message == "x.mat: Data{2}: libmatio failed reading it (damaged file?): no answer within 1 s (stopped)");
}

TEST_CASE("a check in a child process: its answer, or none when the child dies", "[formats][isolation]") {
  CHECK(isolation::check_in_child([] { return true; }) == std::optional<bool>(true));
  CHECK(isolation::check_in_child([] { return false; }) == std::optional<bool>(false));
  CHECK(isolation::check_in_child([]() -> bool { throw std::runtime_error("no"); }) == std::optional<bool>(false));
  CHECK_FALSE(isolation::check_in_child([]() -> bool { std::abort(); }).has_value());
}

TEST_CASE("a question in a child process: its answer, the fallback for an exception, a FormatError when it dies",
          "[formats][isolation]") {
  CHECK(isolation::ask_in_child("x.h5", "libhdf5", "detecting its format", [] { return 7; }, 0) == 7);
  CHECK(isolation::ask_in_child("x.h5", "libhdf5", "detecting its format", [] { return 255; }, 0) == 255);
  CHECK(isolation::ask_in_child("x.h5", "libhdf5", "detecting its format",
                                []() -> int { throw std::runtime_error("no"); }, 3) == 3);
  const std::string crashed = error_of([] {
    isolation::ask_in_child("x.h5", "libhdf5", "detecting its format", []() -> int {
      isolation::note_progress("/streams");
      std::raise(SIGSEGV);
      return 0;
    }, 0);
  });
  INFO(crashed);
  CHECK(crashed.rfind("x.h5: /streams: libhdf5 failed detecting its format (damaged file?): ", 0) == 0);
  CHECK(crashed.find("signal " + std::to_string(SIGSEGV)) != std::string::npos);
  isolation::set_limits({1, isolation::Limits{}.address_space_bytes});
  const std::string hung = error_of([] {
    isolation::ask_in_child("x.h5", "libhdf5", "detecting its format", []() -> int {
      for (;;) ::pause();
    }, 0);
  });
  isolation::set_limits({});
  CHECK(hung == "x.h5: /: libhdf5 failed detecting its format (damaged file?): no answer within 1 s (stopped)");
}
