// Metadata of one incoming frame, as the pipeline sees it (decoded from FrameHeader by wire/).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sdk/tensor.h"

namespace sonopipe {

// channel_rf / channel_iq: per-element data before beamforming (stages/beamform/channel_conventions.h).
enum class FrameKind : std::uint8_t { iq, rf, dce, channel_rf, channel_iq };
inline constexpr FrameKind all_frame_kinds[] = {FrameKind::iq, FrameKind::rf, FrameKind::dce,
                                                FrameKind::channel_rf, FrameKind::channel_iq};

std::string_view frame_kind_name(FrameKind kind);  // "iq", "rf", "dce", "channel_rf", "channel_iq"
bool parse_frame_kind(std::string_view name, FrameKind& out);

struct FrameMeta {
  std::uint32_t stream_id = 0;
  std::uint64_t sequence = 0;
  std::int64_t acquisition_time_ns = 0;
  FrameKind kind = FrameKind::iq;
  TensorSpec payload;                        // dtype and named axes of the payload bytes
  double sampling_frequency_hz = 0.0;        // of the fastest axis
  double center_frequency_hz = 0.0;
  double demodulation_frequency_hz = 0.0;    // 0 for RF
  double speed_of_sound_m_per_s = 1540.0;
  std::map<std::string, std::string> attributes;
  std::map<std::string, std::vector<double>> vectors;  // small side vectors (f_dem per depth, DCE inputs)

  // Nullptr when absent.
  const std::vector<double>* vector(const std::string& name) const {
    auto it = vectors.find(name);
    return it == vectors.end() ? nullptr : &it->second;
  }
};

}  // namespace sonopipe
