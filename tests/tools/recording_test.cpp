#include "tools/common/recording.h"

#include <google/protobuf/util/message_differencer.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "wire/wire.h"
#include "tests/support/test_support.h"
#include "tools/common/hdf5_util.h"

using namespace sonopipe;
namespace fs = std::filesystem;

namespace {

// A fresh file path in the build tree's temp folder, removed by the test's end.
struct TempFile {
  std::string path;
  explicit TempFile(const std::string& name) {
    fs::create_directories(fs::temp_directory_path() / "sonopipe-tests");
    path = (fs::temp_directory_path() / "sonopipe-tests" /
            (name + "-" + std::to_string(::getpid()) + ".h5")).string();
    fs::remove(path);
  }
  ~TempFile() { if (!std::getenv("SONOPIPE_KEEP_TEST_FILES")) fs::remove(path); }
};

std::vector<std::byte> random_bytes(std::size_t count, std::mt19937_64& rng) {
  // Any bit pattern must survive, including NaN payloads in float data: compare bytes, not values.
  std::vector<std::byte> bytes(count);
  for (auto& b : bytes) b = static_cast<std::byte>(rng() & 0xff);
  return bytes;
}

FrameMeta make_meta(std::uint32_t stream_id, FrameKind kind, DType dtype, std::vector<Axis> axes) {
  FrameMeta meta;
  meta.stream_id = stream_id;
  meta.kind = kind;
  meta.payload.dtype = dtype;
  meta.payload.axes = std::move(axes);
  meta.sampling_frequency_hz = 400e6 / 45;
  meta.center_frequency_hz = 5.33e6;
  meta.demodulation_frequency_hz = kind == FrameKind::iq ? 5.0e6 : 0.0;
  meta.attributes = {{"probe", "VF7-3"}, {"sequence", "arfi"}};
  meta.vectors = {{"f_dem_hz", {5.0e6, 4.9e6, 4.8e6}}};
  return meta;
}

void check_same_meta(const FrameMeta& a, const FrameMeta& b) {
  CHECK(a.stream_id == b.stream_id);
  CHECK(a.sequence == b.sequence);
  CHECK(a.acquisition_time_ns == b.acquisition_time_ns);
  CHECK(a.kind == b.kind);
  CHECK(a.payload == b.payload);
  CHECK(a.sampling_frequency_hz == b.sampling_frequency_hz);
  CHECK(a.center_frequency_hz == b.center_frequency_hz);
  CHECK(a.demodulation_frequency_hz == b.demodulation_frequency_hz);
  CHECK(a.speed_of_sound_m_per_s == b.speed_of_sound_m_per_s);
  CHECK(a.attributes == b.attributes);
  CHECK(a.vectors == b.vectors);
}

}  // namespace

