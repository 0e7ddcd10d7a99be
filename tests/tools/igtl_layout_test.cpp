// The images sonopipe-igtl makes of a result (tools/igtl/image_layout.h), packed by the bridge and
// unpacked by the Debian OpenIGTLink library as a client would: 3-D volumes with every axis of a
// different size, spacing and origin (a wrong index order or direction cannot pass), fast-time
// depth axes, the slow-time peak, index grids, and the results that are refused.
#include <igtlImageMessage.h>
#include <igtlMessageHeader.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "tests/support/test_support.h"
#include "tools/igtl/display_window.h"
#include "tools/igtl/image_layout.h"
#include "tools/igtl/message_encoding.h"

using namespace sonopipe;
using namespace sonopipe::igtl_bridge;

namespace {

v1::ResultHeader header_with(std::vector<v1::Axis> axes, v1::ElementType type = v1::ELEMENT_TYPE_FLOAT32) {
  v1::ResultHeader header;
  header.set_schema_version(1);
  header.set_pipeline("p");
  header.set_output("o");
  header.set_element_type(type);
  header.set_unit("um");
  header.set_acquisition_time_ns(1234567890123456789);
  for (auto& axis : axes) *header.add_axes() = axis;
  return header;
}

v1::Axis axis(const std::string& name, std::uint64_t size, double spacing = 0, const std::string& unit = "",
              double origin = 0) {
  v1::Axis a;
  a.set_name(name);
  a.set_size(size);
  a.set_spacing(spacing);
  a.set_unit(unit);
  a.set_origin(origin);
  return a;
}

// What a client holds after the library unpacked the bridge's message.
igtl::ImageMessage::Pointer unpacked(const MessagePointer& message) {
  igtl::MessageHeader::Pointer header = igtl::MessageHeader::New();
  header->InitPack();
  REQUIRE(message->bytes.size() > static_cast<std::size_t>(header->GetPackSize()));
  std::memcpy(header->GetPackPointer(), message->bytes.data(), header->GetPackSize());
  header->Unpack();
  igtl::ImageMessage::Pointer image = igtl::ImageMessage::New();
  image->SetMessageHeader(header);
  image->AllocatePack();
  REQUIRE(message->bytes.size() == header->GetPackSize() + static_cast<std::size_t>(image->GetPackBodySize()));
  std::memcpy(image->GetPackBodyPointer(), message->bytes.data() + header->GetPackSize(), image->GetPackBodySize());
  REQUIRE((image->Unpack(1) & igtl::MessageHeader::UNPACK_BODY));
  return image;
}

// Slicer's position of voxel (i, j, k): the IMAGE matrix carries the volume centre.
std::array<double, 3> slicer_ras_mm(igtl::ImageMessage* image, int i, int j, int k) {
  int size[3];
  float spacing[3];
  igtl::Matrix4x4 matrix;
  image->GetDimensions(size);
  image->GetSpacing(spacing);
  image->GetMatrix(matrix);
  const int index[3] = {i, j, k};
  std::array<double, 3> position{};
  for (int r = 0; r < 3; ++r) {
    position[r] = matrix[r][3];
    for (int d = 0; d < 3; ++d) position[r] += matrix[r][d] * spacing[d] * (index[d] - (size[d] - 1) / 2.0);
  }
  return position;
}

}  // namespace

