// `sonopipe-sim speckle`: generic speckle IQ/RF frames (speckle_sim.h) written as a recording,
// with the axial shift of every frame as truth.
#include <chrono>
#include <cmath>
#include <iostream>
#include <limits>
#include <memory>
#include <sstream>

#include "tools/common/recording.h"
#include "tools/sim/commands.h"
#include "tools/sim/sim_random.h"
#include "tools/sim/speckle_sim.h"

namespace sonopipe::sim {

namespace {

// "64x1024" -> {64, 1024}.
std::vector<std::int64_t> parse_shape(const std::string& text) {
  std::vector<std::int64_t> shape;
  std::stringstream stream(text);
  std::string part;
  while (std::getline(stream, part, 'x')) {
    std::size_t used = 0;
    long long value = 0;
    try {
      value = std::stoll(part, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != part.size() || part.empty() || value <= 0)
      throw std::invalid_argument("--shape '" + text + "': expected sizes like 64x1024 ([planes x] [lines x] samples)");
    shape.push_back(value);
  }
  return shape;
}

struct SpeckleOptions {
  std::string out;
  std::size_t frames = 10;
  std::string shape = "64x1024";
  std::string kind = "iq";
  std::string type = "int16";
  std::uint64_t seed = 0;
  double velocity_mm_per_s = 0.0;
  double start_time_s = 0.0;
  SpeckleParams params;
};

void run_speckle(const SpeckleOptions& options) {
  SpeckleParams params = options.params;
  if (!parse_frame_kind(options.kind, params.kind) || params.kind == FrameKind::dce)
    throw std::invalid_argument("--kind must be iq or rf");
  params.integer_samples = options.type == "int16";
  params.shape = parse_shape(options.shape);
  params.frames = options.frames;
  params.seed = resolve_seed(options.seed);
  params.axial_velocity_m_per_s = options.velocity_mm_per_s * 1e-3;
  params.start_time_ns = std::llround(options.start_time_s * 1e9);

  const auto started = std::chrono::steady_clock::now();
  SpeckleGenerator generator(params);
  const SpeckleParams& used = generator.params();
  recording::Writer writer(options.out);
  writer.set_attribute("created_by", "sonopipe-sim speckle");
  writer.set_attribute("simulator", "speckle");
  writer.set_attribute("seed", std::to_string(used.seed));
  writer.set_attribute("speckle.kind", options.kind);
  writer.set_attribute("speckle.shape", options.shape);
  writer.set_attribute("speckle.sampling_frequency_hz", std::to_string(used.sampling_frequency_hz));
  writer.set_attribute("speckle.center_frequency_hz", std::to_string(used.center_frequency_hz));
  writer.set_attribute("speckle.demodulation_frequency_hz", std::to_string(used.demodulation_frequency_hz));
  writer.set_attribute("speckle.fractional_bandwidth", std::to_string(used.fractional_bandwidth));
  writer.set_attribute("speckle.snr_db", std::to_string(used.snr_db));
  writer.set_attribute("speckle.frame_rate_hz", std::to_string(used.frame_rate_hz));
  writer.set_attribute("speckle.axial_velocity_m_per_s", std::to_string(used.axial_velocity_m_per_s));
  writer.set_attribute("speckle.scatterers", std::to_string(generator.scatterer_count()));
  writer.set_attribute("speckle.counts_per_unit", std::to_string(generator.counts_per_unit()));

  std::vector<double> shifts;
  FrameMeta meta;
  for (std::size_t i = 0; i < options.frames; ++i) {
    meta = generator.frame_meta(i);
    const std::vector<std::byte> payload = generator.frame(i);
    writer.append_frame(meta, payload.data(), payload.size());
    shifts.push_back(generator.axial_shift_m(i));
  }
  writer.write_truth("axial_shift_m",
                     TensorSpec{.dtype = DType::float64,
                                .axes = {{"frame", static_cast<std::int64_t>(options.frames), 1.0 / used.frame_rate_hz, "s"}},
                                .unit = "m"},
                     shifts, used.stream_id);
  writer.flush();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::cout << "sonopipe-sim speckle: wrote " << options.frames << " frames " << meta.payload.shape_string()
            << " (" << meta.payload.byte_size() << " bytes each) of stream " << used.stream_id << " to "
            << options.out << " in " << seconds << " s; seed " << used.seed << ", "
            << generator.scatterer_count() << " scatterers, " << used.frame_rate_hz << " frames/s";
  if (generator.clipped_samples() > 0)
    std::cout << ", " << generator.clipped_samples() << " int16 values clipped";
  std::cout << "\n";
}

}  // namespace

void add_speckle_command(CLI::App& app) {
  auto options = std::make_shared<SpeckleOptions>();
  CLI::App* command = app.add_subcommand("speckle", "speckle-like IQ or RF frames of a given shape");
  command->add_option("--out", options->out, "output recording (HDF5)")->required();
  command->add_option("--frames", options->frames, "number of frames")->capture_default_str()
      ->check(CLI::PositiveNumber);
  command->add_option("--shape", options->shape, "[planes x] [lines x] samples")->capture_default_str();
  command->add_option("--kind", options->kind, "iq | rf")->capture_default_str()
      ->check(CLI::IsMember({"iq", "rf"}));
  command->add_option("--type", options->type, "int16 (IQ interleaved on an 'iq' axis) | float32 (IQ: complex64)")
      ->capture_default_str()->check(CLI::IsMember({"int16", "float32"}));
  command->add_option("--seed", options->seed, "random seed (0: from the clock; the seed used is recorded)")
      ->capture_default_str();
  command->add_option("--stream-id", options->params.stream_id, "stream id of the frames")->capture_default_str();
  command->add_option("--frame-rate-hz", options->params.frame_rate_hz, "frames per second (acquisition times)")
      ->capture_default_str();
  command->add_option("--start-time-s", options->start_time_s, "acquisition time of frame 0, s since the epoch")
      ->capture_default_str();
  command->add_option("--fs-hz", options->params.sampling_frequency_hz, "sampling frequency (0: 40 MHz RF, 10 MHz IQ)")
      ->capture_default_str();
  command->add_option("--fc-hz", options->params.center_frequency_hz, "pulse centre frequency")->capture_default_str();
  command->add_option("--fdem-hz", options->params.demodulation_frequency_hz, "IQ demodulation frequency (0: fc)")
      ->capture_default_str();
  command->add_option("--bandwidth", options->params.fractional_bandwidth, "-6 dB fractional bandwidth")
      ->capture_default_str();
  command->add_option("--pitch-m", options->params.line_pitch_m, "line (and plane) pitch")->capture_default_str();
  command->add_option("--density", options->params.scatterers_per_cell, "scatterers per resolution cell")
      ->capture_default_str();
  command->add_option("--snr-db", options->params.snr_db, "signal rms / noise sd in dB (inf: no noise)")
      ->capture_default_str();
  command->add_option("--velocity-mm-s", options->velocity_mm_per_s,
                      "axial scatterer velocity, positive away from the probe (truth: axial_shift_m)")
      ->capture_default_str();
  command->callback([options] { run_speckle(*options); });
}

}  // namespace sonopipe::sim
