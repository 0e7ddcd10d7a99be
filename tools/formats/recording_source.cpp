// A sonopipe recording (tools/common/recording.h) as an AcquisitionReader: every stream's frames
// in acquisition-time order over all streams (recording::Reader::frame_order, as replay always
// sent them). ImportOptions do not apply: the frames already carry our header.
#include "tools/formats/recording_source.h"

#include <filesystem>

#include "tools/common/hdf5_util.h"
#include "tools/formats/isolated_reader.h"

namespace sonopipe::formats {

namespace {

namespace hdf5 = recording::hdf5;

constexpr char kRecordingFormatName[] = "sonopipe-recording";

class RecordingSource final : public AcquisitionReader {
 public:
  explicit RecordingSource(const std::string& path) : path_(path) {
    try {
      reader_ = std::make_unique<recording::Reader>(path);
      order_ = reader_->frame_order();
    } catch (const recording::RecordingError& e) {
      fail(path, "", e.what());
    }
  }

  std::string description() const override { return "sonopipe recording v" + reader_->attribute("format_version"); }
  std::size_t frame_count() const override { return order_.size(); }

  recording::Frame read_frame(std::size_t index) override {
    const recording::FrameRef& ref = order_.at(index);
    isolation::note_progress("/streams/" + std::to_string(ref.stream_id));  // a libhdf5 death names it
    try {
      return reader_->read_frame(ref.stream_id, ref.index);
    } catch (const recording::RecordingError& e) {
      fail(path_, "/streams/" + std::to_string(ref.stream_id), e.what());
    }
  }

  FrameInfo frame_info(std::size_t index) override {
    const recording::FrameRef& ref = order_.at(index);
    return {ref.stream_id, ref.acquisition_time_ns};
  }

  std::map<std::string, std::string> source_attributes() const override {
    return {{"source_format", "sonopipe"}, {"source_created_by", reader_->attribute("created_by")}};
  }

 private:
  std::string path_;
  std::unique_ptr<recording::Reader> reader_;
  std::vector<recording::FrameRef> order_;
};

}  // namespace

bool is_sonopipe_recording(const std::string& path) {
  hdf5::quiet_errors();
  if (!std::filesystem::is_regular_file(path) || H5Fis_hdf5(path.c_str()) <= 0) return false;
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file < 0) return false;
  hdf5::Id owned(file, H5Fclose);
  try {
    return hdf5::has_attribute(file, "format") && hdf5::read_string_attribute(file, "format") == kRecordingFormatName;
  } catch (const recording::RecordingError&) {
    return false;
  }
}

std::unique_ptr<AcquisitionReader> open_recording_source(const std::string& path, const ImportOptions&) {
  return std::make_unique<RecordingSource>(path);
}

}  // namespace sonopipe::formats
