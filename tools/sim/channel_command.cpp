// `sonopipe-sim channel`: per-element channel data of a linear array (channel_sim.h) written as a
// recording, one frame per acquisition of the whole transmit sequence, with the truth beside it:
// /truth/scatterer_position_m [frame, scatterer, xz=2] (frame i sees every scatterer moved axially by
// velocity * i / frame rate) and /truth/axial_shift_m [frame].
#include <chrono>
#include <cmath>
#include <iostream>
#include <memory>
#include <numbers>
#include <sstream>

#include "sdk/thread_pool.h"
#include "tools/common/recording.h"
#include "tools/sim/channel_sim.h"
#include "tools/sim/commands.h"
#include "tools/sim/sim_random.h"
#include "tools/sim/sim_constants.h"

namespace sonopipe::sim {

namespace {

struct ChannelOptions {
  std::string out;
  std::size_t frames = 1;
  std::string phantom = "points";     // points | speckle
  std::vector<double> point_x_mm = {-10, 0, 10};
  std::vector<double> point_z_mm = {10, 20, 30, 40};
  std::vector<std::string> cysts;     // "x,z,r" in mm
  double density = 2.0;               // speckle scatterers per resolution cell
  std::string transmits = "plane";    // plane | focused | diverging
  int transmit_count = 11;            // plane waves, focused lines or diverging waves
  double max_angle_deg = 10.0;        // plane and diverging waves span [-max, max]
  double focus_mm = 30.0;             // focused lines
  int aperture_elements = 64;         // focused lines
  double virtual_source_mm = 20.0;    // diverging waves: source this far behind the array
  double velocity_mm_per_s = 0.0;
  double frame_rate_hz = 100.0;
  int threads = 0;
  ChannelSimConfig config;
};

Cyst parse_cyst(const std::string& text) {
  std::stringstream stream(text);
  double x = 0, z = 0, r = 0;
  char comma1 = 0, comma2 = 0;
  if (!(stream >> x >> comma1 >> z >> comma2 >> r) || comma1 != ',' || comma2 != ',' || r <= 0 || !stream.eof())
    throw std::invalid_argument("--cyst '" + text + "': expected x,z,radius in mm");
  return {x * 1e-3, z * 1e-3, r * 1e-3};
}

std::vector<ChannelTransmit> make_sequence(const ChannelOptions& options) {
  const ChannelSimConfig& c = options.config;
  if (options.transmits == "plane") return plane_wave_sequence(options.transmit_count, options.max_angle_deg * kDegree);
  if (options.transmits == "focused")
    return focused_line_sequence(c, options.transmit_count, options.focus_mm * 1e-3, options.aperture_elements);
  std::vector<ChannelTransmit> sequence;  // diverging: sources spread so the waves tilt by +-max angle
  const double depth = options.virtual_source_mm * 1e-3;
  for (const ChannelTransmit& plane : plane_wave_sequence(options.transmit_count, options.max_angle_deg * kDegree))
    sequence.push_back(ChannelTransmit::diverging(-depth * std::tan(plane.angle_rad), -depth));
  return sequence;
}

void run_channel(ChannelOptions options) {
  ChannelSimConfig& c = options.config;
  c.seed = resolve_seed(c.seed);
  c.transmits = make_sequence(options);
  const double wavelength = c.speed_of_sound_m_per_s / c.center_frequency_hz;
  std::vector<Scatterer> phantom;
  if (options.phantom == "points") {
    for (double z : options.point_z_mm)
      for (double x : options.point_x_mm) phantom.push_back({x * 1e-3, z * 1e-3, 1.0});
  } else {
    std::vector<Cyst> cysts;
    for (const std::string& text : options.cysts) cysts.push_back(parse_cyst(text));
    const double half_width = c.elements * c.pitch_m / 2;
    phantom = speckle_phantom(-half_width, half_width, 5e-3, 45e-3, wavelength, c.pitch_m, options.density, cysts, c.seed);
  }

  const auto started = std::chrono::steady_clock::now();
  ThreadPool pool(options.threads);
  recording::Writer writer(options.out);
  writer.set_attribute("created_by", "sonopipe-sim channel");
  writer.set_attribute("simulator", "channel");
  writer.set_attribute("seed", std::to_string(c.seed));
  writer.set_attribute("channel.phantom", options.phantom);
  writer.set_attribute("channel.transmits", options.transmits);
  writer.set_attribute("channel.fractional_bandwidth", std::to_string(c.fractional_bandwidth));
  writer.set_attribute("channel.frame_rate_hz", std::to_string(options.frame_rate_hz));

  std::vector<double> positions, shifts;
  ChannelSimResult frame;
  for (std::size_t i = 0; i < options.frames; ++i) {
    const double shift_m = options.velocity_mm_per_s * 1e-3 * static_cast<double>(i) / options.frame_rate_hz;
    c.scatterers = phantom;
    for (Scatterer& s : c.scatterers) s.z_m += shift_m;
    c.seed += 1;  // fresh noise per frame
    frame = simulate_channel(c, &pool);
    // Every frame keeps the first frame's sample count, so a recording holds one shape per stream.
    c.samples = frame.meta.payload.axes.back().size;
    frame.meta.sequence = i;
    frame.meta.acquisition_time_ns = std::llround(static_cast<double>(i) / options.frame_rate_hz * 1e9);
    writer.append_frame(frame.meta, frame.data(), frame.bytes());
    for (const Scatterer& s : c.scatterers) positions.insert(positions.end(), {s.x_m, s.z_m});
    shifts.push_back(shift_m);
  }
  const auto frames = static_cast<std::int64_t>(options.frames);
  writer.write_truth("scatterer_position_m",
                     TensorSpec{.dtype = DType::float64,
                                .axes = {{"frame", frames}, {"scatterer", static_cast<std::int64_t>(phantom.size())}, {"xz", 2}},
                                .unit = "m"},
                     positions, c.stream_id);
  writer.write_truth("axial_shift_m",
                     TensorSpec{.dtype = DType::float64,
                                .axes = {{"frame", frames, 1.0 / options.frame_rate_hz, "s"}},
                                .unit = "m"},
                     shifts, c.stream_id);
  writer.flush();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::cout << "sonopipe-sim channel: wrote " << options.frames << " frames " << frame.meta.payload.shape_string()
            << " (" << frame.bytes() << " bytes each, " << options.transmits << " transmits, " << phantom.size()
            << " scatterers) of stream " << c.stream_id << " to " << options.out << " in " << seconds << " s; seed "
            << c.seed - options.frames << "\n";
}

}  // namespace

void add_channel_command(CLI::App& app) {
  auto options = std::make_shared<ChannelOptions>();
  ChannelSimConfig& c = options->config;
  CLI::App* command = app.add_subcommand("channel", "per-element channel RF/IQ of a linear array (before beamforming)");
  command->add_option("--out", options->out, "output recording (HDF5)")->required();
  command->add_option("--frames", options->frames, "acquisitions of the whole transmit sequence")
      ->capture_default_str()->check(CLI::PositiveNumber);
  command->add_option("--phantom", options->phantom, "points | speckle")->capture_default_str()
      ->check(CLI::IsMember({"points", "speckle"}));
  command->add_option("--point-x-mm", options->point_x_mm, "point targets: lateral positions")->capture_default_str();
  command->add_option("--point-z-mm", options->point_z_mm, "point targets: depths (a grid with the x positions)")
      ->capture_default_str();
  command->add_option("--cyst", options->cysts, "speckle: anechoic cyst x,z,radius in mm (repeatable)");
  command->add_option("--density", options->density, "speckle: scatterers per resolution cell")->capture_default_str();
  command->add_option("--transmits", options->transmits, "plane | focused | diverging")->capture_default_str()
      ->check(CLI::IsMember({"plane", "focused", "diverging"}));
  command->add_option("--count", options->transmit_count, "plane waves, focused lines or diverging waves")
      ->capture_default_str()->check(CLI::PositiveNumber);
  command->add_option("--max-angle-deg", options->max_angle_deg, "plane/diverging waves span [-max, max]")
      ->capture_default_str();
  command->add_option("--focus-mm", options->focus_mm, "focused lines: focal depth")->capture_default_str();
  command->add_option("--aperture", options->aperture_elements, "focused lines: transmit aperture in elements")
      ->capture_default_str();
  command->add_option("--virtual-source-mm", options->virtual_source_mm, "diverging waves: source depth behind the array")
      ->capture_default_str();
  command->add_flag("--iq", c.iq, "baseband IQ (channel_iq, complex64) instead of RF (channel_rf, float32)");
  command->add_option("--elements", c.elements, "array elements")->capture_default_str();
  command->add_option("--pitch-m", c.pitch_m, "element pitch")->capture_default_str();
  command->add_option("--fc-hz", c.center_frequency_hz, "pulse centre frequency")->capture_default_str();
  command->add_option("--bandwidth", c.fractional_bandwidth, "-6 dB fractional bandwidth")->capture_default_str();
  command->add_option("--fs-hz", c.sampling_frequency_hz, "sampling frequency (0: 4 fc RF, fc IQ)")->capture_default_str();
  command->add_option("--fdem-hz", c.demodulation_frequency_hz, "IQ demodulation frequency (0: fc)")->capture_default_str();
  command->add_option("--initial-time-s", c.initial_time_s, "time of the first sample (USTB time zero)")
      ->capture_default_str();
  command->add_option("--snr-db", c.snr_db, "signal power / noise power in dB (inf: no noise)")->capture_default_str();
  command->add_option("--velocity-mm-s", options->velocity_mm_per_s, "axial scatterer velocity, positive deeper")
      ->capture_default_str();
  command->add_option("--frame-rate-hz", options->frame_rate_hz, "acquisitions per second")->capture_default_str();
  command->add_option("--stream-id", c.stream_id, "stream id of the frames")->capture_default_str();
  command->add_option("--seed", c.seed, "random seed (0: from the clock; the seed used is printed)")->capture_default_str();
  command->add_option("--threads", options->threads, "threads (0: all cores)")->capture_default_str();
  command->callback([options] { run_channel(*options); });
}

}  // namespace sonopipe::sim
