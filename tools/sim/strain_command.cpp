// `sonopipe-sim strain`: RF frames of a compressed phantom with a stiff inclusion (strain_sim.h)
// written as a recording, with the true displacement and strain of every frame.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <memory>

#include "tools/common/recording.h"
#include "tools/sim/commands.h"
#include "tools/sim/strain_sim.h"

namespace sonopipe::sim {
namespace {

struct StrainOptions {
  std::string out;
  std::string type = "int16";
  std::uint32_t stream_id = 1;
  double frame_rate_hz = 20.0;
  double counts_rms = 2000.0;
  double radius_mm = 5.0;
  StrainSimConfig config;
};

void run_strain(StrainOptions options) {
  StrainSimConfig& config = options.config;
  if (config.dims == 3 && config.axial_samples == 2078 && config.lateral_lines == 150) {
    // The 3-D defaults: volumes of 1024 x 128 x N (the 3-D paper).
    config.axial_samples = 1024;
    config.lateral_lines = 128;
    if (config.elevational_planes < 2) config.elevational_planes = 8;
    config.line_pitch_m = 0.119e-3;  // the 3-D paper's line spacing
  }
  config.inclusion_radius_m = options.radius_mm * 1e-3;
  const bool integer = options.type == "int16";
  config.amplitude = integer ? 1.0 : config.amplitude;
  const auto started = std::chrono::steady_clock::now();
  const StrainSimResult result = simulate_strain(config);
  const StrainField field(config);

  recording::Writer writer(options.out);
  writer.set_attribute("created_by", "sonopipe-sim strain");
  writer.set_attribute("simulator", "strain");
  writer.set_attribute("seed", std::to_string(result.seed));
  writer.set_attribute("strain.dims", std::to_string(config.dims));
  writer.set_attribute("strain.strain_per_frame", std::to_string(config.strain_per_frame));
  writer.set_attribute("strain.stiffness_ratio", std::to_string(config.stiffness_ratio));
  writer.set_attribute("strain.strain_ratio", std::to_string(field.strain_ratio()));
  writer.set_attribute("strain.inclusion_radius_m", std::to_string(config.inclusion_radius_m));
  writer.set_attribute("strain.inclusion_centre_depth_m", std::to_string(field.centre_depth()));
  writer.set_attribute("strain.poisson", std::to_string(config.poisson));
  writer.set_attribute("strain.snr_db", std::to_string(config.snr_db));

  FrameMeta meta;
  meta.stream_id = options.stream_id;
  meta.kind = FrameKind::rf;
  meta.payload = result.frame_spec;
  meta.payload.dtype = integer ? DType::int16 : DType::float32;
  meta.sampling_frequency_hz = config.sampling_frequency_hz;
  meta.center_frequency_hz = config.center_frequency_hz;
  meta.speed_of_sound_m_per_s = config.speed_of_sound_m_per_s;
  const std::int64_t start_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                    std::chrono::system_clock::now().time_since_epoch()).count();
  std::size_t clipped = 0;
  for (std::size_t k = 0; k < result.frames.size(); ++k) {
    meta.sequence = k;
    meta.acquisition_time_ns = start_ns + static_cast<std::int64_t>(std::llround(k * 1e9 / options.frame_rate_hz));
    const auto& frame = result.frames[k];
    if (integer) {
      std::vector<std::int16_t> counts(frame.size());
      for (std::size_t i = 0; i < frame.size(); ++i) {
        const double v = std::round(frame[i] * options.counts_rms);
        if (std::fabs(v) > 32767) ++clipped;
        counts[i] = static_cast<std::int16_t>(std::clamp(v, -32768.0, 32767.0));
      }
      writer.append_frame(meta, counts.data(), counts.size() * sizeof(std::int16_t));
    } else {
      writer.append_frame(meta, frame.data(), frame.size() * sizeof(float));
    }
  }
  // Truth on the RF grid, first axis = frame (relative to frame 0 at frame-0 positions).
  TensorSpec truth = result.frame_spec;
  truth.dtype = DType::float64;
  truth.axes.insert(truth.axes.begin(), Axis{"frame", static_cast<std::int64_t>(result.frames.size()),
                                             1.0 / options.frame_rate_hz, "s"});
  auto flatten = [](const std::vector<std::vector<double>>& per_frame) {
    std::vector<double> all;
    for (const auto& f : per_frame) all.insert(all.end(), f.begin(), f.end());
    return all;
  };
  truth.unit = "m";
  writer.write_truth("axial_displacement_m", truth, flatten(result.axial_displacement_m), options.stream_id);
  writer.write_truth("lateral_displacement_m", truth, flatten(result.lateral_displacement_m), options.stream_id);
  truth.unit = "1";
  writer.write_truth("axial_strain", truth, flatten(result.axial_strain), options.stream_id);
  writer.flush();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::cout << "sonopipe-sim strain: wrote " << result.frames.size() << " frames " << meta.payload.shape_string()
            << " of stream " << options.stream_id << " to " << options.out << " in " << seconds << " s; seed "
            << result.seed << ", " << config.strain_per_frame * 100 << " % compression per frame, inclusion strain ratio "
            << field.strain_ratio();
  if (clipped > 0) std::cout << ", " << clipped << " int16 values clipped";
  std::cout << "\n";
}

}  // namespace

void add_strain_command(CLI::App& app) {
  auto options = std::make_shared<StrainOptions>();
  CLI::App* command = app.add_subcommand(
      "strain", "RF frames of a compressed phantom with a stiff inclusion, with true displacement and strain");
  StrainSimConfig& c = options->config;
  command->add_option("--out", options->out, "output recording (HDF5)")->required();
  command->add_option("--dims", c.dims, "2 (2078 samples x 150 lines) or 3 (1024 x 128 x planes)")
      ->capture_default_str()->check(CLI::IsMember({2, 3}));
  command->add_option("--samples", c.axial_samples, "axial samples per line")->capture_default_str();
  command->add_option("--lines", c.lateral_lines, "lateral lines")->capture_default_str();
  command->add_option("--planes", c.elevational_planes, "elevational planes (3-D; default 8)")->capture_default_str();
  command->add_option("--frames", c.frames, "frames (frame k is compressed k times)")->capture_default_str()
      ->check(CLI::Range(2, 1000));
  command->add_option("--strain-per-frame", c.strain_per_frame, "axial compression per frame (0.01 = 1 %)")
      ->capture_default_str();
  command->add_option("--stiffness-ratio", c.stiffness_ratio, "inclusion / background Young's modulus")
      ->capture_default_str();
  command->add_option("--radius-mm", options->radius_mm, "inclusion radius")->capture_default_str();
  command->add_option("--snr-db", c.snr_db, "signal rms / noise sd in dB")->capture_default_str();
  command->add_option("--seed", c.seed, "random seed (0: from the clock; the seed used is recorded)")
      ->capture_default_str();
  command->add_option("--type", options->type, "int16 (for convert) | float32")->capture_default_str()
      ->check(CLI::IsMember({"int16", "float32"}));
  command->add_option("--amplitude", c.amplitude, "float32 frames: rms value (simulators give ~1e-22)")
      ->capture_default_str();
  command->add_option("--counts-rms", options->counts_rms, "int16 frames: rms in ADC counts")->capture_default_str();
  command->add_option("--stream-id", options->stream_id, "stream id of the frames")->capture_default_str();
  command->add_option("--frame-rate-hz", options->frame_rate_hz, "frames per second (acquisition times)")
      ->capture_default_str();
  command->callback([options] { run_strain(*options); });
}

}  // namespace sonopipe::sim
