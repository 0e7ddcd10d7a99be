#include "sdk/frame.h"

namespace sonopipe {

std::string_view frame_kind_name(FrameKind kind) {
  switch (kind) {
    case FrameKind::iq: return "iq";
    case FrameKind::rf: return "rf";
    case FrameKind::dce: return "dce";
    case FrameKind::channel_rf: return "channel_rf";
    case FrameKind::channel_iq: return "channel_iq";
  }
  return "unknown";
}

bool parse_frame_kind(std::string_view name, FrameKind& out) {
  for (FrameKind k : all_frame_kinds) {
    if (frame_kind_name(k) == name) {
      out = k;
      return true;
    }
  }
  return false;
}

}  // namespace sonopipe
