// How a sonopipe result becomes OpenIGTLink images: which images one result gives, and where each
// pixel lies in Slicer's RAS space (millimetres). The conventions live here once; docs/integrations.md
// states them for users and tests/tools/igtl_test.cpp checks them against an independent reference.
//
// Images of one result (ResultHeader axes, C order, last axis fastest):
//  - a trailing axis named "component" gives one image per component, named after the component
//    (ncc_track and strain order them [axial, lateral, elevational]: stages/strain/ncc_track/ncc_track_params.h);
//  - one slow-time axis (track, time, ensemble, frame) is reduced to its peak: the largest finite value
//    over that axis, NaN where none is finite (the ARFI peak-displacement map, as sonopipe-view draws it);
//  - the 1 to 3 axes left are the image axes. Every other shape is refused.
// Index order: OpenIGTLink's i varies fastest, so i = the last image axis, j = the one before, k = the
//   one before that (size 1 for a 2-D image). Pixel values keep the result's C order unchanged.
// Directions (RAS unit vectors), by axis name:
//   depth     (depth, sample, axial, z, range)                -> -S (inferior: deeper is lower on screen)
//   lateral   (location, lateral, line, x, element, beam, column) -> +L = -R (left to right on screen
//             in Slicer's coronal view, which shows the patient's right on the left)
//   elevation (elevation, elevational, plane, y, slice)       -> +A (anterior)
//   an axis with another name, or a second axis of a role already taken, gets the first free one of
//   (-S, -R, +A) in that order; the missing k axis of a 2-D image too.
// Lengths: unit "m" x 1000, "mm" as is, a depth axis in "s" (fast time) x c/2 x 1000 with c the
//   result's attribute speed_of_sound_m_per_s (else 1540 m/s); any other unit, or spacing 0, is an
//   index grid of 1 mm per sample with origin 0. A negative spacing flips the direction.
// Position of pixel (i, j, k) = corner + i s_i n_i + j s_j n_j + k s_k n_k, with corner = the sum of
//   each axis's origin (mm) times its direction. OpenIGTLink carries the image CENTRE, not the
//   corner: centre = corner + sum_d n_d s_d (size_d - 1) / 2 (as Slicer and PLUS read it).
// Velocity (the doppler stage, docs/doppler.md): a result in unit "m/s" whose header carries the
//   attribute nyquist_velocity_m_per_s (v_N > 0) keeps v_N in Image::nyquist_velocity_m_per_s; the
//   bridge's uint8 variant then spans exactly [-v_N, +v_N] (display_window.h).
// B-mode (the mean_bmode stage): a result in unit "dB" whose header carries the attribute
//   mean_of_frames is Image::bmode; its uint8 variant spans the 50 dB below its maximum.
#pragma once

#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "sonopipe/v1/result.pb.h"

namespace sonopipe::igtl_bridge {

constexpr double kDefaultSpeedOfSound_m_per_s = 1540.0;
constexpr char kComponentAxis[] = "component";
constexpr char kPeakSuffix[] = "peak";
constexpr const char* kComponentNames[] = {"axial", "lateral", "elevational"};
constexpr char kNyquistAttribute[] = "nyquist_velocity_m_per_s";  // stages/doppler/doppler_conventions.h
constexpr char kVelocityUnit[] = "m/s";
constexpr char kMeanOfFramesAttribute[] = "mean_of_frames";  // stages/doppler/doppler_conventions.h
constexpr char kDecibelUnit[] = "dB";

using Vector3 = std::array<double, 3>;

// One image ready for OpenIGTLink: values in i-fastest order, geometry in RAS millimetres.
struct Image {
  std::string key;                   // "<pipeline>/<output>[/<component>|/peak]"
  std::array<int, 3> size{1, 1, 1};  // i, j, k
  Vector3 spacing_mm{1, 1, 1};       // > 0
  std::array<Vector3, 3> direction{};  // RAS unit vector of i, j, k
  Vector3 corner_mm{0, 0, 0};        // RAS position of pixel (0, 0, 0)
  std::vector<float> values;
  std::string unit;                  // of the values (the result's unit)
  double nyquist_velocity_m_per_s = 0;  // > 0: a velocity image aliasing at +-this (m/s); 0: none
  bool bmode = false;                   // a log-compressed B-mode in dB (the mean_bmode stage's output)
  std::int64_t acquisition_time_ns = 0;
  std::uint64_t input_sequence = 0;

  Vector3 centre_mm() const;          // what OpenIGTLink's IMAGE carries as its origin
  std::size_t pixel_count() const { return static_cast<std::size_t>(size[0]) * size[1] * size[2]; }
};

// A result that cannot be shown (its shape, element type or payload size); the message says what.
struct LayoutError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The images of one result per the rules above. Element types: float32, float64, int16, uint8 (values
// converted to float32). Throws LayoutError.
std::vector<Image> images_of_result(const v1::ResultHeader& header, const void* payload, std::size_t payload_bytes);

}  // namespace sonopipe::igtl_bridge
