// The MUST/PyMUST .mat reader (tools/formats/must_reader.h) on PyMUST's rotating-disk file
// (tests/data/pymust-pwi-disk/, LGPL-2.1): detection, the channel conventions of its frames, Doppler
// ensembles, and the demodulation of bandpass-sampled RF at f_c.
#include "tools/formats/must_reader.h"

#include <cmath>
#include <complex>
#include <cstring>
#include <fstream>
#include <iterator>
#include <numbers>
#include <random>

#include "stages/beamform/channel_conventions.h"
#include "stages/doppler/doppler_conventions.h"
#include "tests/support/test_support.h"
#include "tests/tools/tool_test_support.h"

using namespace sonopipe;
using namespace sonopipe::formats;

namespace {
const std::string disk_path() { return test::source_path("tests/data/pymust-pwi-disk/PWI_disk.mat"); }
}  // namespace

TEST_CASE("must: PyMUST's disk file is detected and read as 32 channel IQ frames", "[formats][must]") {
  REQUIRE(detect_format(disk_path()) == FileFormat::must_mat);
  auto reader = open_acquisition(disk_path(), ImportOptions{.stream_id = 3});
  REQUIRE(reader->frame_count() == 32);
  CHECK(reader->source_attributes().at("source_format") == "must");
  CHECK(reader->source_attributes().at("must_rf_dims") == "334x128x32");
  const recording::Frame frame = reader->read_frame(5);
  const FrameMeta& m = frame.meta;
  CHECK(m.kind == FrameKind::channel_iq);
  CHECK(m.stream_id == 3);
  CHECK(m.sequence == 5);
  CHECK(m.acquisition_time_ns == 500000);  // frame 5 at PRF 10 kHz
  CHECK(m.center_frequency_hz == 5e6);
  CHECK(m.demodulation_frequency_hz == 5e6);
  CHECK(m.sampling_frequency_hz == Approx(20e6 / 3).epsilon(1e-12));
  CHECK(m.speed_of_sound_m_per_s == 1480);
  REQUIRE(m.payload.axes.size() == 3);
  CHECK(m.payload.shape_string() == "complex64[transmit=1, element=128, sample=334]");
  CHECK(m.payload.axes[2].origin == Approx(9.95e-6).epsilon(1e-12));  // t0: USTB's clock (0-degree wave, TXdelay 0)
  const auto& x = *m.vector(std::string(channel::element_x_m));
  REQUIRE(x.size() == 128);
  CHECK(x.front() == Approx(-63.5 * 0.298e-3).epsilon(1e-12));
  CHECK(x.back() == Approx(63.5 * 0.298e-3).epsilon(1e-12));
  CHECK((*m.vector(std::string(channel::transmit_angle_rad)))[0] == 0.0);
  CHECK(frame.payload.size() == 128 * 334 * sizeof(std::complex<float>));
}

TEST_CASE("must: --ensemble groups frames into one Doppler ensemble with its times", "[formats][must]") {
  auto reader = open_acquisition(disk_path(), ImportOptions{.ensemble = 16});
  REQUIRE(reader->frame_count() == 2);
  const recording::Frame second = reader->read_frame(1);
  CHECK(second.meta.payload.shape_string() == "complex64[frame=16, transmit=1, element=128, sample=334]");
  CHECK(second.meta.payload.axes[0].spacing == Approx(1e-4));
  const auto& times = *second.meta.vector(doppler::kEnsembleTimeVector);
  REQUIRE(times.size() == 16);
  CHECK(times[15] - times[0] == Approx(15e-4));
  CHECK(second.meta.acquisition_time_ns == 1600000);
  // Frame 1 of the ensemble reader is frames 16..31 of the single-frame reader.
  auto single = open_acquisition(disk_path(), ImportOptions{});
  const recording::Frame frame_17 = single->read_frame(17);
  CHECK(std::memcmp(second.payload.data() + frame_17.payload.size(), frame_17.payload.data(), frame_17.payload.size()) == 0);
  CHECK_THROWS_WITH(open_acquisition(disk_path(), ImportOptions{.ensemble = 5}),
                    Catch::Contains("32 frames do not divide into ensembles of 5"));
}

TEST_CASE("must: bandpass-sampled RF (fs = 4/3 fc) demodulates to the echo's baseband phase", "[formats][must]") {
  // A long tone at fc + df sampled at 4/3 fc: IQ = A exp(j (2 pi df t + phi)) away from the ends
  // (no Hilbert transform: at this rate the negative band folds onto fs/2 and the low-pass removes it).
  const std::uint64_t seed = test::fresh_seed();
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> phase(-std::numbers::pi, std::numbers::pi), offset(-0.5e6, 0.5e6);
  const double fc = 5e6, fs = 4 * fc / 3, t0 = 9.95e-6, df = offset(rng), phi = phase(rng), amplitude = 300;
  std::vector<double> rf(400);
  for (std::size_t n = 0; n < rf.size(); ++n)
    rf[n] = amplitude * std::cos(2 * std::numbers::pi * (fc + df) * (t0 + n / fs) + phi);
  std::vector<std::complex<float>> iq(rf.size());
  demodulate_line(rf.data(), rf.size(), fs, fc, t0, iq.data());
  INFO("seed " << seed << ": df " << df << " Hz, phase " << phi);
  for (std::size_t n = 20; n + 20 < rf.size(); ++n) {
    const std::complex<double> expected = std::polar(amplitude, 2 * std::numbers::pi * df * (t0 + n / fs) + phi);
    // The 21-tap low-pass passes |df| <= 0.5 MHz within 3 % and stops the image at fs/2 by > 40 dB.
    CHECK(std::abs(std::complex<double>(iq[n]) - expected) < 0.05 * amplitude);
  }
}

TEST_CASE("must: truncated and damaged copies of the disk file fail with one line naming the file", "[formats][must]") {
  // The file as PyMUST's authors wrote it (an independent writer), cut short at several points and
  // with random bytes overwritten: opening and reading must end in a FormatError that names the file
  // (libmatio runs in the reader's child process), or read frames of the stated shape; never a crash.
  std::ifstream in(disk_path(), std::ios::binary);
  const std::string original((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE(original.size() > 100000);
  test::TempDir dir;
  std::mt19937_64 rng(test::fresh_seed());
  std::vector<std::string> damaged;
  for (const double fraction : {0.001, 0.01, 0.2, 0.5, 0.9, 0.999})
    damaged.push_back(original.substr(0, static_cast<std::size_t>(fraction * static_cast<double>(original.size()))));
  for (int copy = 0; copy < 6; ++copy) {
    std::string bytes = original;
    std::uniform_int_distribution<std::size_t> at(0, bytes.size() - 1);
    for (int k = 0; k < 16; ++k) bytes[at(rng)] = static_cast<char>(rng());
    damaged.push_back(bytes);
  }
  std::size_t refused = 0;
  for (std::size_t i = 0; i < damaged.size(); ++i) {
    const std::string path = dir.path + "/damaged_" + std::to_string(i) + ".mat";
    std::ofstream(path, std::ios::binary) << damaged[i];
    INFO(path);
    try {
      auto reader = open_acquisition(path, {});
      for (std::size_t f = 0; f < reader->frame_count(); ++f)
        CHECK(reader->read_frame(f).payload.size() == 128 * 334 * sizeof(std::complex<float>));
    } catch (const FormatError& e) {
      ++refused;
      const std::string message = e.what();
      CHECK(message.find(path) != std::string::npos);
      CHECK(message.find('\n') == std::string::npos);
    }
  }
  CHECK(refused >= 6);  // every truncated copy at least
}