TEST_CASE("a 3-D strain-like volume keeps each axis's size, spacing, origin and direction through the library",
          "[tools][igtl]") {
  // [elevational, lateral, axial, component] in metres, all sizes and spacings different.
  const auto elevation = axis("elevational", 3, 0.5e-3, "m", -0.5e-3);
  const auto lateral = axis("lateral", 5, 0.3e-3, "m", -0.6e-3);
  const auto axial = axis("axial", 7, 0.1e-3, "m", 10e-3);
  const auto header = header_with({elevation, lateral, axial, axis("component", 3)});
  std::vector<float> payload(3 * 5 * 7 * 3);
  auto value = [](int e, int l, int a, int c) { return float(1000 * e + 100 * l + 10 * a + c); };
  for (int e = 0; e < 3; ++e)
    for (int l = 0; l < 5; ++l)
      for (int a = 0; a < 7; ++a)
        for (int c = 0; c < 3; ++c) payload[((e * 5 + l) * 7 + a) * 3 + c] = value(e, l, a, c);
  const auto images = images_of_result(header, payload.data(), payload.size() * sizeof(float));
  REQUIRE(images.size() == 3);
  CHECK(images[0].key == "p/o/axial");
  CHECK(images[1].key == "p/o/lateral");
  CHECK(images[2].key == "p/o/elevational");
  for (int c = 0; c < 3; ++c) {
    INFO("component " << c);
    const auto image = unpacked(pack_float_image("volume", images[c]));
    int size[3];
    float spacing[3];
    image->GetDimensions(size);
    image->GetSpacing(spacing);
    CHECK(size[0] == 7);  // i = axial (fastest), j = lateral, k = elevational
    CHECK(size[1] == 5);
    CHECK(size[2] == 3);
    CHECK(spacing[0] == Approx(0.1).epsilon(1e-6));  // float32 in the message: 1e-6 relative
    CHECK(spacing[1] == Approx(0.3).epsilon(1e-6));
    CHECK(spacing[2] == Approx(0.5).epsilon(1e-6));
    CHECK(image->GetScalarType() == igtl::ImageMessage::TYPE_FLOAT32);
    // The pixels start 130 bytes into the message (58-byte header + 72-byte image header): copied
    // out, since reading them in place as float is a misaligned access (UBSan).
    std::vector<float> pixels(3 * 5 * 7);
    std::memcpy(pixels.data(), image->GetScalarPointer(), pixels.size() * sizeof(float));
    for (int k = 0; k < 3; ++k)
      for (int j = 0; j < 5; ++j)
        for (int i = 0; i < 7; ++i) {
          INFO("voxel " << i << " " << j << " " << k);
          REQUIRE(pixels[(k * 5 + j) * 7 + i] == value(k, j, i, c));
          // Expected: lateral -> -R, elevation -> +A, depth -> -S, metres -> mm; 1e-4 mm covers float32.
          const auto got = slicer_ras_mm(image, i, j, k);
          CHECK(got[0] == Approx(-(-0.6 + 0.3 * j)).margin(1e-4));
          CHECK(got[1] == Approx(-0.5 + 0.5 * k).margin(1e-4));
          CHECK(got[2] == Approx(-(10.0 + 0.1 * i)).margin(1e-4));
        }
    unsigned int seconds = 0, fraction = 0;
    image->GetTimeStamp(&seconds, &fraction);
    CHECK(seconds == 1234567890u);
  }
}

TEST_CASE("a fast-time depth axis in seconds becomes millimetres with the result's speed of sound", "[tools][igtl]") {
  auto header = header_with({axis("line", 4, 0.2e-3, "m"), axis("sample", 6, 1e-7, "s", 2e-6)});
  (*header.mutable_attributes())["speed_of_sound_m_per_s"] = "1500";
  std::vector<float> payload(24, 1.f);
  const auto image = images_of_result(header, payload.data(), payload.size() * sizeof(float)).at(0);
  CHECK(image.spacing_mm[0] == Approx(1e-7 * 1500 / 2 * 1000));  // two-way: c T / 2
  CHECK(image.corner_mm[2] == Approx(-2e-6 * 1500 / 2 * 1000));
  CHECK(image.spacing_mm[1] == Approx(0.2));
}

TEST_CASE("a slow-time axis is reduced to its finite peak, NaN where no value is finite", "[tools][igtl]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const auto header = header_with({axis("location", 2, 1e-3, "m"), axis("track", 3), axis("depth", 2, 1e-3, "m")});
  // [location][track][depth]
  const std::vector<float> payload{1, nan, 5, nan, -2, nan,   // location 0: depth 0 -> 5, depth 1 -> NaN
                                   -3, -1, -4, 2, -5, 0};     // location 1: depth 0 -> -3, depth 1 -> 2
  const auto images = images_of_result(header, payload.data(), payload.size() * sizeof(float));
  REQUIRE(images.size() == 1);
  CHECK(images[0].key == "p/o/peak");
  REQUIRE(images[0].values.size() == 4);
  CHECK(images[0].values[0] == 5);
  CHECK(std::isnan(images[0].values[1]));
  CHECK(images[0].values[2] == -3);
  CHECK(images[0].values[3] == 2);
}

