// `sonopipe-sim arfi`: ARFI sets (arfi_sim.h) written as a recording, one frame per set, with the
// displacement truth beside them (/truth/displacement_um and /truth/tissue_displacement_um,
// [frame, location, track, sample] in um on the IQ sample grid).
#include <chrono>
#include <cmath>
#include <iostream>
#include <memory>

#include "sdk/thread_pool.h"
#include "tools/common/recording.h"
#include "tools/sim/arfi_sim.h"
#include "tools/sim/commands.h"
#include "tools/sim/sim_random.h"

namespace sonopipe::sim {

namespace {

struct ArfiOptions {
  std::string out;
  std::size_t sets = 1;
  double set_interval_s = 1.0;
  int threads = 0;
  ArfiSimConfig config;
};

void run_arfi(ArfiOptions options) {
  ArfiSimConfig& c = options.config;
  c.seed = resolve_seed(c.seed);
  const auto started = std::chrono::steady_clock::now();
  ThreadPool pool(options.threads);
  recording::Writer writer(options.out);
  writer.set_attribute("created_by", "sonopipe-sim arfi");
  writer.set_attribute("simulator", "arfi");
  writer.set_attribute("seed", std::to_string(c.seed));
  auto attr = [&](const char* key, double value) { writer.set_attribute(std::string("arfi.") + key, std::to_string(value)); };
  attr("center_frequency_hz", c.center_frequency_hz);
  attr("demodulation_frequency_hz", c.demodulation_frequency_hz);
  attr("demodulation_frequency_end_hz", c.demodulation_frequency_end_hz);
  attr("fractional_bandwidth", c.fractional_bandwidth);
  attr("iq_sampling_hz", c.iq_sampling_hz);
  attr("peak_um", c.peak_um);
  attr("focus_depth_m", c.focus_depth_m);
  attr("depth_sigma_m", c.depth_sigma_m);
  attr("lateral_sigma_m", c.lateral_sigma_m);
  attr("track_prf_hz", c.track_prf_hz);
  attr("rise_time_s", c.rise_time_s);
  attr("recovery_time_s", c.recovery_time_s);
  attr("drift_um_per_s", c.drift_um_per_s);
  attr("snr_db", c.snr_db);
  attr("scatterers_per_cell", c.scatterers_per_cell);

  std::vector<double> truth, tissue;
  ArfiSimResult first;
  for (std::size_t s = 0; s < options.sets; ++s) {
    ArfiSimConfig set_config = c;
    set_config.seed = c.seed + s;  // new speckle per set, same displacement field
    ArfiSimResult r = simulate_arfi(set_config, &pool);
    r.meta.sequence = s;
    r.meta.acquisition_time_ns = std::llround(s * options.set_interval_s * 1e9);
    writer.append_frame(r.meta, r.payload.data(), r.payload.size() * sizeof(std::int16_t));
    truth.insert(truth.end(), r.displacement_um.begin(), r.displacement_um.end());
    tissue.insert(tissue.end(), r.tissue_um.begin(), r.tissue_um.end());
    if (s == 0) first = std::move(r);
  }
  attr("mean_frequency_hz", first.mean_frequency_hz);
  TensorSpec spec{.dtype = DType::float64,
                  .axes = {{"frame", static_cast<std::int64_t>(options.sets), options.set_interval_s, "s"},
                           {"location", c.locations, c.location_spacing_m, "m"},
                           {"track", c.tracks, 1 / c.track_prf_hz, "s", first.ensemble_time_s[1]},
                           {"sample", c.samples, c.speed_of_sound_m_per_s / (2 * c.iq_sampling_hz), "m",
                            first.depth_m[0]}},
                  .unit = "um"};
  writer.write_truth("displacement_um", spec, truth, c.stream_id);
  writer.write_truth("tissue_displacement_um", spec, tissue, c.stream_id);
  writer.flush();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::cout << "sonopipe-sim arfi: wrote " << options.sets << " set(s) " << first.meta.payload.shape_string() << " ("
            << first.meta.payload.byte_size() << " bytes each) of stream " << c.stream_id << " to " << options.out
            << " in " << seconds << " s; seed " << c.seed << ", f_mean " << first.mean_frequency_hz / 1e6
            << " MHz vs f_dem " << c.demodulation_frequency_hz / 1e6 << " MHz, peak " << c.peak_um
            << " um, noise " << first.noise_rms_counts << " counts rms\n";
}

}  // namespace

void add_arfi_command(CLI::App& app) {
  auto o = std::make_shared<ArfiOptions>();
  ArfiSimConfig& c = o->config;
  CLI::App* cmd = app.add_subcommand("arfi", "ARFI sets (reference + tracks per location) with displacement truth");
  cmd->add_option("--out", o->out, "output recording (HDF5)")->required();
  cmd->add_option("--sets", o->sets, "number of sets (frames); new speckle each, same field")->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--set-interval-s", o->set_interval_s, "time between sets (acquisition times)")->capture_default_str();
  cmd->add_option("--threads", o->threads, "simulation threads (0: all cores)")->capture_default_str();
  cmd->add_option("--seed", c.seed, "random seed (0: from the clock; recorded)")->capture_default_str();
  cmd->add_option("--stream-id", c.stream_id, "stream id of the frames")->capture_default_str();
  cmd->add_option("--locations", c.locations, "lateral locations")->capture_default_str();
  cmd->add_option("--tracks", c.tracks, "tracks after the push (ensemble = 1 + tracks)")->capture_default_str();
  cmd->add_option("--samples", c.samples, "IQ samples per line")->capture_default_str();
  cmd->add_option("--fs-hz", c.iq_sampling_hz, "IQ sampling frequency")->capture_default_str();
  cmd->add_option("--fc-hz", c.center_frequency_hz, "tracking pulse centre frequency")->capture_default_str();
  cmd->add_option("--fdem-hz", c.demodulation_frequency_hz, "demodulation frequency (at the first sample)")
      ->capture_default_str();
  cmd->add_option("--fdem-end-hz", c.demodulation_frequency_end_hz,
                  "f_dem at the last sample (0: constant); writes the per-depth vector")->capture_default_str();
  cmd->add_option("--bandwidth", c.fractional_bandwidth, "-6 dB fractional bandwidth")->capture_default_str();
  cmd->add_option("--density", c.scatterers_per_cell, "scatterers per resolution cell (>= 10)")->capture_default_str();
  cmd->add_option("--peak-um", c.peak_um, "peak displacement, + = away from the probe")->capture_default_str();
  cmd->add_option("--focus-m", c.focus_depth_m, "depth of the displacement peak")->capture_default_str();
  cmd->add_option("--depth-sigma-m", c.depth_sigma_m, "Gaussian width in depth")->capture_default_str();
  cmd->add_option("--lateral-sigma-m", c.lateral_sigma_m, "Gaussian width across locations")->capture_default_str();
  cmd->add_option("--prf-hz", c.track_prf_hz, "track pulse repetition frequency")->capture_default_str();
  cmd->add_option("--rise-s", c.rise_time_s, "rise time constant")->capture_default_str();
  cmd->add_option("--recovery-s", c.recovery_time_s, "recovery time constant")->capture_default_str();
  cmd->add_option("--drift-um-per-s", c.drift_um_per_s, "bulk linear motion (0: none)")->capture_default_str();
  cmd->add_option("--snr-db", c.snr_db, "IQ signal power over noise power in dB (inf: no noise)")->capture_default_str();
  cmd->callback([o] { run_arfi(*o); });
}

}  // namespace sonopipe::sim
