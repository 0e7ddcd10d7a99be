// Channel-data simulator physics (no I/O): per-element RF or IQ of a linear array for a sequence of
// transmits (plane waves, focused lines, diverging waves), with the exact two-way delay of every
// point scatterer. Ground truth: the scatterer positions. Used by `sonopipe-sim channel` and the
// beamform tests. Frames follow stages/beamform/channel_conventions.h (USTB's conventions).
//
// Model, from first principles with one stated approximation:
//  - each scatterer at r = (x, z) reflects the transmitted wave once (Born approximation);
//  - transmit: the wavefront that the delay law of the transmit produces, arriving at r at
//      plane wave at angle a:          t_tx = (x sin a + z cos a) / c
//      focused, source s (z_s > 0):    t_tx = (|s| - |r - s|) / c before the focus (z < z_s),
//                                             (|s| + |r - s|) / c beyond it
//      diverging, source s (z_s < 0):  t_tx = (|r - s| - |s|) / c
//    (t = 0 when the wavefront passes the origin, USTB's time zero); the transmit reaches only the
//    region that its aperture insonifies (geometric rays from the active elements, widened to the
//    diffraction limit lambda z_s / D at a focus);
//  - receive: the echo reaches element k at t_tx + |r - e_k| / c;
//  - APPROXIMATION: the spatial impulse response of the elements is replaced by the pulse itself
//    (point-like elements, no directivity, no spreading loss): every echo is the two-way pulse, a
//    Gaussian-enveloped cosine at f_c with the given -6 dB fractional bandwidth, times the
//    scatterer's amplitude;
//  - IQ = analytic(rf) * exp(-j 2 pi f_dem t), t the sample time (the sample axis origin included);
//  - optional complex/real white noise at snr_db below the mean signal power.
#pragma once

#include <complex>
#include <cstdint>
#include <limits>
#include <vector>

#include "sdk/frame.h"

namespace sonopipe {
class ThreadPool;
}

namespace sonopipe::sim {

struct ChannelTransmit {
  enum class Wave { plane, focused, diverging };
  Wave wave = Wave::plane;
  double angle_rad = 0.0;     // plane: steering angle, positive towards +x
  double source_x_m = 0.0;    // focused: focus; diverging: virtual source (z < 0)
  double source_z_m = 0.0;
  int first_element = 0;      // transmit aperture: elements [first_element, first_element + elements)
  int elements = 0;           // 0: the whole array

  static ChannelTransmit plane(double angle_rad);
  static ChannelTransmit focused(double x_m, double z_m, int first_element, int elements);
  static ChannelTransmit diverging(double x_m, double z_m);
};

struct Scatterer {
  double x_m = 0.0, z_m = 0.0, amplitude = 1.0;
};

struct ChannelSimConfig {
  int elements = 128;
  double pitch_m = 0.3e-3;                  // elements centred on x = 0, z = 0
  double center_frequency_hz = 5.2e6;
  double fractional_bandwidth = 0.6;        // -6 dB, of the two-way pulse
  bool iq = false;                          // channel_iq (baseband) instead of channel_rf
  double sampling_frequency_hz = 0.0;       // 0: 4 f_c for RF, f_c for IQ
  double demodulation_frequency_hz = 0.0;   // IQ only; 0: f_c
  double speed_of_sound_m_per_s = 1540.0;
  double initial_time_s = 0.0;              // time of sample 0 (UFF initial_time)
  std::int64_t samples = 0;                 // 0: enough for the deepest scatterer
  double snr_db = std::numeric_limits<double>::infinity();
  std::vector<ChannelTransmit> transmits = {ChannelTransmit::plane(0.0)};
  std::vector<Scatterer> scatterers;
  std::uint32_t stream_id = 1;
  std::uint64_t seed = 1;                   // noise
};

struct ChannelSimResult {
  FrameMeta meta;                           // channel_rf float32 or channel_iq complex64
  std::vector<float> rf;                    // [transmit, element, sample] when RF
  std::vector<std::complex<float>> iq;      // [transmit, element, sample] when IQ
  std::vector<double> element_x_m;
  double wavelength_m = 0.0;

  const void* data() const { return rf.empty() ? static_cast<const void*>(iq.data()) : rf.data(); }
  std::size_t bytes() const { return rf.size() * sizeof(float) + iq.size() * sizeof(std::complex<float>); }
};

// Throws std::invalid_argument on an inconsistent config. pool may be null (single thread).
ChannelSimResult simulate_channel(const ChannelSimConfig& config, ThreadPool* pool = nullptr);

// The sample count that holds every echo of a scatterer anywhere in x in [x_min, x_max], 0 < z <=
// z_max, for every transmit (insonified or not): for a series of frames whose scatterers move, so
// that every frame has the same length (ChannelSimConfig::samples = 0 fits each frame's own).
std::int64_t samples_covering(const ChannelSimConfig& config, double x_min_m, double x_max_m, double z_max_m);

// Transmit arrival time at (x, z) and whether the transmit insonifies it (the model above).
double transmit_time_s(const ChannelTransmit& transmit, double x_m, double z_m, double speed_of_sound_m_per_s);
bool insonified(const ChannelTransmit& transmit, const ChannelSimConfig& config, double x_m, double z_m);

// Phantoms and sequences.
// Speckle: uniformly placed scatterers with Gaussian amplitudes, `per_cell` per resolution cell
// (lambda/2 axially x one pitch laterally), in x in [x_min, x_max], z in [z_min, z_max], none inside
// the anechoic cysts (centre x, z and radius each).
struct Cyst {
  double x_m, z_m, radius_m;
};
std::vector<Scatterer> speckle_phantom(double x_min_m, double x_max_m, double z_min_m, double z_max_m,
                                       double wavelength_m, double pitch_m, double per_cell,
                                       const std::vector<Cyst>& cysts, std::uint64_t seed);
// `count` plane waves evenly spread over [-max_angle, max_angle] (one at 0 when count is 1).
std::vector<ChannelTransmit> plane_wave_sequence(int count, double max_angle_rad);
// One focused line per element position step: `lines` lines across the array, each focused at depth
// focus_z_m with an aperture of `aperture_elements` centred on the line (clipped at the array ends).
std::vector<ChannelTransmit> focused_line_sequence(const ChannelSimConfig& config, int lines, double focus_z_m,
                                                   int aperture_elements);

}  // namespace sonopipe::sim
