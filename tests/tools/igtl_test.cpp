// sonopipe-igtl against the real daemon and real OpenIGTLink clients: sonopiped runs the ARFI chain
// (config/arfi.yaml) and the 2-D strain chain (config/strain2d.yaml) on simulated data; the bridge
// serves result/arfi/displacement_filtered (as its peak-over-time map) and result/strain2d/strain.
// A client written with the Debian OpenIGTLink library (igtl::ClientSocket, igtl::ImageMessage)
// checks the IMAGE messages against the results the test itself received from the daemon's PUB
// socket, with the pixel positions computed here from the conventions of tools/igtl/image_layout.h.
// Beside it a client that never reads and one that drops its connection mid-message must not stop
// the bridge, nor stall the daemon; the never-reading client's messages are conflated (counted).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <igtlClientSocket.h>
#include <igtlImageMessage.h>
#include <igtlMessageHeader.h>
#include <igtlStringMessage.h>

#include <array>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <regex>
#include <sstream>
#include <tuple>

#include "sdk/thread_pool.h"
#include "tests/daemon/daemon_harness.h"
#include "tests/tools/tool_test_support.h"
#include "tools/sim/arfi_sim.h"

using namespace sonopipe;
using namespace std::chrono;

namespace {

// The "pipelines:" entries of an example config (its list items only).
std::string pipeline_entries(const std::string& path) {
  std::ifstream file(test::source_path(path));
  REQUIRE(file);
  std::stringstream kept;
  bool inside = false;
  for (std::string line; std::getline(file, line);) {
    if (inside) kept << line << "\n";
    if (line.rfind("pipelines:", 0) == 0) inside = true;
  }
  return kept.str();
}

// Both chains in one daemon on the CPU: config/arfi.yaml's settings and pipeline, plus the strain2d pipeline.
std::string daemon_settings() {
  return test::pipelines_of(test::source_path("config/arfi.yaml")) + pipeline_entries("config/strain2d.yaml");
}

sim::ArfiSimConfig small_arfi_set(std::uint64_t seed, double peak_um) {
  sim::ArfiSimConfig config;  // as tests/daemon/arfi_daemon_test.cpp: small, quick on two cores
  config.locations = 6;
  config.tracks = 30;
  config.samples = 240;
  config.focus_depth_m = 0.015;
  config.depth_sigma_m = 0.003;
  config.lateral_sigma_m = 1e-3;
  config.recovery_time_s = 1e-3;
  config.snr_db = 35;
  config.seed = seed;
  config.peak_um = peak_um;
  return config;
}

struct ImageReceived {
  std::string device;
  std::int64_t time_ns = 0;
  int size[3] = {0, 0, 0};
  float spacing[3] = {0, 0, 0};
  igtl::Matrix4x4 matrix;
  int scalar_type = -1, coordinate_system = -1, endian = -1, components = 0;
  std::vector<float> floats;
  std::vector<std::uint8_t> bytes;
};

struct Message {
  std::string type, device;
  std::optional<ImageReceived> image;
  std::string text;  // STRING
};

// An OpenIGTLink client built only from the library: reads whole messages with a deadline.
class IgtlClient {
 public:
  explicit IgtlClient(int port) : socket_(igtl::ClientSocket::New()) {
    REQUIRE(socket_->ConnectToServer("127.0.0.1", port) == 0);
    socket_->SetReceiveTimeout(100);
  }
  ~IgtlClient() { socket_->CloseSocket(); }

  std::optional<Message> receive(steady_clock::time_point deadline) {
    igtl::MessageHeader::Pointer header = igtl::MessageHeader::New();
    header->InitPack();
    if (!read_exactly(header->GetPackPointer(), header->GetPackSize(), deadline)) return std::nullopt;
    REQUIRE((header->Unpack() & igtl::MessageHeader::UNPACK_HEADER));
    Message message{header->GetDeviceType(), header->GetDeviceName(), std::nullopt, ""};
    if (message.type == "IMAGE") {
      igtl::ImageMessage::Pointer image = igtl::ImageMessage::New();
      image->SetMessageHeader(header);
      image->AllocatePack();
      REQUIRE(read_exactly(image->GetPackBodyPointer(), image->GetPackBodySize(), deadline + seconds(10)));
      REQUIRE((image->Unpack(1) & igtl::MessageHeader::UNPACK_BODY));  // 1: with the CRC check
      ImageReceived r;
      r.device = message.device;
      igtl::TimeStamp::Pointer stamp = igtl::TimeStamp::New();
      image->GetTimeStamp(stamp);
      r.time_ns = static_cast<std::int64_t>(stamp->GetTimeStampInNanoseconds());
      image->GetDimensions(r.size);
      image->GetSpacing(r.spacing);
      image->GetMatrix(r.matrix);
      r.scalar_type = image->GetScalarType();
      r.coordinate_system = image->GetCoordinateSystem();
      r.endian = image->GetEndian();
      r.components = image->GetNumComponents();
      const std::size_t pixels = static_cast<std::size_t>(r.size[0]) * r.size[1] * r.size[2];
      if (r.scalar_type == igtl::ImageMessage::TYPE_FLOAT32) {
        r.floats.resize(pixels);
        std::memcpy(r.floats.data(), image->GetScalarPointer(), pixels * sizeof(float));
      } else {
        r.bytes.resize(static_cast<std::size_t>(image->GetImageSize()));
        std::memcpy(r.bytes.data(), image->GetScalarPointer(), r.bytes.size());
      }
      message.image = std::move(r);
    } else if (message.type == "STRING") {
      igtl::StringMessage::Pointer text = igtl::StringMessage::New();
      text->SetMessageHeader(header);
      text->AllocatePack();
      REQUIRE(read_exactly(text->GetPackBodyPointer(), text->GetPackBodySize(), deadline + seconds(10)));
      REQUIRE((text->Unpack(1) & igtl::MessageHeader::UNPACK_BODY));
      message.text = text->GetString();
    } else {
      std::vector<char> body(header->GetBodySizeToRead());
      REQUIRE(read_exactly(body.data(), body.size(), deadline + seconds(10)));
    }
    return message;
  }

