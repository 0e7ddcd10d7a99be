#include "shm/layout.h"

#include <stdexcept>

namespace sonopipe::shm {
namespace {

constexpr std::uint64_t round_up(std::uint64_t value, std::uint64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

// a + b <= limit without overflow.
bool range_within(std::uint64_t offset, std::uint64_t bytes, std::uint64_t limit) {
  return offset <= limit && bytes <= limit - offset;
}

constexpr std::uint64_t kMaxSlotBytes = 1ull << 40;  // far beyond any frame; keeps sums in range

}  // namespace

std::string_view mode_name(Mode mode) {
  return mode == Mode::lossless ? "lossless" : mode == Mode::live ? "live" : "unknown";
}

std::string_view descriptor_error_name(DescriptorError error) {
  switch (error) {
    case DescriptorError::none: return "none";
    case DescriptorError::header_outside_slot: return "header_outside_slot";
    case DescriptorError::payload_outside_slot: return "payload_outside_slot";
    case DescriptorError::header_too_large: return "header_too_large";
    case DescriptorError::payload_misaligned: return "payload_misaligned";
    case DescriptorError::ranges_overlap: return "ranges_overlap";
    case DescriptorError::empty_header: return "empty_header";
  }
  return "unknown";
}

DescriptorError check_descriptor(const SlotDescriptor& d, std::uint64_t slot_bytes, std::uint64_t header_capacity) {
  if (d.header_bytes == 0) return DescriptorError::empty_header;
  if (d.header_bytes > header_capacity) return DescriptorError::header_too_large;
  if (!range_within(d.header_offset, d.header_bytes, slot_bytes)) return DescriptorError::header_outside_slot;
  if (!range_within(d.payload_offset, d.payload_bytes, slot_bytes)) return DescriptorError::payload_outside_slot;
  if (d.payload_offset % kPayloadAlignment != 0) return DescriptorError::payload_misaligned;
  // Both ranges are within the slot, so these sums do not overflow.
  const bool disjoint = d.payload_bytes == 0 || d.header_offset + d.header_bytes <= d.payload_offset ||
                        d.payload_offset + d.payload_bytes <= d.header_offset;
  if (!disjoint) return DescriptorError::ranges_overlap;
  return DescriptorError::none;
}

PoolGeometry make_geometry(std::uint32_t slot_count, std::uint64_t header_capacity, std::uint64_t payload_capacity) {
  if (slot_count == 0 || slot_count > kMaxSlots)
    throw std::invalid_argument("shm pool: slot count " + std::to_string(slot_count) + " outside 1.." +
                                std::to_string(kMaxSlots));
  if (header_capacity == 0 || header_capacity > kMaxSlotBytes || payload_capacity > kMaxSlotBytes)
    throw std::invalid_argument("shm pool: header capacity must be 1 B..1 TiB and payload capacity at most 1 TiB");
  PoolGeometry g;
  g.slot_count = slot_count;
  g.header_capacity = round_up(header_capacity, kPageBytes);
  g.payload_capacity = round_up(payload_capacity, kPageBytes);
  g.slot_bytes = g.header_capacity + g.payload_capacity;
  g.slots_offset = round_up(sizeof(PoolHeader), 64);
  g.data_offset = round_up(g.slots_offset + slot_count * sizeof(SlotRecord), kPageBytes);
  if (g.slot_bytes > kMaxSlotBytes / kMaxSlots)
    throw std::invalid_argument("shm pool: slots too large (" + std::to_string(g.slot_bytes) + " bytes each)");
  g.total_bytes = g.data_offset + g.slot_bytes * slot_count;
  return g;
}

bool is_shm_endpoint(std::string_view endpoint) { return endpoint.substr(0, 6) == "shm://"; }

std::string object_name(std::string_view endpoint) {
  if (!is_shm_endpoint(endpoint))
    throw std::invalid_argument("shm endpoint '" + std::string(endpoint) + "' does not start with shm://");
  const std::string_view name = endpoint.substr(6);
  bool valid = !name.empty() && name.size() <= 200 && name.front() != '.';
  for (const char c : name)
    valid &= (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
             c == '-';
  if (!valid)
    throw std::invalid_argument("shm endpoint '" + std::string(endpoint) +
                                "': the name must be 1..200 characters of A-Z a-z 0-9 . _ - (not starting with .)");
  return "/sonopipe." + std::string(name);
}

}  // namespace sonopipe::shm