TEST_CASE("recording round trip keeps frames, results and truth byte-exact", "[recording]") {
  const std::uint64_t seed = test::fresh_seed();
  std::mt19937_64 rng(seed);
  TempFile file("roundtrip");

  // Three streams of different element types, frames interleaved in time across streams.
  struct Written {
    FrameMeta meta;
    std::vector<std::byte> payload;
    std::int64_t received_ns;
  };
  std::vector<Written> frames;
  const std::vector<FrameMeta> templates = {
      make_meta(1, FrameKind::iq, DType::int16, {{"location", 4, 1e-4, "m"}, {"sample", 7, 1.1e-4, "m", 0.02}, {"iq", 2}}),
      make_meta(2, FrameKind::iq, DType::complex64, {{"ensemble", 3}, {"sample", 5, 2.5e-8, "s"}}),
      make_meta(7, FrameKind::rf, DType::float32, {{"line", 6, 3e-4, "m"}, {"sample", 9, 2.5e-8, "s"}}),
      make_meta(9, FrameKind::rf, DType::float16, {{"sample", 11}}),
  };
  std::vector<v1::ResultHeader> result_headers;
  std::vector<std::vector<std::byte>> result_payloads;
  TensorSpec truth_spec{.dtype = DType::float64,
                        .axes = {{"frame", 3}, {"depth", 4, 1e-4, "m", 0.01}},
                        .unit = "um"};
  std::vector<double> truth_values(12);
  std::normal_distribution<double> normal(0.0, 5.0);
  for (double& v : truth_values) v = normal(rng);

  {
    recording::Writer writer(file.path);
    writer.set_attribute("created_by", "recording_test");
    writer.set_attribute("seed", std::to_string(seed));
    for (int f = 0; f < 3; ++f) {
      for (const FrameMeta& t : templates) {
        Written w{t, random_bytes(t.payload.byte_size(), rng), static_cast<std::int64_t>(rng() >> 2)};
        w.meta.sequence = static_cast<std::uint64_t>(f);
        // Stream 2 runs one time step ahead of stream 1: frame_order must interleave by time.
        w.meta.acquisition_time_ns = 1'000'000'000LL + f * 10'000'000LL + t.stream_id * 1'000;
        writer.append_frame(w.meta, w.payload.data(), w.payload.size(), w.received_ns);
        frames.push_back(std::move(w));
      }
      v1::ResultHeader header;
      header.set_schema_version(wire::kSchemaVersion);
      header.set_pipeline("arfi");
      header.set_output("displacement");
      header.set_stream_id(1);
      header.set_input_sequence(static_cast<std::uint64_t>(f));
      header.set_acquisition_time_ns(1'000'000'000LL + f * 10'000'000LL);
      header.set_element_type(v1::ELEMENT_TYPE_FLOAT32);
      auto* axis = header.add_axes();
      axis->set_name("depth");
      axis->set_size(5);
      axis->set_spacing(1e-4);
      axis->set_unit("m");
      header.set_unit("um");
      header.mutable_timing()->set_received_ns(42 + f);
      header.mutable_timing()->set_published_ns(4242 + f);
      header.set_backend("cpu");
      (*header.mutable_attributes())["note"] = "x";
      result_headers.push_back(header);
      result_payloads.push_back(random_bytes(5 * 4, rng));
      writer.append_result(header, result_payloads.back().data(), result_payloads.back().size());
    }
    writer.write_truth("displacement_um", truth_spec, truth_values, 1);
    writer.write_truth("nested/strain", TensorSpec{.dtype = DType::float64, .axes = {{"depth", 2}}, .unit = "1"},
                       {0.25, -0.5});
  }

  recording::Reader reader(file.path);
  CHECK(reader.attribute("format") == "sonopipe-recording");
  CHECK(reader.attribute("format_version") == "1");
  CHECK(reader.attribute("created_by") == "recording_test");
  CHECK(reader.attribute("seed") == std::to_string(seed));
  CHECK(reader.attribute("absent").empty());
  CHECK(reader.streams() == std::vector<std::uint32_t>{1, 2, 7, 9});

  for (const Written& w : frames) {
    const std::size_t index = w.meta.sequence;
    REQUIRE(reader.frame_count(w.meta.stream_id) == 3);
    recording::Frame back = reader.read_frame(w.meta.stream_id, index);
    check_same_meta(back.meta, w.meta);
    CHECK(back.received_ns == w.received_ns);
    REQUIRE(back.payload.size() == w.payload.size());
    CHECK(std::memcmp(back.payload.data(), w.payload.data(), w.payload.size()) == 0);
  }

  const std::vector<recording::FrameRef> order = reader.frame_order();
  REQUIRE(order.size() == frames.size());
  for (std::size_t i = 0; i < order.size(); ++i) {
    // Written in time order already: the order must be the write order.
    CHECK(order[i].stream_id == frames[i].meta.stream_id);
    CHECK(order[i].index == frames[i].meta.sequence);
    CHECK(order[i].acquisition_time_ns == frames[i].meta.acquisition_time_ns);
  }

  REQUIRE(reader.result_outputs() == std::vector<std::pair<std::string, std::string>>{{"arfi", "displacement"}});
  REQUIRE(reader.result_count("arfi", "displacement") == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    recording::Result back = reader.read_result("arfi", "displacement", i);
    CHECK(google::protobuf::util::MessageDifferencer::Equals(back.header, result_headers[i]));
    CHECK(back.payload == result_payloads[i]);
  }

  CHECK(reader.truth_names() == std::vector<std::string>{"displacement_um", "nested/strain"});
  recording::Truth truth = reader.read_truth("displacement_um");
  CHECK(truth.spec == truth_spec);
  CHECK(truth.values == truth_values);
  CHECK(truth.stream_id == 1);
  recording::Truth nested = reader.read_truth("nested/strain");
  CHECK(nested.values == std::vector<double>{0.25, -0.5});
  CHECK(nested.spec.unit == "1");
  CHECK(nested.stream_id == -1);
}

TEST_CASE("recording refuses a frame whose shape differs from its stream's", "[recording]") {
  TempFile file("shape");
  recording::Writer writer(file.path);
  FrameMeta meta = make_meta(3, FrameKind::rf, DType::float32, {{"sample", 8}});
  std::vector<std::byte> payload(32);
  writer.append_frame(meta, payload.data(), payload.size());
  meta.payload.axes[0].size = 9;
  std::vector<std::byte> bigger(36);
  CHECK_THROWS_AS(writer.append_frame(meta, bigger.data(), bigger.size()), recording::RecordingError);
  meta.payload.axes[0].size = 8;
  CHECK_THROWS_WITH(writer.append_frame(meta, payload.data(), 31), Catch::Contains("needs 32"));
  // The stream is still usable after the refusals.
  writer.append_frame(meta, payload.data(), payload.size());
  writer.flush();
  recording::Reader reader(file.path);
  CHECK(reader.frame_count(3) == 2);
}

TEST_CASE("recording reader explains files that are not recordings", "[recording]") {
  TempFile missing("missing");
  CHECK_THROWS_WITH(recording::Reader(missing.path), Catch::Contains("does not exist"));

  TempFile text("text");
  std::ofstream(text.path) << "not hdf5\n";
  CHECK_THROWS_WITH(recording::Reader(text.path), Catch::Contains("not an HDF5 file"));

  TempFile empty("empty");
  { recording::Writer writer(empty.path); }
  recording::Reader reader(empty.path);  // a recording with nothing in it is valid
  CHECK(reader.streams().empty());
  CHECK(reader.frame_order().empty());
  CHECK(reader.result_outputs().empty());
  CHECK(reader.truth_names().empty());
  CHECK_THROWS_WITH(reader.read_frame(0, 0), Catch::Contains("has no /streams/0"));
}

TEST_CASE("recording refuses group names HDF5 would misread and truth of the wrong size", "[recording]") {
  TempFile file("names");
  recording::Writer writer(file.path);
  v1::ResultHeader header;
  header.set_pipeline("a/b");
  header.set_output("out");
  header.set_element_type(v1::ELEMENT_TYPE_UINT8);
  header.add_axes()->set_size(1);
  std::byte one{1};
  CHECK_THROWS_WITH(writer.append_result(header, &one, 1), Catch::Contains("contains '/'"));
  CHECK_THROWS_WITH(writer.write_truth("t", TensorSpec{.axes = {{"x", 3}}}, {1.0, 2.0}),
                    Catch::Contains("needs 3"));
  CHECK_THROWS_AS(writer.set_attribute("format", "x"), recording::RecordingError);
}

TEST_CASE("recording reader refuses a dataset larger than its file could hold, before allocating it",
          "[recording][fuzz]") {
  // A hostile or damaged file, made with the HDF5 C API: a valid recording header, a truth array and a
  // stream's time index that declare 2^40 elements but were never written (HDF5 keeps them in a few
  // hundred bytes). The reader once allocated 8 TiB for them and died in std::bad_alloc.
  TempFile file("huge_shape");
  {
    recording::hdf5::Id handle(recording::hdf5::check(H5Fcreate(file.path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), "H5Fcreate"),
                    H5Fclose);
    recording::hdf5::write_string_attribute(handle.get(), "format", "sonopipe-recording");
    recording::hdf5::write_int64_attribute(handle.get(), "format_version", 1);
    const hsize_t huge = hsize_t{1} << 40;
    recording::hdf5::Id space(recording::hdf5::check(H5Screate_simple(1, &huge, nullptr), "H5Screate_simple"), H5Sclose);
    recording::hdf5::Id links(recording::hdf5::check(H5Pcreate(H5P_LINK_CREATE), "H5Pcreate"), H5Pclose);
    H5Pset_create_intermediate_group(links.get(), 1);
    for (const char* path : {"/truth/displacement", "/streams/1/acquisition_time_ns"})
      recording::hdf5::Id(recording::hdf5::check(H5Dcreate2(handle.get(), path, H5T_IEEE_F64LE, space.get(), links.get(), H5P_DEFAULT,
                                      H5P_DEFAULT), path), H5Dclose);
  }
  CHECK(fs::file_size(file.path) < 100000);
  recording::Reader reader(file.path);
  REQUIRE(reader.truth_names() == std::vector<std::string>{"displacement"});
  CHECK_THROWS_WITH(reader.read_truth("displacement"), Catch::Contains("more than its file of"));
  CHECK_THROWS_WITH(reader.frame_order(), Catch::Contains("/streams/1/acquisition_time_ns declares"));
}
