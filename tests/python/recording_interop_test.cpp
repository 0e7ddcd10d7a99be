// Recordings cross the language boundary both ways: a file written by the Python package
// (sonopipe.write_recording) reads back exactly through the C++ recording::Reader, and a file
// written by the C++ recording::Writer reads back exactly through sonopipe.read_recording.
// The content is fixed by formulas documented in tests/python/recording_interop.py, the Python
// half, which the tests run through the build's sonopipe-python launcher.
#include <complex>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "wire/wire.h"
#include "tests/support/test_support.h"
#include "tools/common/recording.h"

using namespace sonopipe;

namespace {

std::string temporary_file(const std::string& name) {
  const auto folder = std::filesystem::temp_directory_path() / ("sonopipe-interop-" + std::to_string(::getpid()));
  std::filesystem::create_directories(folder);
  return (folder / name).string();
}

int run_python_half(const std::string& mode, const std::string& path) {
  const std::string command = test::binary_path("tools/python/sonopipe-python") + " " +
                              test::source_path("tests/python/recording_interop.py") + " " + mode + " " + path;
  INFO(command);
  return std::system(command.c_str());
}

// The formulas of recording_interop.py.
std::vector<std::int16_t> iq_frame(int f) {
  std::vector<std::int16_t> values(2 * 3 * 5 * 2);
  for (std::size_t k = 0; k < values.size(); ++k)
    values[k] = static_cast<std::int16_t>(((f * 1000 + static_cast<long>(k) * 37) % 65536) - 32768);
  return values;
}

std::vector<std::complex<float>> complex_result(int r) {
  std::vector<std::complex<float>> values(12);
  for (std::size_t k = 0; k < values.size(); ++k)
    values[k] = {static_cast<float>(r + k / 8.0), static_cast<float>(-(k / 4.0))};
  return values;
}

std::vector<std::uint16_t> half_result_bits() {
  // k / 4 - 1 for k = 0..11 as IEEE binary16: -1, -0.75, ..., 1.75 (all exact in binary16)
  const std::vector<std::uint16_t> bits = {0xBC00, 0xBA00, 0xB800, 0xB400, 0x0000, 0x3400,
                                           0x3800, 0x3A00, 0x3C00, 0x3D00, 0x3E00, 0x3F00};
  return bits;
}

v1::ResultHeader result_header(const std::string& output, v1::ElementType type, std::uint64_t sequence,
                               const std::string& unit) {
  v1::ResultHeader header;
  header.set_schema_version(1);
  header.set_pipeline("p");
  header.set_output(output);
  header.set_input_sequence(sequence);
  header.set_element_type(type);
  header.set_unit(unit);
  for (auto [name, size] : {std::pair{"depth", 3}, std::pair{"location", 4}}) {
    v1::Axis* axis = header.add_axes();
    axis->set_name(name);
    axis->set_size(size);
  }
  return header;
}

}  // namespace

TEST_CASE("a recording written by the Python package reads back exactly in C++", "[python][recording]") {
  const std::string path = temporary_file("from_python.h5");
  REQUIRE(run_python_half("write", path) == 0);

  recording::Reader reader(path);
  CHECK(reader.attribute("simulator") == "interop");
  REQUIRE(reader.streams() == std::vector<std::uint32_t>{4});
  REQUIRE(reader.frame_count(4) == 3);
  for (int f = 0; f < 3; ++f) {
    const recording::Frame frame = reader.read_frame(4, static_cast<std::size_t>(f));
    CHECK(frame.meta.sequence == static_cast<std::uint64_t>(10 + f));
    CHECK(frame.meta.acquisition_time_ns == 1000 * f);
    CHECK(frame.received_ns == 7 + f);
    CHECK(frame.meta.kind == FrameKind::iq);
    CHECK(frame.meta.payload.shape_string() == "int16[location=2, ensemble=3, sample=5, iq=2]");
    CHECK(frame.meta.payload.axes[2].spacing == 1e-7);
    CHECK(frame.meta.attributes.at("probe") == "L7-4");
    const std::vector<std::int16_t> expected = iq_frame(f);
    REQUIRE(frame.payload.size() == expected.size() * sizeof(std::int16_t));
    CHECK(std::memcmp(frame.payload.data(), expected.data(), frame.payload.size()) == 0);
  }
  REQUIRE(reader.result_count("p", "c") == 2);
  for (int r = 0; r < 2; ++r) {
    const recording::Result result = reader.read_result("p", "c", static_cast<std::size_t>(r));
    CHECK(result.header.input_sequence() == static_cast<std::uint64_t>(20 + r));
    CHECK(result.header.unit() == "um");
    const auto expected = complex_result(r);
    REQUIRE(result.payload.size() == expected.size() * sizeof(std::complex<float>));
    CHECK(std::memcmp(result.payload.data(), expected.data(), result.payload.size()) == 0);
  }
  const recording::Result half = reader.read_result("p", "h", 0);
  const auto bits = half_result_bits();
  REQUIRE(half.payload.size() == bits.size() * 2);
  CHECK(std::memcmp(half.payload.data(), bits.data(), half.payload.size()) == 0);
  const recording::Truth truth = reader.read_truth("nested/x");
  CHECK(truth.values == std::vector<double>{0.5, 1.5, 2.5, 3.5, 4.5, 5.5});
  CHECK(truth.spec.unit == "mm");
  CHECK(truth.stream_id == 4);
  CHECK(truth.spec.shape_string() == "float64[a=2, b=3]");
  std::filesystem::remove(path);
}

TEST_CASE("a recording written in C++ reads back exactly in the Python package", "[python][recording]") {
  const std::string path = temporary_file("from_cpp.h5");
  {
    recording::Writer writer(path);
    writer.set_attribute("simulator", "interop");
    for (int f = 0; f < 3; ++f) {
      FrameMeta meta;
      meta.stream_id = 4;
      meta.sequence = static_cast<std::uint64_t>(10 + f);
      meta.acquisition_time_ns = 1000 * f;
      meta.kind = FrameKind::iq;
      meta.sampling_frequency_hz = 1e7;
      meta.demodulation_frequency_hz = 5e6;
      meta.attributes["probe"] = "L7-4";
      meta.payload.dtype = DType::int16;
      meta.payload.axes = {{.name = "location", .size = 2}, {.name = "ensemble", .size = 3},
                           {.name = "sample", .size = 5, .spacing = 1e-7, .unit = "s"}, {.name = "iq", .size = 2}};
      const auto values = iq_frame(f);
      writer.append_frame(meta, values.data(), values.size() * sizeof(std::int16_t), 7 + f);
    }
    for (int r = 0; r < 2; ++r) {
      const auto values = complex_result(r);
      writer.append_result(result_header("c", v1::ELEMENT_TYPE_COMPLEX64, static_cast<std::uint64_t>(20 + r), "um"),
                           values.data(), values.size() * sizeof(std::complex<float>));
    }
    const auto bits = half_result_bits();
    writer.append_result(result_header("h", v1::ELEMENT_TYPE_FLOAT16, 0, "1"), bits.data(), bits.size() * 2);
    TensorSpec spec{.dtype = DType::float64, .axes = {{.name = "a", .size = 2}, {.name = "b", .size = 3}}, .unit = "mm"};
    writer.write_truth("nested/x", spec, {0.5, 1.5, 2.5, 3.5, 4.5, 5.5}, 4);
  }
  CHECK(run_python_half("check", path) == 0);
  std::filesystem::remove(path);
}
