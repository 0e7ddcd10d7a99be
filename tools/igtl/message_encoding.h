// OpenIGTLink messages of the bridge, packed once by the Debian OpenIGTLink library (igtl::ImageMessage,
// igtl::StringMessage) and then shared, read-only, by every client's sender. Device names follow the
// protocol's 20-byte limit (device_name below).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tools/igtl/display_window.h"
#include "tools/igtl/image_layout.h"

namespace sonopipe::igtl_bridge {

constexpr std::size_t kDeviceNameBytes = 20;  // IGTL_HEADER_NAME_SIZE
constexpr char kUint8Suffix[] = "/u8";
constexpr char kStatusDevice[] = "sonopipe-status";
constexpr char kDevicesDevice[] = "sonopipe-devices";
constexpr char kReplyDevice[] = "sonopipe-reply";   // answers to STRING commands
constexpr std::uint64_t kMaxCommandBytes = 64 * 1024;  // a longer incoming message is skipped

// A packed message (header + body, as it goes on the wire) and the device it updates.
struct PackedMessage {
  std::string device;
  std::string bytes;
};
using MessagePointer = std::shared_ptr<const PackedMessage>;

// `name` when it fits the 20-byte device name; else its first 15 bytes, "~" and 4 hex digits of its
// FNV-1a hash (stable across runs, so a Slicer scene keeps its nodes).
std::string device_name(const std::string& name);

// The float32 image in RAS with little-endian scalars, time stamp = the acquisition time.
MessagePointer pack_float_image(const std::string& device, const Image& image);
// The same geometry with uint8 pixels (display_window.h).
MessagePointer pack_uint8_image(const std::string& device, const Image& image, const std::vector<std::uint8_t>& pixels);
// A STRING message (US-ASCII), time stamp = now.
MessagePointer pack_string(const std::string& device, const std::string& text);

}  // namespace sonopipe::igtl_bridge
