#include "tools/import/importer.h"

#include <unistd.h>

#include <filesystem>

#include "tools/common/recording.h"

namespace sonopipe::import {

ImportReport import_acquisition(const std::string& source_path, const std::string& output_path,
                                const formats::ImportOptions& options) {
  std::unique_ptr<formats::AcquisitionReader> reader = formats::open_acquisition(source_path, options);
  ImportReport report{.description = reader->description()};
  // Same folder as the target, so the final rename cannot cross file systems.
  const std::string temporary = output_path + ".partial-" + std::to_string(::getpid());
  try {
    {
      recording::Writer writer(temporary);
      writer.set_attribute("created_by", "sonopipe-import");
      writer.set_attribute("source_file", std::filesystem::path(source_path).filename().string());
      writer.set_attribute("source_description", report.description);
      for (const auto& [key, value] : reader->source_attributes()) writer.set_attribute(key, value);
      for (std::size_t i = 0; i < reader->frame_count(); ++i) {
        const recording::Frame frame = reader->read_frame(i);
        writer.append_frame(frame.meta, frame.payload.data(), frame.payload.size(), frame.received_ns);
        ++report.frames;
        report.bytes += frame.payload.size();
      }
      writer.flush();
    }
    std::filesystem::rename(temporary, output_path);
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove(temporary, ignored);
    throw;
  }
  return report;
}

}  // namespace sonopipe::import
