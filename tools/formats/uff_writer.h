// Writes USTB UFF (v1.2.0, uff_names::written_version) the way USTB's MATLAB writer lays it out,
// so uff.read_object opens it: objects are groups with fixed-length `class` and `name`
// attributes, numbers are datasets with class "double"/"single" and `complex`, complex data a
// group {real, imag}, every array stored with MATLAB's dimensions reversed, scalars 1x1, arrays of
// objects as <name>_0001, ... One data object per file (`channel_data` or `beamformed_data`); its
// frames are appended one at a time. What UFF has no field for goes into sonopipe_* attributes
// on the data object (uff_names.h), which USTB ignores and our reader applies.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace sonopipe::formats {

// The acquisition description of a channel_data object (stages/beamform/channel_conventions.h).
struct UffChannelLayout {
  std::size_t transmits = 0, elements = 0, samples = 0;
  bool complex = false;
  double sampling_frequency_hz = 0, initial_time_s = 0, modulation_frequency_hz = 0;
  double sound_speed_m_per_s = 1540, center_frequency_hz = 0;
  std::vector<double> element_x_m, element_y_m, element_z_m;                  // per element (y, z may be empty: 0)
  std::vector<double> wavefront, angle_rad, source_x_m, source_z_m, delay_s;  // per transmit (empty: 0)
};

// A beamformed_data object on a linear scan (x, z in m) or a sector scan (azimuth in rad, depth in m).
struct UffBeamformedLayout {
  bool sector = false;
  std::vector<double> lateral, axial;  // x_axis / azimuth_axis, z_axis / depth_axis
  bool complex = false;
  double sampling_frequency_hz = 0, modulation_frequency_hz = 0, center_frequency_hz = 0;
};

// sonopipe's own metadata kept beside the UFF fields (uff_names.h).
struct UffSonopipeAttributes {
  std::uint32_t stream_id = 0;
  double sound_speed_m_per_s = 1540, center_frequency_hz = 0;
  std::size_t ensemble = 0;  // UFF frames per sonopipe frame, 0 = one each
  std::map<std::string, std::vector<double>> vectors;
  std::map<std::string, std::string> attributes;
};

class UffWriter {
 public:
  // Creates `path` (replacing it) with one data object of `frames` UFF frames; values are stored
  // as float32 ("single", as USTB writes them) unless `double_precision`.
  UffWriter(const std::string& path, const UffChannelLayout& layout, std::size_t frames, bool double_precision = false);
  UffWriter(const std::string& path, const UffBeamformedLayout& layout, std::size_t frames,
            bool double_precision = false);
  ~UffWriter();
  UffWriter(const UffWriter&) = delete;
  UffWriter& operator=(const UffWriter&) = delete;

  // Next UFF frame: real parts (and imaginary parts when complex), `frame_size` values each in
  // C order of MATLAB's reversed [waves, channels, samples] (beamformed: [pixels], z fastest).
  void append_frame(const std::vector<double>& real, const std::vector<double>& imag, std::int64_t acquisition_time_ns,
                    std::uint64_t sequence);
  std::size_t frame_size() const;
  // Writes the sonopipe_* attributes (times and sequences of the frames appended) and closes.
  void finish(const UffSonopipeAttributes& attributes);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sonopipe::formats
