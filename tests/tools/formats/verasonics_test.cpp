// The Verasonics .mat reader against files written by an independent writer: scipy.io.savemat
// (MAT v5, plain and compressed) and h5py in MATLAB's v7.3 layout, both driven by
// verasonics_files.py (its docstring gives the sample formulas that this test repeats). Checked:
// every sample bit for bit (startSample:endSample cut, Connector channel order, circular buffer
// order from lastFrame), every mapped header field against values derived here from the
// scenario's definition (wavelengths -> metres, fs = decimSampleRate / quadDecim, the clock of
// channel_conventions.h), frame times as the saved Event/SeqControl sequence programs them (else
// 1 ms apart, said to be assumed), and one-line errors for bad, truncated and damaged files.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <complex>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "stages/beamform/channel_conventions.h"
#include "tests/support/test_support.h"
#include "tools/formats/acquisition_reader.h"
#include "tools/formats/isolated_reader.h"
#include "tools/formats/verasonics_reader.h"
#include "tools/import/importer.h"
#include "tools/replay/frame_source.h"
#include "tools/replay/replay_schedule.h"

using namespace sonopipe;
using namespace sonopipe::formats;

namespace {

// Scenario constants of verasonics_files.py.
constexpr double kSpeed = 1540.0;
constexpr double kFrequencyMhz = 5.208;
constexpr double kWavelength = kSpeed / (kFrequencyMhz * 1e6);
constexpr int kElements = 8;
constexpr double kPitchMm = 0.3;
constexpr double kTwPeakWavelengths = 1.5;

// Times here are ~1e-6 s computed in double along different routes (closed forms here, sums over
// elements in the reader): they agree to ~1e-21 s; 1e-15 s is far below any sample period
// (1e-7 s) yet catches every convention error (sign, units, missing term: >= 1e-9 s).
constexpr double kTimeMargin = 1e-15;
// Positions (~1e-3 m) likewise: 1e-15 m.
constexpr double kLengthMargin = 1e-15;

std::filesystem::path temporary_folder() {
  const auto folder = std::filesystem::temp_directory_path() / ("sonopipe-verasonics-" + std::to_string(::getpid()));
  std::filesystem::create_directories(folder);
  return folder;
}

// One `verasonics_files.py --serve` for the whole program: Python and its numpy, scipy and h5py
// start once rather than once per file (about 0.4 s of CPU each, ~50 files). A request is one
// line "scenario format path seed", the answer one line, "ok" or "error: <reason>".
class FileWriter {
 public:
  FileWriter() {
    int requests[2], answers[2];
    if (::pipe2(requests, O_CLOEXEC) != 0 || ::pipe2(answers, O_CLOEXEC) != 0) return;
    const std::string launcher = test::binary_path("tools/python/sonopipe-python");
    const std::string script = test::source_path("tests/tools/formats/verasonics_files.py");
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(requests[0], STDIN_FILENO);
      ::dup2(answers[1], STDOUT_FILENO);
      ::execl(launcher.c_str(), launcher.c_str(), script.c_str(), "--serve", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(requests[0]);
    ::close(answers[1]);
    to_ = ::fdopen(requests[1], "w");
    from_ = ::fdopen(answers[0], "r");
  }
  ~FileWriter() {
    if (to_ != nullptr) std::fclose(to_);  // end of input: the script returns
    if (from_ != nullptr) std::fclose(from_);
    if (pid_ <= 0) return;
    // A forked reader child that still held the request pipe would keep the script waiting.
    for (int i = 0; i < 50; ++i) {
      if (::waitpid(pid_, nullptr, WNOHANG) != 0) return;  // reaped (or not ours to reap)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  FileWriter(const FileWriter&) = delete;
  FileWriter& operator=(const FileWriter&) = delete;

  // The answer line, or a reason when the writer process is gone.
  std::string request(const std::string& line) {
    if (to_ == nullptr || from_ == nullptr || pid_ < 0) return "error: verasonics_files.py --serve did not start";
    if (std::fprintf(to_, "%s\n", line.c_str()) < 0 || std::fflush(to_) != 0)
      return "error: verasonics_files.py --serve stopped reading";
    char answer[4096];
    if (std::fgets(answer, sizeof answer, from_) == nullptr) return "error: verasonics_files.py --serve ended";
    std::string text = answer;
    if (!text.empty() && text.back() == '\n') text.pop_back();
    return text;
  }

 private:
  pid_t pid_ = -1;
  std::FILE* to_ = nullptr;
  std::FILE* from_ = nullptr;
};

std::string write_file(const std::string& scenario, const std::string& format, std::uint64_t seed) {
  static FileWriter writer;
  std::string name = scenario + "_" + format + ".mat";
  std::replace(name.begin(), name.end(), ':', '_');
  const std::string path = (temporary_folder() / name).string();
  const std::string line = scenario + " " + format + " " + path + " " + std::to_string(seed);
  INFO("verasonics_files.py " << line);
  REQUIRE(writer.request(line) == "ok");
  return path;
}

std::int16_t rcv_value(long row, long channel, long frame, long buffer, std::uint64_t seed) {
  const long long value = (row * 7 + channel * 131 + frame * 1009 + buffer * 17 + static_cast<long long>(seed)) % 65536;
  return static_cast<std::int16_t>(value - 32768);
}

std::vector<double> element_x_m() {
  std::vector<double> x;
  for (int e = 0; e < kElements; ++e) x.push_back((e - (kElements - 1) / 2.0) * kPitchMm * 1e-3);
  return x;
}

const std::vector<double>& vector_of(const FrameMeta& meta, std::string_view name) {
  const std::vector<double>* values = meta.vector(std::string(name));
  INFO(name);
  REQUIRE(values != nullptr);
  return *values;
}

// The samples of one frame: transmit k's rows start at first_rows[k] (1-based), element e sits on
// channel channel_of(e) (1-based), buffer frame `frame` (1-based).
template <typename ChannelOf>
std::vector<std::int16_t> expected_channel_frame(const std::vector<long>& first_rows, int samples, ChannelOf channel_of,
                                                 long frame, std::uint64_t seed) {
  std::vector<std::int16_t> values;
  for (long first_row : first_rows)
    for (int e = 0; e < kElements; ++e)
      for (int s = 0; s < samples; ++s) values.push_back(rcv_value(first_row + s, channel_of(e), frame, 1, seed));
  return values;
}

std::vector<std::int16_t> as_int16(const std::vector<std::byte>& payload) {
  std::vector<std::int16_t> values(payload.size() / sizeof(std::int16_t));
  std::memcpy(values.data(), payload.data(), values.size() * sizeof(std::int16_t));
  return values;
}

}  // namespace

TEST_CASE("plane-wave RcvData reads bit for bit: rows cut by Receive, Connector order, oldest frame first",
          "[formats][verasonics]") {
  const std::string format = GENERATE("v5", "v5z", "v73");
  const std::uint64_t seed = test::fresh_seed();
  const std::string path = write_file("plane", format, seed);
  INFO(path);

  REQUIRE(is_verasonics_mat(path));
  REQUIRE(detect_format(path) == FileFormat::verasonics_mat);
  auto reader = open_acquisition(path, ImportOptions{.stream_id = 7});
  CHECK(reader->description() ==
        "verasonics .mat " + std::string(format == "v73" ? "v7.3" : "v5") + " (RcvData{1}, channel_rf)");

  // 4 buffer frames, lastFrame = 2: the oldest is buffer frame 3, then 4, 1, 2.
  REQUIRE(reader->frame_count() == 4);
  const long buffer_frames[] = {3, 4, 1, 2};
  // Acquisition k writes rows (k-1)*64+1 .. (k-1)*64+50 of a 232-row frame; the mode-1 receive
  // accumulates onto acquisition 2 and adds no transmit. Element e (0-based) is on channel 8-e.
  const std::vector<long> first_rows = {1, 65, 129};
  for (std::size_t f = 0; f < 4; ++f) {
    const recording::Frame frame = reader->read_frame(f);
    INFO("frame " << f);
    CHECK(as_int16(frame.payload) ==
          expected_channel_frame(first_rows, 50, [](int e) { return kElements - e; }, buffer_frames[f], seed));
    CHECK(frame.meta.sequence == f);
    CHECK(frame.meta.stream_id == 7);
  }

  const FrameMeta meta = reader->read_frame(0).meta;
  CHECK(meta.kind == FrameKind::channel_rf);
  REQUIRE(meta.payload.dtype == DType::int16);
  REQUIRE(meta.payload.axes.size() == 3);
  const double fs = 4 * kFrequencyMhz / 2 * 1e6;  // decimSampleRate 4 f0 MHz, quadDecim 2
  CHECK(meta.sampling_frequency_hz == Approx(fs).epsilon(1e-15));
  CHECK(meta.center_frequency_hz == Approx(kFrequencyMhz * 1e6).epsilon(1e-15));
  CHECK(meta.demodulation_frequency_hz == 0.0);
  CHECK(meta.speed_of_sound_m_per_s == kSpeed);
  const Axis& transmit = meta.payload.axes[0];
  const Axis& element = meta.payload.axes[1];
  const Axis& sample = meta.payload.axes[2];
  CHECK(transmit.name == "transmit");
  CHECK(transmit.size == 3);
  CHECK(element.name == "element");
  CHECK(element.size == kElements);
  CHECK(element.unit == "m");
  CHECK(element.spacing == Approx(kPitchMm * 1e-3).margin(kLengthMargin));
  CHECK(sample.name == "sample");
  CHECK(sample.size == 50);
  CHECK(sample.unit == "s");
  CHECK(sample.spacing == Approx(1 / fs).margin(kTimeMargin));
  // startDepth 2 wavelengths: the first sample is the round trip to it.
  CHECK(sample.origin == Approx(2 * 2 * kWavelength / kSpeed).margin(kTimeMargin));

  // Trans.units 'mm': positions in millimetres.
  const std::vector<double> x = element_x_m();
  const auto& read_x = vector_of(meta, channel::element_x_m);
  REQUIRE(read_x.size() == kElements);
  for (int e = 0; e < kElements; ++e) CHECK(read_x[e] == Approx(x[e]).margin(kLengthMargin));
  CHECK(vector_of(meta, channel::element_z_m) == std::vector<double>(kElements, 0.0));

  // Plane waves steered -0.1, 0, 0.15 rad; Verasonics and we both call +x-going positive.
  const std::vector<double> angles = {-0.1, 0.0, 0.15};
  CHECK(vector_of(meta, channel::transmit_wavefront) == std::vector<double>(3, channel::wavefront_plane));
  CHECK(vector_of(meta, channel::transmit_angle_rad) == angles);
  // Time zero: the earliest firing element fires at 0 (computeTXDelays) as the plane front passes
  // it; the front passes the origin max_e(-x_e sin a) / c later over the firing elements (for the
  // full aperture (D/2)|sin a| / c, USTB's t0 in its Verasonics reader); then the waveform peak
  // (TW.peak wavelengths) and one pass through the lens (0.8 mm, Trans.units). Wave 3 fires
  // elements 1..5 only: there a wrong angle sign moves the reader's estimate by ~1e-8 s.
  const double lens_s = 0.8e-3 / kSpeed;
  const int fired[] = {kElements, kElements, 5};
  const auto& delays = vector_of(meta, channel::transmit_delay_s);
  REQUIRE(delays.size() == 3);
  for (int k = 0; k < 3; ++k) {
    double crossing = -1e9;
    for (int e = 0; e < fired[k]; ++e) crossing = std::max(crossing, -x[e] * std::sin(angles[k]) / kSpeed);
    CHECK(delays[k] == Approx(-(crossing + kTwPeakWavelengths * kWavelength / kSpeed + lens_s)).margin(kTimeMargin));
  }
  CHECK(vector_of(meta, channel::element_delay_s) == std::vector<double>(kElements, lens_s));

  const auto attributes = reader->source_attributes();
  CHECK(attributes.at("source_format") == "verasonics");
  CHECK(attributes.at("mat_version") == (format == "v73" ? "v7.3" : "v5"));
  CHECK(attributes.at("accumulated_receives_per_frame") == "1");
  CHECK(attributes.at("trans_units") == "mm");
  CHECK(attributes.at("sample_mode") == "NS200BW");
}

TEST_CASE("focused and diverging transmits: focus in wavelengths becomes source points in metres",
          "[formats][verasonics]") {
  const std::string format = GENERATE("v5", "v73");
  const std::uint64_t seed = test::fresh_seed();
  const std::string path = write_file("focused", format, seed);
  INFO(path);
  auto reader = open_acquisition(path, ImportOptions{});

  // lastFrame = numFrames = 3: the buffer is already in order. 12 channels, 8 elements on the
  // first 8; acquisition k writes rows (k-1)*80+1 .. k*80; no Event: acquisition k used TX(k).
  REQUIRE(reader->frame_count() == 3);
  for (std::size_t f = 0; f < 3; ++f)
    CHECK(as_int16(reader->read_frame(f).payload) ==
          expected_channel_frame({1, 81, 161, 241}, 80, [](int e) { return e + 1; }, static_cast<long>(f + 1), seed));

  const FrameMeta meta = reader->read_frame(0).meta;
  CHECK(meta.sampling_frequency_hz == Approx(4 * kFrequencyMhz * 1e6).epsilon(1e-15));  // quadDecim 1
  CHECK(meta.payload.axes[2].origin == 0.0);                                           // startDepth 0

  // Trans.units 'wavelengths': ElementPos was written as x / lambda.
  const std::vector<double> x = element_x_m();
  const auto& read_x = vector_of(meta, channel::element_x_m);
  for (int e = 0; e < kElements; ++e) CHECK(read_x[e] == Approx(x[e]).margin(kLengthMargin));

  // TX: focused at Origin x = -0.6, 0, 0.6 wavelengths, focus 40; then diverging, focus -20, steer 0.1.
  const auto& wavefront = vector_of(meta, channel::transmit_wavefront);
  const auto& source_x = vector_of(meta, channel::transmit_source_x_m);
  const auto& source_z = vector_of(meta, channel::transmit_source_z_m);
  const auto& delays = vector_of(meta, channel::transmit_delay_s);
  REQUIRE(source_x.size() == 4);
  const double origins[] = {-0.6, 0.0, 0.6};
  for (int k = 0; k < 3; ++k) {
    CHECK(wavefront[k] == channel::wavefront_spherical);
    CHECK(source_x[k] == Approx(origins[k] * kWavelength).margin(kLengthMargin));
    CHECK(source_z[k] == Approx(40 * kWavelength).margin(kLengthMargin));
  }
  CHECK(source_x[3] == Approx(-20 * std::sin(0.1) * kWavelength).margin(kLengthMargin));
  CHECK(source_z[3] == Approx(-20 * std::cos(0.1) * kWavelength).margin(kLengthMargin));

  // Time zero. Focused line 2 (focus F on the axis): the farthest element (an edge) fires first,
  // at 0, and the wave reaches F at r_max / c, the origin |F| / c earlier. Diverging wave 4 from V:
  // the nearest element fires first, at 0 = T_V + r_min / c; the front passes the origin at
  // T_V + |V| / c. Then the waveform peak and one lens pass (0.5 wavelengths).
  const double extra = (kTwPeakWavelengths + 0.5) * kWavelength / kSpeed;
  const double focus_z = 40 * kWavelength;
  const double r_max = std::hypot(x.back(), focus_z);
  CHECK(delays[1] == Approx(-((r_max - focus_z) / kSpeed + extra)).margin(kTimeMargin));
  const double vx = source_x[3], vz = source_z[3];
  double r_min = 1e9;
  for (double xe : x) r_min = std::min(r_min, std::hypot(xe - vx, vz));
  CHECK(delays[3] == Approx(-((20 * kWavelength - r_min) / kSpeed + extra)).margin(kTimeMargin));
  CHECK(reader->source_attributes().at("frame_order") == "circular, oldest first (lastFrame 3)");
}

TEST_CASE("IQData and ImgData read as iq and rf frames on PData's grid", "[formats][verasonics]") {
  const std::string format = GENERATE("v5", "v73");
  const std::string path = write_file("plane", format, 1);
  INFO(path);
  // IQData{1}(z, x, 1, frame) = (z + 10 x + 100 frame) - i (z + x); ImgData{1} = z x + frame.
  auto iq = open_acquisition(path, ImportOptions{.object = "IQData"});
  REQUIRE(iq->frame_count() == 2);
  for (std::size_t f = 0; f < 2; ++f) {
    const recording::Frame frame = iq->read_frame(f);
    CHECK(frame.meta.kind == FrameKind::iq);
    REQUIRE(frame.meta.payload.dtype == DType::complex64);
    REQUIRE(frame.meta.payload.shape_string() == "complex64[location=5, sample=6]");
    std::vector<std::complex<float>> values(30);
    REQUIRE(frame.payload.size() == values.size() * sizeof(values[0]));
    std::memcpy(values.data(), frame.payload.data(), frame.payload.size());
    for (int x = 1; x <= 5; ++x)
      for (int z = 1; z <= 6; ++z) {
        const std::complex<float> expected(static_cast<float>(z + 10 * x + 100 * (f + 1)), -static_cast<float>(z + x));
        CHECK(values[(x - 1) * 6 + (z - 1)] == expected);  // small integers: exact in float
      }
  }
  const FrameMeta meta = iq->read_frame(0).meta;
  // PData: PDelta [0.5 0 0.25], Origin [-1 0 3] wavelengths.
  CHECK(meta.payload.axes[0].spacing == Approx(0.5 * kWavelength).margin(kLengthMargin));
  CHECK(meta.payload.axes[0].origin == Approx(-1 * kWavelength).margin(kLengthMargin));
  CHECK(meta.payload.axes[1].spacing == Approx(0.25 * kWavelength).margin(kLengthMargin));
  CHECK(meta.payload.axes[1].origin == Approx(3 * kWavelength).margin(kLengthMargin));
  CHECK(meta.payload.axes[1].unit == "m");
  CHECK(meta.demodulation_frequency_hz == Approx(kFrequencyMhz * 1e6).epsilon(1e-15));
  CHECK(meta.sampling_frequency_hz == Approx(kSpeed / (2 * 0.25 * kWavelength)).epsilon(1e-12));

  auto image = open_acquisition(path, ImportOptions{.object = "ImgData{1}"});
  REQUIRE(image->frame_count() == 2);
  const recording::Frame frame = image->read_frame(1);
  CHECK(frame.meta.kind == FrameKind::rf);
  REQUIRE(frame.meta.payload.shape_string() == "float64[location=5, sample=6]");
  std::vector<double> values(30);
  std::memcpy(values.data(), frame.payload.data(), frame.payload.size());
  for (int x = 1; x <= 5; ++x)
    for (int z = 1; z <= 6; ++z) CHECK(values[(x - 1) * 6 + (z - 1)] == z * x + 2);
}

TEST_CASE("an ensemble option groups consecutive frames under a leading time axis", "[formats][verasonics]") {
  const std::uint64_t seed = test::fresh_seed();
  const std::string path = write_file("plane", "v5", seed);
  auto single = open_acquisition(path, ImportOptions{});
  auto grouped = open_acquisition(path, ImportOptions{.ensemble = 3});
  REQUIRE(grouped->frame_count() == 1);  // 4 frames: one ensemble of 3, one frame left out
  const recording::Frame frame = grouped->read_frame(0);
  CHECK(frame.meta.payload.shape_string() == "int16[time=3, transmit=3, element=8, sample=50]");
  std::vector<std::byte> expected;
  for (std::size_t f = 0; f < 3; ++f) {
    const auto payload = single->read_frame(f).payload;
    expected.insert(expected.end(), payload.begin(), payload.end());
  }
  CHECK(frame.payload == expected);
  CHECK(grouped->source_attributes().at("frames_left_out") == "1");
}

// The "timed" scenario of verasonics_files.py: 11 plane waves per frame, timeToNextAcq 200 us
// between them and 10 ms after the 11th (frame level), 4 buffer frames, lastFrame 2.
constexpr int kTimedWaves = 11;
constexpr std::int64_t kWaveIntervalNs = 200'000;
constexpr std::int64_t kFrameIntervalNs = 10'000'000;
constexpr std::int64_t kTimedPeriodNs = (kTimedWaves - 1) * kWaveIntervalNs + kFrameIntervalNs;  // 12 ms
constexpr std::int64_t kAssumedPeriodNs = 1'000'000;

std::vector<std::int64_t> acquisition_times(AcquisitionReader& reader) {
  std::vector<std::int64_t> times;
  for (std::size_t k = 0; k < reader.frame_count(); ++k) {
    const std::int64_t time = reader.read_frame(k).meta.acquisition_time_ns;
    CHECK(reader.frame_info(k).acquisition_time_ns == time);  // replay's schedule reads frame_info
    times.push_back(time);
  }
  return times;
}

TEST_CASE("frame times are what Event/SeqControl program: timeToNextAcq intervals summed, jump followed",
          "[formats][verasonics]") {
  const std::string format = GENERATE("v5", "v73");
  const std::uint64_t seed = test::fresh_seed();
  const std::string path = write_file("timed", format, seed);
  INFO(path);
  auto reader = open_acquisition(path, ImportOptions{});
  REQUIRE(reader->frame_count() == 4);
  // Buffer frames in replay order 3, 4, 1, 2 (lastFrame 2), each one programmed period after the
  // last, across the wrap too: the jump goes back to event 2, past the preamble's 100 ms noop (a
  // walk from event 1 would put 100 ms between frames 4 and 1).
  CHECK(acquisition_times(*reader) ==
        std::vector<std::int64_t>{0, kTimedPeriodNs, 2 * kTimedPeriodNs, 3 * kTimedPeriodNs});
  std::vector<long> first_rows;
  for (int k = 0; k < kTimedWaves; ++k) first_rows.push_back(1 + 64 * k);
  CHECK(as_int16(reader->read_frame(0).payload) ==
        expected_channel_frame(first_rows, 50, [](int e) { return e + 1; }, 3, seed));
  const std::string period = reader->source_attributes().at("frame_period");
  INFO(period);
  CHECK(period.rfind("12 ms, programmed by Event/SeqControl", 0) == 0);
  CHECK(period.find("sync") == std::string::npos);

}

TEST_CASE("an ensemble takes the programmed time of its first frame", "[formats][verasonics]") {
  auto grouped = open_acquisition(write_file("timed", "v5", 2), ImportOptions{.ensemble = 2});
  CHECK(acquisition_times(*grouped) == std::vector<std::int64_t>{0, 2 * kTimedPeriodNs});
}

TEST_CASE("sonopipe-replay schedules a Verasonics save at its programmed times, scaled by --speed",
          "[formats][verasonics]") {
  const std::string path = write_file("timed", "v5", 3);
  replay::FrameSource source(path, {}, 0);
  REQUIRE(source.times_ns() == std::vector<std::int64_t>{0, kTimedPeriodNs, 2 * kTimedPeriodNs, 3 * kTimedPeriodNs});
  const replay::Schedule schedule(source.times_ns(), {.mode = replay::TimingMode::original, .speed = 2.0});
  for (std::size_t k = 0; k < 4; ++k) CHECK(schedule.due_ns(0, k) == static_cast<std::int64_t>(k) * kTimedPeriodNs / 2);
}

TEST_CASE("sonopipe-import keeps the programmed frame times and the source's attributes", "[formats][verasonics]") {
  const std::string source = write_file("timed", "v5", test::fresh_seed());
  const std::string output = (temporary_folder() / "imported.h5").string();
  std::filesystem::remove(output);
  const import::ImportReport report = import::import_acquisition(source, output, ImportOptions{});
  CHECK(report.frames == 4);
  recording::Reader imported(output);
  CHECK(imported.attribute("source_format") == "verasonics");
  CHECK(imported.attribute("frame_period").rfind("12 ms, programmed", 0) == 0);
  auto reader = open_acquisition(source, ImportOptions{});
  REQUIRE(imported.frame_count(0) == 4);
  for (std::size_t k = 0; k < 4; ++k) {
    const recording::Frame frame = imported.read_frame(0, k);
    CHECK(frame.meta.acquisition_time_ns == static_cast<std::int64_t>(k) * kTimedPeriodNs);
    CHECK(frame.payload == reader->read_frame(k).payload);
  }
}

TEST_CASE("a noop longer than the running timer holds the next acquisition; a sync is reported",
          "[formats][verasonics]") {
  auto reader = open_acquisition(write_file("timed:noop", "v5", 2), ImportOptions{});
  // Every timeToNextAcq is 200 us; after the 11th wave a 10 ms noop holds the sequencer while the
  // 200 us timer has long run out: the next frame starts 10 x 200 us + 10 ms after the last.
  CHECK(acquisition_times(*reader) ==
        std::vector<std::int64_t>{0, kTimedPeriodNs, 2 * kTimedPeriodNs, 3 * kTimedPeriodNs});
  const std::string period = reader->source_attributes().at("frame_period");
  INFO(period);
  CHECK(period.rfind("12 ms, programmed", 0) == 0);
  CHECK(period.find("waits for the host (sync)") != std::string::npos);
}

TEST_CASE("frames the sequence spaces unevenly keep their programmed times", "[formats][verasonics]") {
  const std::string path = write_file("timed:varying", "v5", 2);
  auto reader = open_acquisition(path, ImportOptions{});
  // Frame 1 -> 2 takes a 20 ms frame-level timeToNextAcq, the others 10 ms. Replay order 3, 4, 1, 2.
  const std::int64_t slow = (kTimedWaves - 1) * kWaveIntervalNs + 20'000'000;
  CHECK(acquisition_times(*reader) ==
        std::vector<std::int64_t>{0, kTimedPeriodNs, 2 * kTimedPeriodNs, 2 * kTimedPeriodNs + slow});
  CHECK(reader->source_attributes().at("frame_period").rfind("from 12 to 22 ms, programmed", 0) == 0);
}

TEST_CASE("when the sequence cannot give frame times, frames are 1 ms apart and frame_period says why",
          "[formats][verasonics]") {
  struct Case {
    const char* scenario;
    const char* reason;  // part of the attribute's explanation
    bool both_formats;   // v7.3 too where its storage differs ([] as class "empty", char as uint16)
  };
  const Case c = GENERATE(
      Case{"timed:no_ttna", "Event(12) acquires without timeToNextAcq", false},
      Case{"timed:trigger_in", "SeqControl(8) (triggerIn) on Event(2) waits for a signal outside the sequence", false},
      Case{"timed:no_seqcontrol", "SeqControl: not saved", false},
      Case{"plane", "SeqControl: not saved", false},
      Case{"focused", "Event: not saved", false},
      // Hostile SeqControl / Event values.
      Case{"timed:negative", "SeqControl(2).argument (timeToNextAcq): -200 is not a time in microseconds", false},
      Case{"timed:huge", "SeqControl(2).argument (timeToNextAcq): 1e+300 is not a time in microseconds", false},
      Case{"timed:missing", "SeqControl(2).argument (timeToNextAcq): missing", true},
      Case{"timed:text", "(SeqControl(2).argument: expected numbers, found char)", true},
      Case{"timed:control_range", "Event(14).seqControl: refers to SeqControl(99), SeqControl has 7 elements", false},
      // 50 events: the preamble, 4 frames of 11 acquisitions and a return to MATLAB, the jump.
      Case{"timed:jump_range", "SeqControl(1).argument (jump): 1000, expected an Event number 1..50", false},
      Case{"timed:rcv_range", "Event(1).rcv: refers to Receive(9999), Receive has 44 elements", false});
  const std::string format = GENERATE("v5", "v73");
  if (format == "v73" && !c.both_formats) return;  // v7.3 opens slowly (libmatio); its storage matters only there
  const std::string path = write_file(c.scenario, format, 4);
  INFO(path);
  auto reader = open_acquisition(path, ImportOptions{});
  const std::vector<std::int64_t> times = acquisition_times(*reader);  // every frame still reads
  for (std::size_t k = 0; k < times.size(); ++k) CHECK(times[k] == static_cast<std::int64_t>(k) * kAssumedPeriodNs);
  const std::string period = reader->source_attributes().at("frame_period");
  INFO(period);
  CHECK(period.rfind("1 ms assumed (", 0) == 0);
  CHECK(period.find(c.reason) != std::string::npos);
  CHECK(period.find('\n') == std::string::npos);
}

TEST_CASE("IQData and ImgData frames are 1 ms apart, said to be assumed", "[formats][verasonics]") {
  const std::string path = write_file("plane", "v5", 1);
  auto iq = open_acquisition(path, ImportOptions{.object = "IQData"});
  CHECK(acquisition_times(*iq) == std::vector<std::int64_t>{0, kAssumedPeriodNs});
  CHECK(iq->source_attributes().at("frame_period") ==
        "1 ms assumed (frame times are derived from the sequence for RcvData only)");
}

TEST_CASE("bad Verasonics files give one-line errors naming the file, the variable and the expectation",
          "[formats][verasonics]") {
  struct Case {
    const char* defect;
    const char* object;  // the variable path the message must name
    const char* reason;  // and part of what it expected
  };
  const Case c = GENERATE(Case{"no_receive", "Receive", "missing"},
                          Case{"rank", "Trans.Connector", "channels"},
                          Case{"end_sample", "Receive(1).endSample", "beyond the 232 rows"},
                          Case{"rcv_type", "RcvData{1}", "expected int16"},
                          Case{"speed", "Resource.Parameters.speedOfSound", "missing"},
                          Case{"units", "Trans.units", "expected 'mm' or 'wavelengths'"},
                          Case{"last_frame", "Resource.RcvBuffer.lastFrame", "not a frame"},
                          Case{"baseband", "Receive(1).sampleMode", "not supported"},
                          Case{"layout", "Receive", "frame 2 of RcvData{1} is laid out unlike frame 1"},
                          Case{"hvmux", "Trans.HVMux.Aperture", "2 aperture(s): multiplexed (HVMux) apertures are not supported"},
                          Case{"tx_delay_short", "TX(1).Delay", "6 values, expected one per element (8)"});
  const std::string format = GENERATE("v5", "v73");
  const std::string path = write_file(std::string("bad:") + c.defect, format, 3);
  INFO(path << " " << c.defect);
  try {
    auto reader = open_acquisition(path, ImportOptions{});
    for (std::size_t f = 0; f < reader->frame_count(); ++f) reader->read_frame(f);
    FAIL("no error for " << c.defect);
  } catch (const FormatError& error) {
    const std::string message = error.what();
    INFO(message);
    CHECK(message.rfind(path + ": " + c.object + ": ", 0) == 0);
    CHECK(message.find(c.reason) != std::string::npos);
    CHECK(message.find('\n') == std::string::npos);
  }
}

TEST_CASE("a MAT file without Verasonics variables is not taken for one", "[formats][verasonics]") {
  const std::string path = write_file("bad:no_verasonics", "v5", 3);
  CHECK_FALSE(is_verasonics_mat(path));
  CHECK(detect_format(path) == FileFormat::unknown);
  CHECK_THROWS_AS(open_verasonics(path, ImportOptions{}), FormatError);
}

TEST_CASE("truncated and damaged files fail with FormatError, never a crash", "[formats][verasonics]") {
  const std::string format = GENERATE("v5", "v5z", "v73");
  const std::uint64_t seed = test::fresh_seed();
  const std::string source = write_file("plane", format, seed);
  std::vector<char> bytes;
  {
    std::ifstream in(source, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  const std::string path = (temporary_folder() / ("damaged_" + format + ".mat")).string();
  std::mt19937_64 random(seed);
  int errors = 0, readable = 0;
  auto attempt = [&](const std::vector<char>& content) {
    std::ofstream(path, std::ios::binary | std::ios::trunc).write(content.data(), static_cast<std::streamsize>(content.size()));
    try {
      auto reader = open_acquisition(path, ImportOptions{});
      for (std::size_t f = 0; f < reader->frame_count(); ++f) reader->read_frame(f);
      ++readable;  // damage in bytes the reader does not use (padding, unused rows)
    } catch (const FormatError& error) {
      const std::string message = error.what();
      CHECK(message.rfind(path + ": ", 0) == 0);
      CHECK(message.find('\n') == std::string::npos);
      ++errors;
    }
  };
  // Truncations at 20 lengths spread over the file, and (v5) 40 copies with 8 random bytes
  // overwritten. libmatio 1.5.23 can crash, loop or exhaust memory on such damage: the reader runs
  // it in a child process (isolated_reader.h), which makes every one of these a FormatError.
  // Damaged v7.3 files are not: one that the child cannot read as a MAT file is then probed as
  // a sonopipe recording and a UFF file by libhdf5 1.10 in this process, which can crash on
  // damaged HDF5 metadata (H5HG_read on a damaged global heap); the same holds for every HDF5
  // reader (recordings, UFF), so they get truncations only. 10 s per step is far above what these 40 KB files take (milliseconds)
  // and ends a damaged file on which libmatio loops (regressions/mat/v5z_cell_count_damaged).
  isolation::set_limits({10, std::size_t{2} << 30});
  for (int k = 0; k < 20; ++k) attempt(std::vector<char>(bytes.begin(), bytes.begin() + (bytes.size() * k) / 20));
  for (int k = 0; k < (format == "v73" ? 0 : 40); ++k) {
    std::vector<char> damaged = bytes;
    std::uniform_int_distribution<std::size_t> where(0, damaged.size() - 1);
    for (int b = 0; b < 8; ++b) damaged[where(random)] = static_cast<char>(random());
    attempt(damaged);
  }
  isolation::set_limits({});
  INFO(errors << " errors, " << readable << " readable");
  CHECK(errors >= 2);  // at least the empty file and the 5 % cut (headers) fail; later cuts may leave what the reader needs
}
