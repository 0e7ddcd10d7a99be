// `sonopipe-sim flow`: Doppler ensembles of the flow phantom (flow_sim.h), one frame per ensemble,
// as beamformed IQ [frame, lateral, axial] (default) or, with --channel, channel IQ/RF ensembles
// [frame, transmit, element, sample] for config/doppler.yaml. Truth beside them:
// /truth/axial_velocity_m_per_s and /truth/lumen, [lateral, axial] on the IQ grid.
#include <chrono>
#include <cmath>
#include <iostream>
#include <memory>
#include <numbers>

#include "sdk/thread_pool.h"
#include "tools/common/recording.h"
#include "tools/sim/commands.h"
#include "tools/sim/flow_sim.h"
#include "tools/sim/sim_random.h"
#include "tools/sim/sim_constants.h"

namespace sonopipe::sim {

namespace {

struct FlowOptions {
  std::string out;
  std::size_t ensembles = 1;
  bool channel = false;
  bool rf = false;
  double angle_deg = 30;
  double tissue_velocity_mm_per_s = 5;
  int threads = 0;
  FlowSimConfig config;
};

void run_flow(FlowOptions options) {
  FlowSimConfig& c = options.config;
  c.seed = resolve_seed(c.seed);
  c.tube_angle_rad = options.angle_deg * kDegree;
  c.tissue_velocity_z_m_per_s = options.tissue_velocity_mm_per_s * 1e-3;
  const auto started = std::chrono::steady_clock::now();
  ThreadPool pool(options.threads);
  recording::Writer writer(options.out);
  writer.set_attribute("created_by", "sonopipe-sim flow");
  writer.set_attribute("simulator", "flow");
  writer.set_attribute("seed", std::to_string(c.seed));
  writer.set_attribute("flow.prf_hz", std::to_string(c.prf_hz));
  writer.set_attribute("flow.tube_angle_deg", std::to_string(options.angle_deg));
  writer.set_attribute("flow.peak_velocity_m_per_s", std::to_string(c.peak_velocity_m_per_s));
  writer.set_attribute("flow.snr_db", std::to_string(c.snr_db));
  const std::uint64_t first_seed = c.seed;
  std::string shape;
  FlowTruth truth;
  for (std::size_t e = 0; e < options.ensembles; ++e) {
    c.seed = first_seed + e;  // a fresh phantom and noise per ensemble
    const double start_s = static_cast<double>(e * c.frames) / c.prf_hz;
    if (options.channel) {
      ChannelSimConfig channel;
      channel.iq = !options.rf;
      channel.seed = c.seed;
      FlowChannelResult r = simulate_flow_channel(c, channel, &pool);
      r.meta.sequence = e;
      r.meta.acquisition_time_ns = std::llround(start_s * 1e9);
      writer.append_frame(r.meta, r.data(), r.bytes());
      shape = r.meta.payload.shape_string();
    } else {
      FlowIqResult r = simulate_flow_iq(c, &pool);
      r.meta.sequence = e;
      r.meta.acquisition_time_ns = std::llround(start_s * 1e9);
      writer.append_frame(r.meta, r.iq.data(), r.iq.size() * sizeof(r.iq[0]));
      shape = r.meta.payload.shape_string();
    }
  }
  const double dx = (c.x_max_m - c.x_min_m) / static_cast<double>(c.lateral_pixels - 1);
  const double dz = (c.z_max_m - c.z_min_m) / static_cast<double>(c.axial_pixels - 1);
  truth = flow_truth(c, c.x_min_m, dx, c.lateral_pixels, c.z_min_m, dz, c.axial_pixels, 0.5e-3);
  const TensorSpec grid{.dtype = DType::float64,
                        .axes = {{"lateral", c.lateral_pixels, dx, "m", c.x_min_m}, {"axial", c.axial_pixels, dz, "m", c.z_min_m}},
                        .unit = "m/s"};
  writer.write_truth("axial_velocity_m_per_s", grid, truth.axial_velocity_m_per_s, c.stream_id);
  TensorSpec mask = grid;
  mask.unit = "1";
  writer.write_truth("lumen", mask, std::vector<double>(truth.lumen.begin(), truth.lumen.end()), c.stream_id);
  writer.flush();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::cout << "sonopipe-sim flow: wrote " << options.ensembles << " ensembles " << shape << " of stream " << c.stream_id
            << " to " << options.out << " in " << seconds << " s; axial peak " << truth.peak_axial_velocity_m_per_s
            << " m/s, Nyquist " << truth.nyquist_velocity_m_per_s << " m/s; seed " << first_seed << "\n";
}

}  // namespace

void add_flow_command(CLI::App& app) {
  auto options = std::make_shared<FlowOptions>();
  FlowSimConfig& c = options->config;
  CLI::App* command = app.add_subcommand("flow", "Doppler ensembles of a tube with parabolic flow in moving speckle");
  command->add_option("--out", options->out, "output recording (HDF5)")->required();
  command->add_option("--ensembles", options->ensembles, "ensembles (frames of the recording)")
      ->capture_default_str()->check(CLI::PositiveNumber);
  command->add_option("--frames", c.frames, "acquisitions per ensemble")->capture_default_str();
  command->add_option("--prf-hz", c.prf_hz, "acquisitions per second")->capture_default_str();
  command->add_flag("--channel", options->channel, "channel ensembles (0-degree plane wave, 128 elements) instead of beamformed IQ");
  command->add_flag("--rf", options->rf, "with --channel: channel_rf instead of channel_iq");
  command->add_option("--angle-deg", options->angle_deg, "tube angle from the lateral axis, positive: flow goes deeper")
      ->capture_default_str();
  command->add_option("--peak-velocity", c.peak_velocity_m_per_s, "velocity on the tube axis, m/s along the tube")
      ->capture_default_str();
  command->add_option("--radius-m", c.tube_radius_m, "tube radius")->capture_default_str();
  command->add_option("--tissue-velocity-mm-s", options->tissue_velocity_mm_per_s, "axial tissue motion (the clutter)")
      ->capture_default_str();
  command->add_option("--blood-db", c.blood_to_tissue_db, "blood echo level relative to tissue")->capture_default_str();
  command->add_option("--snr-db", c.snr_db, "mean blood power / noise power (IQ)")->capture_default_str();
  command->add_option("--fc-hz", c.center_frequency_hz, "pulse centre frequency")->capture_default_str();
  command->add_option("--lateral-pixels", c.lateral_pixels, "IQ grid")->capture_default_str();
  command->add_option("--axial-pixels", c.axial_pixels, "IQ grid")->capture_default_str();
  command->add_option("--stream-id", c.stream_id, "stream id of the frames")->capture_default_str();
  command->add_option("--seed", c.seed, "random seed (0: from the clock; the seed used is printed)")->capture_default_str();
  command->add_option("--threads", options->threads, "threads (0: all cores)")->capture_default_str();
  command->callback([options] { run_flow(*options); });
}

}  // namespace sonopipe::sim
