#include "tools/run/input_source.h"

#include <vector>

namespace sonopipe::run {
namespace {

// A sonopipe recording seen through the AcquisitionReader interface.
class RecordingInput : public formats::AcquisitionReader {
 public:
  explicit RecordingInput(const std::string& path) : reader_(path), order_(reader_.frame_order()) {}

  std::string description() const override {
    return "sonopipe recording v" + std::to_string(recording::kFormatVersion);
  }
  std::size_t frame_count() const override { return order_.size(); }
  recording::Frame read_frame(std::size_t index) override {
    const recording::FrameRef& ref = order_.at(index);
    return reader_.read_frame(ref.stream_id, ref.index);
  }
  std::map<std::string, std::string> source_attributes() const override {
    return {{"format", "sonopipe-recording"}, {"created_by", reader_.attribute("created_by")}};
  }

 private:
  recording::Reader reader_;
  std::vector<recording::FrameRef> order_;
};

}  // namespace

std::unique_ptr<formats::AcquisitionReader> open_input(const std::string& path) {
  switch (formats::detect_format(path)) {
    case formats::FileFormat::uff:
    case formats::FileFormat::verasonics_mat: return formats::open_acquisition(path, {});
    case formats::FileFormat::sonopipe_recording:
    case formats::FileFormat::unknown: break;  // recording::Reader says what is wrong with it
  }
  return std::make_unique<RecordingInput>(path);
}

}  // namespace sonopipe::run