  void close() { socket_->CloseSocket(); }

 private:
  // Whole `length` bytes (partial reads accumulate across receive timeouts), false at the deadline.
  bool read_exactly(void* data, std::size_t length, steady_clock::time_point deadline) {
    auto* bytes = static_cast<char*>(data);
    std::size_t done = 0;
    while (done < length) {
      const int n = socket_->Receive(bytes + done, static_cast<int>(length - done), 0);
      if (n > 0) {
        done += static_cast<std::size_t>(n);
      } else if (n == 0) {
        FAIL("the bridge closed the connection");
      } else if (steady_clock::now() > deadline && done == 0) {
        return false;
      }
      if (steady_clock::now() > deadline + seconds(10)) FAIL("a message was cut short");
    }
    return true;
  }

  igtl::ClientSocket::Pointer socket_;
};

// A plain TCP client: it never reads (the receive buffer is made small, so the bridge's sends
// to it block after a few kilobytes), or it reads a few bytes and resets the connection.
class RawClient {
 public:
  explicit RawClient(int port) : descriptor_(::socket(AF_INET, SOCK_STREAM, 0)) {
    REQUIRE(descriptor_ >= 0);
    const int small = 4096;
    ::setsockopt(descriptor_, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(port));
    ::inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
    REQUIRE(::connect(descriptor_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
    socklen_t length = sizeof address;
    ::getsockname(descriptor_, reinterpret_cast<sockaddr*>(&address), &length);
    local_port = ntohs(address.sin_port);
  }
  ~RawClient() { drop(); }
  // Reads `count` bytes (less than one message), then closes with a reset (linger 0): mid-stream.
  void read_then_reset(std::size_t count) {
    std::vector<char> buffer(count);
    std::size_t done = 0;
    while (done < count) {
      const ssize_t n = ::recv(descriptor_, buffer.data() + done, count - done, 0);
      REQUIRE(n > 0);
      done += static_cast<std::size_t>(n);
    }
    const linger reset{1, 0};
    ::setsockopt(descriptor_, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
    drop();
  }
  void drop() {
    if (descriptor_ >= 0) ::close(descriptor_);
    descriptor_ = -1;
  }
  int local_port = 0;

 private:
  int descriptor_;
};

// key=value lines of the bridge's STRING status.
std::map<std::string, std::string> parse_status(const std::string& text) {
  std::map<std::string, std::string> values;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (auto at = line.find('='); at != std::string::npos) values[line.substr(0, at)] = line.substr(at + 1);
  return values;
}

// The device that carries `description` ("<key> float32 ..." or "<key> uint8 ...") per the device list.
std::string device_of(const std::string& devices_text, const std::string& description) {
  std::istringstream lines(devices_text);
  for (std::string line; std::getline(lines, line);)
    if (auto at = line.find(" = "); at != std::string::npos && line.compare(at + 3, description.size(), description) == 0)
      return line.substr(0, at);
  return "";
}

// The reference of the geometry (tools/igtl/image_layout.h, written out again): a pixel's RAS
// position in mm from the result's axes. Lateral -> +L (-R), depth -> -S, metres -> mm.
std::array<double, 3> expected_ras_mm(const v1::Axis& lateral, std::size_t lateral_index, const v1::Axis& depth,
                                      std::size_t depth_index) {
  const double x_mm = (lateral.origin() + lateral_index * lateral.spacing()) * 1000;
  const double z_mm = (depth.origin() + depth_index * depth.spacing()) * 1000;
  return {-x_mm, 0.0, -z_mm};
}

// Where Slicer puts pixel (i, j, 0) of a received IMAGE: the matrix carries the image centre
// (vtkIGTLToMRMLImage / igtlio ImageConverter shift it back to the corner by half the extent).
std::array<double, 3> slicer_ras_mm(const ImageReceived& image, int i, int j) {
  std::array<double, 3> position{};
  for (int r = 0; r < 3; ++r) {
    position[r] = image.matrix[r][3];
    for (int d = 0; d < 3; ++d) position[r] -= image.matrix[r][d] * image.spacing[d] * (image.size[d] - 1) / 2.0;
    position[r] += image.matrix[r][0] * image.spacing[0] * i + image.matrix[r][1] * image.spacing[1] * j;
  }
  return position;
}

// The uint8 rule of tools/igtl/display_window.h, written out again.
std::uint8_t expected_uint8(float value, double low, double high) {
  if (!std::isfinite(value)) return 0;
  const double scaled = std::min(1.0, std::max(0.0, (value - low) / (high - low)));
  return static_cast<std::uint8_t>(std::lround(255 * scaled));
}

// Checks one 2-D image [lateral, depth] (i = depth, j = lateral) against its result.
void check_geometry(const ImageReceived& image, const v1::Axis& lateral, const v1::Axis& depth, int scalar_type) {
  std::ostringstream matrix;
  for (int r = 0; r < 4; ++r)
    matrix << "\n  " << image.matrix[r][0] << " " << image.matrix[r][1] << " " << image.matrix[r][2] << " " << image.matrix[r][3];
  INFO("device " << image.device << ", matrix" << matrix.str());
  CHECK(image.scalar_type == scalar_type);
  CHECK(image.coordinate_system == igtl::ImageMessage::COORDINATE_RAS);
  CHECK(image.components == 1);
  REQUIRE(image.size[0] == static_cast<int>(depth.size()));    // i: the fastest (last) axis
  REQUIRE(image.size[1] == static_cast<int>(lateral.size()));  // j
  REQUIRE(image.size[2] == 1);
  // float32 spacing in the message: relative 1e-6 covers its rounding.
  CHECK(image.spacing[0] == Approx(depth.spacing() * 1000).epsilon(1e-6));
  CHECK(image.spacing[1] == Approx(lateral.spacing() * 1000).epsilon(1e-6));
  // Directions: i -> -S, j -> -R (+L), k -> +A.
  const float expected_columns[3][3] = {{0, 0, -1}, {-1, 0, 0}, {0, 1, 0}};
  for (int d = 0; d < 3; ++d)
    for (int r = 0; r < 3; ++r) CHECK(image.matrix[r][d] == expected_columns[d][r]);
  // Corners and the far corner: 1e-3 mm is far below a pixel and above float32 rounding of ~50 mm.
  for (auto [i, j] : {std::pair<int, int>{0, 0}, {image.size[0] - 1, 0}, {0, image.size[1] - 1},
                      {image.size[0] - 1, image.size[1] - 1}}) {
    const auto expected = expected_ras_mm(lateral, j, depth, i);
    const auto got = slicer_ras_mm(image, i, j);
    INFO("pixel (" << i << ", " << j << ")");
    for (int r = 0; r < 3; ++r) CHECK(got[r] == Approx(expected[r]).margin(1e-3));
  }
}

std::optional<int> client_conflated(const std::string& report, int local_port) {
  const std::regex line("client #[0-9]+ 127\\.0\\.0\\.1:" + std::to_string(local_port) +
                        ": offered ([0-9]+), sent ([0-9]+), conflated ([0-9]+)");
  std::smatch match;
  if (!std::regex_search(report, match, line)) return std::nullopt;
  return std::stoi(match[3]);
}

}  // namespace

TEST_CASE("sonopipe-igtl serves ARFI peak displacement and strain images that match the daemon's results, to a "
          "healthy client beside a never-reading and a vanishing one, and to a late one",
          "[tools][igtl][daemon]") {
  test::DaemonHarness daemon(daemon_settings());
  daemon.start();
  const std::uint64_t seed = test::fresh_seed();

  test::TempPath ready("igtl-ready", ".txt"), bridge_log("igtl-bridge", ".log"), recording("igtl-strain", ".h5");
  // A small send buffer makes the never-reading client block within a few kilobytes.
  tools::ChildProcess bridge({test::tool("igtl"), "--results", daemon.endpoint("publish"), "--port", "0",
                              "--ready-file", ready.path, "--topic", "arfi/displacement_filtered", "--topic",
                              "strain2d/strain", "--name", "arfi/displacement_filtered/peak=arfi-peak",
                              "--window", "strain2d/strain=-0.02:0", "--status-interval", "0.2",
                              "--client-send-buffer", "4096"},
                             bridge_log.path);
  REQUIRE(test::wait_for_file(ready.path, seconds(20)));
  int port = 0;
  std::string word;
  std::ifstream(ready.path) >> word >> port;  // written aside and renamed: complete when it exists
  INFO("seed " << seed << ", bridge on port " << port);
  REQUIRE(port > 0);

  IgtlClient healthy(port);
  RawClient never_reads(port);
  RawClient vanishes(port);
  vanishes.read_then_reset(30);  // the first status STRING is far longer than 30 bytes

  // ARFI: 4 sets pushed losslessly; strain: 3 frames replayed (frame 0 primes the tracker).
  constexpr int kArfiSets = 4;
  ThreadPool pool(2);
  for (int s = 0; s < kArfiSets; ++s) {
    auto set = sim::simulate_arfi(small_arfi_set(seed + s, s % 2 ? -4.0 : 5.0), &pool);
    set.meta.sequence = s;
    set.meta.acquisition_time_ns = (s + 1) * 1000000;
    daemon.send(wire::frame_header_from_meta(set.meta).SerializeAsString(), set.payload.data(),
                set.payload.size() * sizeof(std::int16_t));
  }
  const auto sim = test::run_tool({test::tool("sim"), "strain", "--out", recording.path, "--frames", "3", "--seed",
                                   std::to_string(seed)});
  INFO(sim.output);
  REQUIRE(sim.exit_code == 0);
  const auto replay = test::run_tool({test::tool("replay"), recording.path, "--endpoint", daemon.endpoint("ingest"),
                                      "--lossless", "--max"});
  INFO(replay.output);
  REQUIRE(replay.exit_code == 0);

  // What the daemon published (4 ARFI results; strain: 2 frames x 5 outputs).
  const auto published = daemon.receive_results(kArfiSets + 10, seconds(240));
  REQUIRE(published.size() == kArfiSets + 10);
  std::map<std::string, const test::Received*> last;  // topic -> last result
  for (const auto& r : published) last[r.topic] = &r;
  const test::Received& arfi = *last.at("result/arfi/displacement_filtered");
  const test::Received& strain = *last.at("result/strain2d/strain");
  REQUIRE(arfi.header.input_sequence() == kArfiSets - 1);
  REQUIRE(strain.header.input_sequence() == 2);

  // The healthy client reads until it holds the images of the last results and a status that saw them all.
  std::map<std::string, ImageReceived> newest;  // by device
  std::string devices_text;
  std::map<std::string, std::string> status;
  auto has_last = [&](const std::string& device, std::int64_t time_ns) {
    // The 32-bit fraction of OpenIGTLink's time stamp resolves 0.23 ns: 1 us separates frames 1 ms apart.
    return newest.count(device) && std::llabs(newest[device].time_ns - time_ns) < 1000;
  };
  auto strain_device = [&](const char* variant) {
    return device_of(devices_text, std::string("strain2d/strain/axial ") + variant);
  };
  const auto deadline = steady_clock::now() + seconds(60);
  while (steady_clock::now() < deadline) {
    const bool done = has_last("arfi-peak", arfi.header.acquisition_time_ns()) &&
                      has_last("arfi-peak/u8", arfi.header.acquisition_time_ns()) &&
                      !strain_device("float32").empty() &&
                      has_last(strain_device("float32"), strain.header.acquisition_time_ns()) &&
                      has_last(strain_device("uint8"), strain.header.acquisition_time_ns()) &&
                      status["results_received"] == std::to_string(kArfiSets + 2);
    if (done) break;
    auto message = healthy.receive(steady_clock::now() + milliseconds(500));
    if (!message) continue;
    if (message->image) newest[message->device] = std::move(*message->image);
    if (message->device == "sonopipe-devices") devices_text = message->text;
    if (message->device == "sonopipe-status") status = parse_status(message->text);
  }
  INFO("devices:\n" << devices_text << "status: results_received=" << status["results_received"] << "\n"
                    << tools::read_text_file(bridge_log.path));
  REQUIRE(has_last("arfi-peak", arfi.header.acquisition_time_ns()));
  REQUIRE(has_last(strain_device("float32"), strain.header.acquisition_time_ns()));
  CHECK(status["results_missing"] == "0");  // the bridge's SUB lost nothing while clients stalled

  // ARFI peak displacement map: [location, track, depth] -> max over track, image [location, depth].
  const v1::Axis& location = arfi.header.axes(0);
  const v1::Axis& track = arfi.header.axes(1);
  const v1::Axis& depth = arfi.header.axes(2);
  REQUIRE(location.name() == "location");
  REQUIRE(depth.size() != location.size());  // sizes differ, so a swapped i/j order cannot pass
  const auto displacement = test::floats(arfi.payload);
  std::vector<float> peak(location.size() * depth.size(), std::numeric_limits<float>::quiet_NaN());
  for (std::size_t l = 0; l < location.size(); ++l)
    for (std::size_t z = 0; z < depth.size(); ++z)
      for (std::size_t t = 0; t < track.size(); ++t) {
        const float v = displacement[(l * track.size() + t) * depth.size() + z];
        float& p = peak[l * depth.size() + z];
        if (std::isfinite(v) && (std::isnan(p) || v > p)) p = v;
      }
  const ImageReceived& arfi_float = newest["arfi-peak"];
  check_geometry(arfi_float, location, depth, igtl::ImageMessage::TYPE_FLOAT32);
  std::size_t mismatches = 0;
  for (std::size_t l = 0; l < location.size(); ++l)
    for (std::size_t z = 0; z < depth.size(); ++z) {
      const float expected = peak[l * depth.size() + z], got = arfi_float.floats[l * depth.size() + z];  // i = z fastest
      if (!(got == expected || (std::isnan(got) && std::isnan(expected)))) ++mismatches;  // a maximum is exact
    }
  CHECK(mismatches == 0);
  // The uint8 variant with the automatic window: 0.5th..99.5th percentile (nearest rank) of the finite values.
  std::vector<float> sorted;
  for (float v : peak)
    if (std::isfinite(v)) sorted.push_back(v);
  std::sort(sorted.begin(), sorted.end());
  const double low = sorted[std::lround(0.005 * (sorted.size() - 1))], high = sorted[std::lround(0.995 * (sorted.size() - 1))];
  const ImageReceived& arfi_u8 = newest["arfi-peak/u8"];
  check_geometry(arfi_u8, location, depth, igtl::ImageMessage::TYPE_UINT8);
  REQUIRE(arfi_u8.bytes.size() == peak.size());
  int largest_difference = 0;
  for (std::size_t n = 0; n < peak.size(); ++n)
    largest_difference = std::max(largest_difference, std::abs(int(arfi_u8.bytes[n]) - int(expected_uint8(peak[n], low, high))));
  CHECK(largest_difference <= 1);  // the bridge scales in double as here; 1 allows a tie rounded the other way
  CHECK(*std::max_element(arfi_u8.bytes.begin(), arfi_u8.bytes.end()) == 255);  // the window spans the image

  // Strain: [lateral, axial, component] -> the axial component, image [lateral, axial].
  const v1::Axis& lateral = strain.header.axes(0);
  const v1::Axis& axial = strain.header.axes(1);
  REQUIRE(strain.header.axes(2).name() == "component");
  REQUIRE(lateral.spacing() != axial.spacing());  // a swapped order shows in the spacing and the positions
  const auto strain_values = test::floats(strain.payload);
  const ImageReceived& strain_float = newest[strain_device("float32")];
  const ImageReceived& strain_u8 = newest[strain_device("uint8")];
  check_geometry(strain_float, lateral, axial, igtl::ImageMessage::TYPE_FLOAT32);
  check_geometry(strain_u8, lateral, axial, igtl::ImageMessage::TYPE_UINT8);
  std::size_t strain_mismatches = 0, u8_mismatches = 0;
  for (std::size_t l = 0; l < lateral.size(); ++l)
    for (std::size_t a = 0; a < axial.size(); ++a) {
      const float expected = strain_values[(l * axial.size() + a) * 2];  // component 0 = axial
      if (strain_float.floats[l * axial.size() + a] != expected) ++strain_mismatches;  // copied, so exact
      if (std::abs(int(strain_u8.bytes[l * axial.size() + a]) - int(expected_uint8(expected, -0.02, 0.0))) > 1)
        ++u8_mismatches;  // the fixed window -0.02..0; 1 allows a tie rounded the other way
    }
  CHECK(strain_mismatches == 0);
  CHECK(u8_mismatches == 0);

  // A client that connects now gets the newest image of each device at once.
  IgtlClient late(port);
  std::map<std::string, ImageReceived> late_images;
  const auto late_deadline = steady_clock::now() + seconds(30);
  while (steady_clock::now() < late_deadline && !(late_images.count("arfi-peak") && late_images.count(strain_device("float32"))))
    if (auto message = late.receive(steady_clock::now() + milliseconds(500)); message && message->image)
      late_images[message->device] = std::move(*message->image);
  REQUIRE(late_images.count("arfi-peak"));
  CHECK(std::llabs(late_images["arfi-peak"].time_ns - arfi.header.acquisition_time_ns()) < 1000);
  const auto& late_floats = late_images["arfi-peak"].floats;
  REQUIRE(late_floats.size() == arfi_float.floats.size());
  CHECK(std::memcmp(late_floats.data(), arfi_float.floats.data(), late_floats.size() * sizeof(float)) == 0);  // NaN-safe
  CHECK(std::llabs(late_images[strain_device("float32")].time_ns - strain.header.acquisition_time_ns()) < 1000);

  // The daemon processed every frame and dropped none while the clients stalled or vanished.
  const auto reply = daemon.control("status");
  REQUIRE(reply);
  CHECK(reply->status().frames_processed() == kArfiSets + 3);
  CHECK(reply->status().frames_dropped() == 0);
  CHECK(status["daemon_backend"] == reply->status().backend());  // the STRING status forwards the daemon's
  CHECK(status.count("pipeline_arfi_latency_ms_p50"));

  // The bridge's own account: the never-reading client's messages were conflated, the vanished
  // client ended, the healthy one was served.
  bridge.send_signal(SIGINT);
  REQUIRE(bridge.wait(seconds(20)).value_or(-1) == 0);
  const std::string report = tools::read_text_file(bridge_log.path);
  INFO(report);
  const auto conflated = client_conflated(report, never_reads.local_port);
  REQUIRE(conflated);
  CHECK(*conflated > 0);
  const std::regex vanished_line("127\\.0\\.0\\.1:" + std::to_string(vanishes.local_port) + ": [^\n]*\\(([^)]*)\\)");
  std::smatch vanished;
  REQUIRE(std::regex_search(report, vanished, vanished_line));
  CHECK(vanished[1] != "still connected at the stop");  // the bridge saw it go and ended it
  CHECK(report.find("result/arfi/displacement_filtered: 4 results, 0 missing") != std::string::npos);
  CHECK(report.find("result/strain2d/strain: 2 results, 0 missing") != std::string::npos);
}

TEST_CASE("sonopipe-igtl counts and logs malformed or unshowable results by reason and keeps serving",
          "[tools][igtl]") {
  test::TempPath endpoint("igtl-publisher", ""), ready("igtl-ready", ".txt"), bridge_log("igtl-bridge", ".log");
  zmq::context_t context(1);
  zmq::socket_t publisher(context, zmq::socket_type::pub);
  publisher.set(zmq::sockopt::sndhwm, 0);
  publisher.bind(endpoint.ipc());
  tools::ChildProcess bridge({test::tool("igtl"), "--results", endpoint.ipc(), "--port", "0", "--ready-file", ready.path},
                             bridge_log.path);
  REQUIRE(test::wait_for_file(ready.path, seconds(20)));
  int port = 0;
  std::string word;
  std::ifstream(ready.path) >> word >> port;
  REQUIRE(port > 0);

  auto send = [&](const std::vector<std::string>& parts) {
    for (std::size_t i = 0; i < parts.size(); ++i)
      publisher.send(zmq::buffer(parts[i]), i + 1 < parts.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
  };
  auto header = [](const std::string& output, std::vector<std::uint64_t> sizes,
                   v1::ElementType type = v1::ELEMENT_TYPE_FLOAT32) {
    v1::ResultHeader h;
    h.set_schema_version(wire::kSchemaVersion);
    h.set_pipeline("p");
    h.set_output(output);
    h.set_element_type(type);
    for (std::size_t n = 0; n < sizes.size(); ++n) {
      auto* axis = h.add_axes();
      axis->set_name("axis" + std::to_string(n));
      axis->set_size(sizes[n]);
    }
    return h;
  };
  const std::string sixteen_floats(16 * sizeof(float), '\0');
  send({"result/p/only-a-topic"});                                                        // malformed_message
  send({"result/p/garbage", "not a protobuf \xff\xff\xff", sixteen_floats});              // unparsable_header
  auto old_schema = header("schema", {16});
  old_schema.set_schema_version(7);
  send({"result/p/schema", old_schema.SerializeAsString(), sixteen_floats});              // unknown_schema
  send({"result/p/elsewhere", header("named", {16}).SerializeAsString(), sixteen_floats});  // topic_mismatch
  send({"result/p/four", header("four", {2, 2, 2, 2}).SerializeAsString(), sixteen_floats});  // unshowable_result
  send({"result/p/complex", header("complex", {8}, v1::ELEMENT_TYPE_COMPLEX64).SerializeAsString(), sixteen_floats});
  send({"result/p/short", header("short", {17}).SerializeAsString(), sixteen_floats});    // payload too short
  send({"status", "not a Status \xff\xff"});                                              // malformed_status
  std::vector<float> good_values(16);
  for (int n = 0; n < 16; ++n) good_values[n] = n * 0.5f;
  send({"result/p/good", header("good", {4, 4}).SerializeAsString(),
        std::string(reinterpret_cast<const char*>(good_values.data()), 16 * sizeof(float))});

  IgtlClient client(port);
  std::optional<ImageReceived> good;
  const auto deadline = steady_clock::now() + seconds(30);
  while (!good && steady_clock::now() < deadline)
    if (auto message = client.receive(steady_clock::now() + milliseconds(500)); message && message->device == "p/good")
      good = message->image;
  INFO(tools::read_text_file(bridge_log.path));
  REQUIRE(good);
  CHECK(good->floats == good_values);  // [axis0, axis1] -> i = axis1 fastest: the payload order

  bridge.send_signal(SIGINT);
  REQUIRE(bridge.wait(seconds(20)).value_or(-1) == 0);
  const std::string report = tools::read_text_file(bridge_log.path);
  INFO(report);
  for (const char* line : {"rejected malformed_message: 1", "rejected unparsable_header: 1", "rejected unknown_schema: 1",
                           "rejected topic_mismatch: 1", "rejected unshowable_result: 3", "rejected malformed_status: 1"})
    CHECK(report.find(line) != std::string::npos);
  // Each rejection has its one-line warning naming the topic.
  for (const char* topic : {"result/p/garbage", "result/p/elsewhere", "p/four", "p/complex", "p/short"})
    CHECK(report.find(topic) != std::string::npos);
}

TEST_CASE("sonopipe-igtl sends Doppler velocity and power as float32 images and velocity's uint8 variant over "
          "exactly +-Nyquist with 0 for no estimate",
          "[tools][igtl]") {
  test::TempPath endpoint("igtl-publisher", ""), ready("igtl-ready", ".txt"), bridge_log("igtl-bridge", ".log");
  zmq::context_t context(1);
  zmq::socket_t publisher(context, zmq::socket_type::pub);
  publisher.set(zmq::sockopt::sndhwm, 0);
  publisher.bind(endpoint.ipc());
  tools::ChildProcess bridge({test::tool("igtl"), "--results", endpoint.ipc(), "--port", "0", "--ready-file", ready.path,
                              "--topic", "doppler/", "--status-interval", "0.2"},
                             bridge_log.path);
  REQUIRE(test::wait_for_file(ready.path, seconds(20)));
  int port = 0;
  std::string word;
  std::ifstream(ready.path) >> word >> port;
  REQUIRE(port > 0);
  const std::uint64_t seed = test::fresh_seed();
  INFO("seed " << seed);
  std::mt19937_64 random(seed);

  // The doppler stage's outputs (docs/doppler.md): float32 [lateral, axial], metres, v_N in every header.
  constexpr std::uint64_t kLateral = 6, kAxial = 8;
  const double nyquist = std::uniform_real_distribution<double>(0.1, 1.0)(random);
  v1::Axis lateral, axial;
  lateral.set_name("lateral");
  lateral.set_size(kLateral);
  lateral.set_spacing(2e-4);
  lateral.set_unit("m");
  lateral.set_origin(-5e-4);
  axial.set_name("axial");
  axial.set_size(kAxial);
  axial.set_spacing(1e-4);
  axial.set_unit("m");
  axial.set_origin(0.01);
  auto header = [&](const std::string& output, const std::string& unit) {
    v1::ResultHeader h;
    h.set_schema_version(wire::kSchemaVersion);
    h.set_pipeline("doppler");
    h.set_output(output);
    h.set_element_type(v1::ELEMENT_TYPE_FLOAT32);
    h.set_unit(unit);
    *h.add_axes() = lateral;
    *h.add_axes() = axial;
    (*h.mutable_attributes())["nyquist_velocity_m_per_s"] = std::to_string(nyquist);
    return h;
  };
  // Fresh velocities within [-v_N, v_N), the ends and 0 exactly, one beyond, and NaN (no estimate).
  std::vector<float> velocity(kLateral * kAxial), power(kLateral * kAxial);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (std::size_t n = 0; n < velocity.size(); ++n) {
    velocity[n] = static_cast<float>(nyquist) * uniform(random);
    power[n] = std::exp(8.0f * (uniform(random) + 1.0f));
  }
  const float v_n = static_cast<float>(std::stod(header("velocity", "m/s").attributes().at("nyquist_velocity_m_per_s")));
  velocity[0] = -v_n;
  velocity[1] = 0.0f;
  velocity[2] = v_n;
  velocity[3] = 2 * v_n;  // outside the window: clamped to its end
  velocity[4] = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> power_db(power.size());
  for (std::size_t n = 0; n < power.size(); ++n) power_db[n] = 10.0f * std::log10(power[n]);
  auto bytes = [](const std::vector<float>& values) {
    return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
  };

  IgtlClient client(port);
  std::map<std::string, ImageReceived> images;
  std::string devices_text;
  const auto deadline = steady_clock::now() + seconds(30);
  auto complete = [&] {
    for (const char* description : {"doppler/velocity float32", "doppler/velocity uint8", "doppler/power float32",
                                    "doppler/power_db float32", "doppler/power_db uint8"})
      if (!images.count(device_of(devices_text, description))) return false;
    return true;
  };
  while (!complete() && steady_clock::now() < deadline) {
    for (const auto& [output, unit, values] :
         {std::tuple{"velocity", "m/s", &velocity}, {"power", "", &power}, {"power_db", "dB", &power_db}}) {
      const std::string parts[] = {std::string("result/doppler/") + output, header(output, unit).SerializeAsString(),
                                   bytes(*values)};
      for (std::size_t i = 0; i < 3; ++i)
        publisher.send(zmq::buffer(parts[i]), i + 1 < 3 ? zmq::send_flags::sndmore : zmq::send_flags::none);
    }
    const auto until = steady_clock::now() + milliseconds(300);
    while (auto message = client.receive(until)) {
      if (message->device == "sonopipe-devices") devices_text = message->text;
      if (message->image) images[message->device] = *message->image;
    }
  }
  INFO("devices:\n" << devices_text << tools::read_text_file(bridge_log.path));
  REQUIRE(complete());
  CHECK(devices_text.find("doppler/velocity uint8 (window +-Nyquist)") != std::string::npos);
  CHECK(devices_text.find("doppler/power_db uint8 (window auto)") != std::string::npos);  // not a velocity

  // float32: the published values unchanged (NaN kept), [lateral, axial] -> i = axial fastest.
  const ImageReceived& velocity_float = images.at(device_of(devices_text, "doppler/velocity float32"));
  check_geometry(velocity_float, lateral, axial, igtl::ImageMessage::TYPE_FLOAT32);
  REQUIRE(velocity_float.floats.size() == velocity.size());
  for (std::size_t n = 0; n < velocity.size(); ++n)
    CHECK((velocity_float.floats[n] == velocity[n] || (std::isnan(velocity[n]) && std::isnan(velocity_float.floats[n]))));
  CHECK(images.at(device_of(devices_text, "doppler/power float32")).floats == power);
  CHECK(images.at(device_of(devices_text, "doppler/power_db float32")).floats == power_db);

  // uint8 velocity, written out again from display_window.h: 0 = no estimate, -v_N -> 1, 0 -> 128, +v_N -> 255.
  const ImageReceived& velocity_u8 = images.at(device_of(devices_text, "doppler/velocity uint8"));
  check_geometry(velocity_u8, lateral, axial, igtl::ImageMessage::TYPE_UINT8);
  REQUIRE(velocity_u8.bytes.size() == velocity.size());
  CHECK(int(velocity_u8.bytes[0]) == 1);
  CHECK(int(velocity_u8.bytes[1]) == 128);
  CHECK(int(velocity_u8.bytes[2]) == 255);
  CHECK(int(velocity_u8.bytes[3]) == 255);
  CHECK(int(velocity_u8.bytes[4]) == 0);
  for (std::size_t n = 5; n < velocity.size(); ++n) {
    const double scaled = (velocity[n] + nyquist) / (2 * nyquist);
    // v_N travels as decimal text (std::to_string, 6 decimals): 1e-6 m/s moves a code by far less than 0.5
    CHECK(std::abs(int(velocity_u8.bytes[n]) - (1 + std::lround(254 * scaled))) <= 1);
    CHECK(velocity_u8.bytes[n] >= 1);
  }
  bridge.send_signal(SIGINT);
  REQUIRE(bridge.wait(seconds(20)).value_or(-1) == 0);
}

TEST_CASE("sonopipe-igtl reads results in place from the daemon's publish.shm pool and serves them byte-exact, "
          "with the daemon's status from its ZeroMQ publish endpoint",
          "[tools][igtl][daemon][shm]") {
  const std::string pool = "shm://igtl-test-" + std::to_string(::getpid());
  test::DaemonHarness daemon(R"(
backend: cpu
cpu_threads: 2
max_frame_bytes: 1048576
pipelines:
  - name: rf
    match: {kinds: [rf]}
    stages:
      - {type: convert, params: {scale: 0.37}}
)",
                             "", "shm: {endpoint: \"" + pool + "\", mode: live, slots: 4}");
  daemon.start();
  test::TempPath ready("igtl-shm-ready", ".txt"), bridge_log("igtl-shm-bridge", ".log");
  tools::ChildProcess bridge({test::tool("igtl"), "--results", pool, "--status-endpoint", daemon.endpoint("publish"),
                              "--port", "0", "--ready-file", ready.path, "--topic", "rf/", "--status-interval", "0.2",
                              "--variants", "float32"},
                             bridge_log.path);
  REQUIRE(test::wait_for_file(ready.path, seconds(20)));
  int port = 0;
  std::string word;
  std::ifstream(ready.path) >> word >> port;
  REQUIRE(port > 0);
  IgtlClient client(port);

  const std::uint64_t seed = test::fresh_seed();
  INFO("seed " << seed);
  std::mt19937_64 random(seed);
  constexpr std::uint64_t kLateral = 6, kAxial = 8;
  std::vector<float> samples(kLateral * kAxial);
  std::normal_distribution<float> normal(0.0f, 100.0f);
  for (float& value : samples) value = normal(random);
  v1::FrameHeader header;
  header.set_schema_version(wire::kSchemaVersion);
  header.set_kind(v1::FRAME_KIND_RF);
  header.set_element_type(v1::ELEMENT_TYPE_FLOAT32);
  for (const auto& [name, size, spacing] : {std::tuple{"lateral", kLateral, 2e-4}, {"axial", kAxial, 1e-4}}) {
    v1::Axis* axis = header.add_axes();
    axis->set_name(name);
    axis->set_size(size);
    axis->set_spacing(spacing);
    axis->set_unit("m");
  }
  // convert: out = float32(0.37) x in, in float32 (stages/common/convert): the reference, exactly.
  std::vector<float> expected(samples.size());
  for (std::size_t n = 0; n < samples.size(); ++n) expected[n] = 0.37f * samples[n];

  std::optional<ImageReceived> image;
  std::map<std::string, std::string> status;
  const auto deadline = steady_clock::now() + seconds(30);
  for (std::uint64_t sequence = 0; (!image || status.count("daemon_frames_received") == 0) && steady_clock::now() < deadline;
       ++sequence) {
    header.set_sequence(sequence);  // a live pool shows what comes after the bridge attached: send until one arrives
    daemon.send(header.SerializeAsString(), samples.data(), samples.size() * sizeof(float));
    const auto until = steady_clock::now() + milliseconds(300);
    while (auto message = client.receive(until)) {
      if (message->image) image = message->image;
      if (message->type == "STRING" && message->device == "sonopipe-status") status = parse_status(message->text);
    }
  }
  std::stringstream log;
  log << std::ifstream(bridge_log.path).rdbuf();
  INFO("bridge log:\n" << log.str());
  REQUIRE(image);
  REQUIRE(image->scalar_type == igtl::ImageMessage::TYPE_FLOAT32);
  REQUIRE(image->floats.size() == expected.size());
  CHECK(std::memcmp(image->floats.data(), expected.data(), expected.size() * sizeof(float)) == 0);  // byte-exact
  CHECK(status.count("daemon_frames_received") == 1);  // the heartbeat came over ZeroMQ beside the pool
}
