// ARFI simulator physics (no I/O): one ARFI set (reference + tracks at every lateral location) as
// the scanner would deliver it, with its ground-truth displacement field. Used by
// `sonopipe-sim arfi` and by the tests. Conventions: stages/arfi/arfi_conventions.h.
//
// Model, per lateral location (independent speckle per location):
//  - point scatterers, uniform in depth, Gaussian amplitudes, >= 10 per axial resolution cell
//    (cell = c / (2 B), B the -6 dB bandwidth);
//  - Gaussian-enveloped pulse at f_c, echo RF synthesised on a fine grid (rf_oversampling x the IQ
//    rate) from the exactly displaced scatterer delays (no grid quantisation of the motion);
//  - analytic signal and band limit by FFT (one-sided spectrum x a raised-cosine low-pass about
//    f_dem), demodulation by exp(-j phi(t)) with phi' = 2 pi f_dem(t), decimation to the IQ rate;
//  - tissue displacement u = peak x Gaussian(depth - focus) x Gaussian(lateral) x r(t), r a rise
//    (1 - exp(-t / rise)) times a recovery exp(-t / recovery), normalised to max 1; plus an
//    optional bulk drift = drift_um_per_s x (t - t_ref), the same at all depths;
//  - complex white noise at snr_db below the mean IQ signal power, then int16 quantisation.
// Timing: push at t = 0 lasting push_duration_s; the reference is acquired 1/PRF before the push,
// track i at push_duration_s + i / PRF.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "sdk/frame.h"

namespace sonopipe {
class ThreadPool;
}

namespace sonopipe::sim {

struct ArfiSimConfig {
  std::int64_t locations = 52;
  std::int64_t tracks = 80;           // ensemble = 1 reference + tracks
  std::int64_t samples = 493;         // IQ samples per line
  double iq_sampling_hz = 400e6 / 45;
  int rf_oversampling = 4;            // fine RF grid = rf_oversampling x IQ rate
  double center_frequency_hz = 5.33e6;
  double fractional_bandwidth = 0.6;  // -6 dB, of the two-way pulse
  double demodulation_frequency_hz = 4.8e6;
  double demodulation_frequency_end_hz = 0;  // > 0: f_dem varies linearly with depth to this value
  double speed_of_sound_m_per_s = 1540;
  double start_depth_m = 0.005;       // depth of IQ sample 0
  double scatterers_per_cell = 20;
  // Displacement field.
  double peak_um = 5.0;               // signed: > 0 away from the probe
  double focus_depth_m = 0.025;
  double depth_sigma_m = 0.005;
  double location_spacing_m = 0.2e-3;
  double lateral_sigma_m = 1.5e-3;
  double track_prf_hz = 7000;
  double push_duration_s = 0.2e-3;
  double rise_time_s = 0.4e-3;
  double recovery_time_s = 2.0e-3;
  double drift_um_per_s = 0;          // bulk linear motion
  double snr_db = 35;                 // +inf: no noise
  double int16_peak_fraction = 0.5;   // largest |I| or |Q| maps to this fraction of 32767
  std::uint64_t seed = 1;
  std::uint32_t stream_id = 1;
  // Optional tissue field u(depth_m, lateral_m, time_s) in um replacing the Gaussian model above
  // (e.g. a FEM displacement field); time 0 = push start.
  std::function<double(double, double, double)> tissue_field;
};

struct ArfiSimResult {
  FrameMeta meta;                         // kind iq, payload int16 [location, ensemble, sample, iq]
  std::vector<std::int16_t> payload;
  std::vector<double> displacement_um;    // truth [location, track, sample]: tissue + drift
  std::vector<double> tissue_um;          // truth without the drift
  std::vector<double> ensemble_time_s;    // [ensemble]
  std::vector<double> depth_m;            // [sample]
  double mean_frequency_hz = 0;           // power-weighted mean frequency of the IQ band (f_mean)
  double scatterers_per_cell = 0;         // as simulated
  double resolution_cell_m = 0;
  double noise_rms_counts = 0;            // per I or Q component, in int16 counts
};

// Throws std::invalid_argument on an inconsistent config. pool may be null (single thread).
ArfiSimResult simulate_arfi(const ArfiSimConfig& config, ThreadPool* pool = nullptr);

// The tissue displacement field itself (um), for tests and truth: depth z, lateral x, time t.
double arfi_tissue_displacement_um(const ArfiSimConfig& config, double depth_m, double lateral_m, double time_s);

}  // namespace sonopipe::sim
