// How a channel-data frame (per-element RF or IQ, before beamforming) describes its acquisition.
// One contract for every producer (sonopipe-sim channel, the UFF and Verasonics importers, a
// scanner-side sender) and every consumer (the beamform stage, sonopipe-export). It follows USTB's
// UFF conventions so that a UFF file maps onto it field for field.
//
// Frame: kind channel_rf (real samples, f_dem = 0) or channel_iq (baseband, f_dem > 0).
//   Axes, outermost first: [frame,] transmit, element, sample [, iq=2 for int16 IQ].
//   - `frame`:    optional, an ensemble: consecutive acquisitions of the same transmit sequence, in
//                 acquisition order (slow time). Its spacing is the frame period 1 / PRF with unit
//                 "s" (the pulse repetition frequency of the ensemble; UFF's sequence PRF), origin
//                 the first frame's time; or the frame vector "ensemble_time_s" gives each frame's
//                 time. The geometry vectors below are the same for every frame.
//   - `transmit`: one entry per transmit event (plane wave, focused line, diverging wave).
//   - `element`:  one entry per receive channel, in the order of the element vectors below.
//   - `sample`:   fast time, unit "s", spacing 1/f_s, origin = time of the first sample (UFF
//                 channel_data.initial_time) on the clock whose zero is defined below.
//   Header fields: sampling_frequency_hz (of the sample axis), center_frequency_hz,
//   demodulation_frequency_hz (0 for RF, UFF modulation_frequency), speed_of_sound_m_per_s.
//
// Coordinates: x lateral along the array, z depth (positive into the medium), y elevation; metres;
//   origin at the array centre as the probe defines it (UFF probe.geometry).
// Angles: a plane wave's steering angle is positive when the wave travels towards +x
//   (direction (sin a, cos a) in (x, z)); radians.
// Time zero (USTB): t = 0 is the moment the transmitted wavefront passes through the origin of
//   coordinates. A sample at time t on the sample axis was received t after that moment; the
//   per-transmit `transmit_delay_s` (UFF wave.delay) is added to every sample time of that transmit.
// Spherical waves: the source point (x_s, z_s) is the focus (z_s > 0) or the virtual source of a
//   diverging wave (z_s < 0, behind the array).
#pragma once

#include <string_view>

namespace sonopipe::channel {

// Vector names in FrameMeta::vectors (one value per element or per transmit, as said).
inline constexpr std::string_view element_x_m = "element_x_m";          // per element
inline constexpr std::string_view element_y_m = "element_y_m";          // per element, optional (0)
inline constexpr std::string_view element_z_m = "element_z_m";          // per element, optional (0)
inline constexpr std::string_view element_delay_s = "element_delay_s";  // per element, optional: lens
                                       // and cable delay (the echo is recorded this much later)
inline constexpr std::string_view transmit_wavefront = "transmit_wavefront";  // per transmit, codes below
inline constexpr std::string_view transmit_angle_rad = "transmit_angle_rad";  // per transmit (plane)
inline constexpr std::string_view transmit_source_x_m = "transmit_source_x_m";  // per transmit (spherical)
inline constexpr std::string_view transmit_source_z_m = "transmit_source_z_m";  // per transmit (spherical)
inline constexpr std::string_view transmit_delay_s = "transmit_delay_s";  // per transmit, optional (0)

inline constexpr std::string_view ensemble_time_s = "ensemble_time_s";  // per frame, optional (s)

// Codes of `transmit_wavefront` (UFF's wavefront enumeration).
inline constexpr double wavefront_plane = 0.0;
inline constexpr double wavefront_spherical = 1.0;

// Axis names.
inline constexpr std::string_view frame_axis = "frame";
inline constexpr std::string_view transmit_axis = "transmit";
inline constexpr std::string_view element_axis = "element";
inline constexpr std::string_view sample_axis = "sample";

}  // namespace sonopipe::channel
