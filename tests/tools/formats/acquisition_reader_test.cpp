// The shared plumbing under sonopipe-replay and sonopipe-import: format detection by contents, a
// sonopipe recording seen through AcquisitionReader in the order replay always used (acquisition
// time over all streams), and sonopipe-import's all-or-nothing output. (The UFF reader is tested
// against an independent h5py writer in tests/python/test_uff.py.)
#include "tools/formats/acquisition_reader.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

#include "tests/support/test_support.h"
#include "tools/import/importer.h"

using namespace sonopipe;
namespace fs = std::filesystem;

namespace {

struct TempFolder {
  fs::path path;
  TempFolder() {
    path = fs::temp_directory_path() / ("sonopipe-formats-" + std::to_string(::getpid()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempFolder() { fs::remove_all(path); }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

FrameMeta meta_of(std::uint32_t stream, std::uint64_t sequence, std::int64_t time_ns) {
  FrameMeta meta;
  meta.stream_id = stream;
  meta.sequence = sequence;
  meta.acquisition_time_ns = time_ns;
  meta.kind = FrameKind::rf;
  meta.payload.dtype = DType::int16;
  meta.payload.axes = {Axis{"line", 3}, Axis{"sample", 5, 1e-7, "s"}};
  meta.vectors["tgc_db"] = {1.0, 2.0};
  return meta;
}

}  // namespace

TEST_CASE("a sonopipe recording reads through open_acquisition in acquisition-time order over its streams") {
  const std::uint64_t seed = test::fresh_seed();
  std::mt19937_64 rng(seed);
  TempFolder folder;
  const std::string path = folder.file("two_streams.h5");
  // Stream 7 and stream 2 interleaved in time; equal times keep stream order (2 before 7).
  const std::vector<std::tuple<std::uint32_t, std::uint64_t, std::int64_t>> written = {
      {7, 0, 100}, {2, 0, 150}, {7, 1, 200}, {2, 1, 200}, {7, 2, 310}};
  std::vector<std::vector<std::byte>> payloads;
  {
    recording::Writer writer(path);
    for (const auto& [stream, sequence, time] : written) {
      std::vector<std::byte> bytes(30);
      for (auto& b : bytes) b = static_cast<std::byte>(rng() & 0xff);
      writer.append_frame(meta_of(stream, sequence, time), bytes.data(), bytes.size());
      payloads.push_back(bytes);
    }
  }
  CHECK(formats::detect_format(path) == formats::FileFormat::sonopipe_recording);
  auto reader = formats::open_acquisition(path, {});
  CHECK(reader->description() == "sonopipe recording v1");
  REQUIRE(reader->frame_count() == written.size());
  const std::vector<std::size_t> expected_order = {0, 1, 3, 2, 4};  // times 100, 150, 200 (2), 200 (7), 310
  for (std::size_t i = 0; i < expected_order.size(); ++i) {
    const auto& [stream, sequence, time] = written[expected_order[i]];
    const formats::AcquisitionReader::FrameInfo info = reader->frame_info(i);
    CHECK(info.stream_id == stream);
    CHECK(info.acquisition_time_ns == time);
    const recording::Frame frame = reader->read_frame(i);
    CHECK(frame.meta.stream_id == stream);
    CHECK(frame.meta.sequence == sequence);
    CHECK(frame.meta.payload == meta_of(stream, sequence, time).payload);
    CHECK(*frame.meta.vector("tgc_db") == std::vector<double>{1.0, 2.0});
    CHECK(frame.payload == payloads[expected_order[i]]);
  }
  CHECK(reader->source_attributes().at("source_format") == "sonopipe");
}

TEST_CASE("files that are no known acquisition get one line naming the file, and import writes nothing") {
  TempFolder folder;
  const std::string text = folder.file("notes.uff");
  std::ofstream(text) << "not an HDF5 file\n";
  CHECK(formats::detect_format(text) == formats::FileFormat::unknown);
  const std::string output = folder.file("out.h5");
  try {
    import::import_acquisition(text, output, {});
    FAIL("import of a text file succeeded");
  } catch (const formats::FormatError& e) {
    const std::string message = e.what();
    CHECK(message.find(text + ": /: ") == 0);
    CHECK(message.find('\n') == std::string::npos);
  }
  CHECK(!fs::exists(output));
  CHECK(std::distance(fs::directory_iterator(folder.path), fs::directory_iterator()) == 1);  // the text file only

  // An HDF5 file cut short: named as such, not mistaken for an unknown format.
  const std::string recording_path = folder.file("cut.h5");
  {
    recording::Writer writer(recording_path);
    std::vector<std::byte> bytes(30 * 1000);
    for (int i = 0; i < 20; ++i) writer.append_frame(meta_of(1, i, i), bytes.data(), 30);
  }
  fs::resize_file(recording_path, fs::file_size(recording_path) / 2);
  try {
    import::import_acquisition(recording_path, output, {});
    FAIL("import of a truncated file succeeded");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()).find(recording_path + ": /: ") == 0);
    CHECK(std::string(e.what()).find("truncated") != std::string::npos);
  }
  CHECK(!fs::exists(output));
}

TEST_CASE("sonopipe-import of a sonopipe recording copies its frames and names the source") {
  TempFolder folder;
  const std::string source = folder.file("source.h5"), output = folder.file("copy.h5");
  {
    recording::Writer writer(source);
    std::vector<std::byte> bytes(30, std::byte{7});
    writer.append_frame(meta_of(4, 0, 10), bytes.data(), bytes.size());
    writer.append_frame(meta_of(4, 1, 20), bytes.data(), bytes.size());
  }
  const import::ImportReport report = import::import_acquisition(source, output, {});
  CHECK(report.frames == 2);
  CHECK(report.description == "sonopipe recording v1");
  recording::Reader copy(output);
  CHECK(copy.attribute("created_by") == "sonopipe-import");
  CHECK(copy.attribute("source_file") == "source.h5");
  CHECK(copy.attribute("source_format") == "sonopipe");
  CHECK(copy.frame_count(4) == 2);
  CHECK(copy.read_frame(4, 1).meta.acquisition_time_ns == 20);
}
