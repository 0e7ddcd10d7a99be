#include "tools/igtl/message_encoding.h"

#include <igtlImageMessage.h>
#include <igtlStringMessage.h>
#include <igtlTimeStamp.h>

#include <chrono>
#include <cstdio>
#include <cstring>

namespace sonopipe::igtl_bridge {

namespace {

constexpr std::uint16_t kUsAscii = 3;  // IANA MIBenum of US-ASCII

void set_time_stamp(igtl::MessageBase* message, std::int64_t time_ns) {
  igtl::TimeStamp::Pointer stamp = igtl::TimeStamp::New();
  stamp->SetTime(static_cast<igtlUint32>(time_ns / 1000000000), static_cast<igtlUint32>(time_ns % 1000000000));
  message->SetTimeStamp(stamp);
}

MessagePointer packed(const std::string& device, igtl::MessageBase* message) {
  auto result = std::make_shared<PackedMessage>();
  result->device = device;
  result->bytes.assign(static_cast<const char*>(message->GetPackPointer()), message->GetPackSize());
  return result;
}

MessagePointer pack_image(const std::string& device, const Image& image, int scalar_type, const void* pixels,
                          std::size_t pixel_bytes) {
  igtl::ImageMessage::Pointer message = igtl::ImageMessage::New();
  message->SetDeviceName(device.c_str());
  message->SetDimensions(image.size[0], image.size[1], image.size[2]);
  message->SetSpacing(static_cast<float>(image.spacing_mm[0]), static_cast<float>(image.spacing_mm[1]),
                      static_cast<float>(image.spacing_mm[2]));
  message->SetScalarType(scalar_type);
  message->SetEndian(igtl::ImageMessage::ENDIAN_LITTLE);
  message->SetCoordinateSystem(igtl::ImageMessage::COORDINATE_RAS);
  igtl::Matrix4x4 matrix;
  igtl::IdentityMatrix(matrix);
  const Vector3 centre = image.centre_mm();
  for (int r = 0; r < 3; ++r) {
    for (int d = 0; d < 3; ++d) matrix[r][d] = static_cast<float>(image.direction[d][r]);  // column d = index d
    matrix[r][3] = static_cast<float>(centre[r]);
  }
  message->SetMatrix(matrix);
  message->AllocateScalars();
  std::memcpy(message->GetScalarPointer(), pixels, pixel_bytes);
  set_time_stamp(message, image.acquisition_time_ns);
  message->Pack();
  return packed(device, message);
}

}  // namespace

std::string device_name(const std::string& name) {
  if (name.size() <= kDeviceNameBytes) return name;
  std::uint32_t hash = 2166136261u;  // FNV-1a, 32 bit
  for (unsigned char c : name) hash = (hash ^ c) * 16777619u;
  char suffix[8];
  std::snprintf(suffix, sizeof suffix, "~%04x", static_cast<unsigned>(hash & 0xffffu));
  return name.substr(0, kDeviceNameBytes - 5) + suffix;
}

MessagePointer pack_float_image(const std::string& device, const Image& image) {
  return pack_image(device, image, igtl::ImageMessage::TYPE_FLOAT32, image.values.data(),
                    image.values.size() * sizeof(float));
}

MessagePointer pack_uint8_image(const std::string& device, const Image& image, const std::vector<std::uint8_t>& pixels) {
  return pack_image(device, image, igtl::ImageMessage::TYPE_UINT8, pixels.data(), pixels.size());
}

MessagePointer pack_string(const std::string& device, const std::string& text) {
  igtl::StringMessage::Pointer message = igtl::StringMessage::New();
  message->SetDeviceName(device.c_str());
  message->SetEncoding(kUsAscii);
  message->SetString(text.c_str());
  const auto now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::system_clock::now().time_since_epoch()).count();
  set_time_stamp(message, now_ns);
  message->Pack();
  return packed(device, message);
}

}  // namespace sonopipe::igtl_bridge