TEST_CASE("axes without a physical spacing form a 1 mm index grid, a negative spacing flips the direction",
          "[tools][igtl]") {
  const auto header = header_with({axis("voxel", 3), axis("depth", 2, -1e-3, "m", 5e-3)}, v1::ELEMENT_TYPE_INT16);
  const std::vector<std::int16_t> payload{1, 2, 3, 4, 5, 6};
  const auto image = images_of_result(header, payload.data(), payload.size() * sizeof(std::int16_t)).at(0);
  CHECK(image.values == std::vector<float>{1, 2, 3, 4, 5, 6});
  CHECK(image.spacing_mm == Vector3{1, 1, 1});
  CHECK(image.direction[0] == Vector3{0, 0, 1});    // depth (-S) flipped by the negative spacing
  CHECK(image.direction[1] == Vector3{-1, 0, 0});   // "voxel": the first free direction after -S
  CHECK(image.corner_mm == Vector3{0, 0, -5});
}

TEST_CASE("results that cannot be shown are refused with the reason", "[tools][igtl]") {
  std::vector<float> payload(16);
  auto refused = [&](const v1::ResultHeader& header, std::size_t bytes) {
    try {
      images_of_result(header, payload.data(), bytes);
    } catch (const LayoutError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(refused(header_with({axis("a", 2), axis("b", 2), axis("c", 2), axis("d", 2)}), 64).find("image axes") !=
        std::string::npos);
  CHECK(refused(header_with({axis("depth", 4)}, v1::ELEMENT_TYPE_COMPLEX64), 32).find("ELEMENT_TYPE_COMPLEX64") !=
        std::string::npos);
  CHECK(refused(header_with({axis("depth", 4)}), 12).find("payload of 12 bytes") != std::string::npos);
  CHECK(refused(header_with({axis("track", 2), axis("time", 2)}), 16).find("more than one slow-time") !=
        std::string::npos);
  CHECK(refused(header_with({}), 0).find("no axes") != std::string::npos);
}

TEST_CASE("device names fit OpenIGTLink's 20 bytes and stay distinct and stable", "[tools][igtl]") {
  CHECK(device_name("strain/axial") == "strain/axial");
  const std::string a = device_name("strain2d/strain/axial"), b = device_name("strain2d/strain/lateral");
  CHECK(a.size() == kDeviceNameBytes);
  CHECK(b.size() == kDeviceNameBytes);
  CHECK(a != b);
  CHECK(a == device_name("strain2d/strain/axial"));
  CHECK(a.rfind("strain2d/strain", 0) == 0);
}

TEST_CASE("the uint8 variant windows linearly, automatic windows span the 0.5..99.5th percentiles", "[tools][igtl]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> values;
  for (int n = 0; n <= 1000; ++n) values.push_back(static_cast<float>(n));
  values.push_back(nan);
  const DisplayWindow window = window_for(values, std::nullopt);
  CHECK(window.low == 5);    // rank round(0.005 * 1000)
  CHECK(window.high == 995);
  const auto pixels = to_display_uint8(values, window);
  CHECK(pixels[0] == 0);
  CHECK(pixels[500] == 128);  // round(255 * 495 / 990) = round(127.5)
  CHECK(pixels[1000] == 255);
  CHECK(pixels.back() == 0);  // NaN
  CHECK(to_display_uint8({1, 2, 3}, {2, 2}) == std::vector<std::uint8_t>{0, 0, 0});  // flat window
  const DisplayWindow fixed{-1, 1};
  CHECK(window_for(values, fixed).low == -1);
}
