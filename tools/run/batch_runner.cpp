#include "tools/run/batch_runner.h"

#include <chrono>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <vector>

#include "daemon/pipeline_set.h"
#include "daemon/ingest.h"
#include "daemon/publisher.h"
#include "wire/wire.h"
#include "tools/common/clock.h"
#include "tools/common/recording.h"
#include "tools/formats/acquisition_reader.h"

namespace sonopipe::run {
namespace {

// An input's failure: its message is the one line the summary shows.
struct InputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string describe_frame(std::size_t index, const FrameMeta& meta) {
  return "frame " + std::to_string(index) + " (stream " + std::to_string(meta.stream_id) + ", sequence " +
         std::to_string(meta.sequence) + ")";
}

// The frame as the daemon's ingest would hand it over: the header goes through its wire encoding
// and is decoded and checked as ingest does (replay sends frame_header_from_meta, ingest decodes).
InputFrame admit(recording::Frame&& frame, std::size_t index, const DaemonConfig& config) {
  const std::string header = wire::frame_header_from_meta(frame.meta).SerializeAsString();
  InputFrame input;
  try {
    input.meta = wire::decode_frame(header.data(), header.size(), frame.payload.size(), config.max_frame_bytes);
  } catch (const wire::WireError& e) {
    throw InputError(describe_frame(index, frame.meta) + ": " + std::string(wire::reject_reason_name(e.reason)) +
                     ": " + e.what());
  }
  if (config.non_finite == NonFinitePolicy::reject &&
      !payload_is_finite(input.meta.payload.dtype, frame.payload.data(), frame.payload.size()))
    throw InputError(describe_frame(index, input.meta) + ": payload holds NaN or Inf (non_finite: reject)");
  auto bytes = std::make_shared<std::vector<std::byte>>(std::move(frame.payload));
  input.payload_bytes = bytes->size();
  input.payload = std::shared_ptr<const std::byte>(bytes, bytes->data());
  input.received_ns = tools::wall_clock_ns();
  return input;
}

// The pipelines of one input and the file their results go to.
class InputRun {
 public:
  InputRun(const DaemonConfig& config, const BackendSelection& backend, const std::string& temporary)
      : writer_(temporary) {
    writer_.set_attribute("created_by", "sonopipe-run");
    ExecutorCallbacks callbacks{
        .publish = [this](const PublishedResult& result) { write(result); },
        .stage_error =
            [this](const FrameMeta& frame, const std::string& pipeline, const std::string& why) {
              fail("pipeline " + pipeline + ", stream " + std::to_string(frame.stream_id) + " sequence " +
                   std::to_string(frame.sequence) + ": " + why);
            },
    };
    // The daemon's assembly, except that a batch never drops: the queues always block.
    pipelines_.emplace(config, backend, callbacks, PipelineSetOptions{.overflow = OverflowPolicy::block, .log = false});
  }

  void set_attribute(const std::string& key, const std::string& value) { writer_.set_attribute(key, value); }

  // As the daemon's shared ingest: every matching pipeline gets the frame. False when none takes it.
  bool dispatch(InputFrame&& frame) { return pipelines_->dispatch(std::move(frame)); }

  // Finishes every queued frame and closes the file; throws InputError when anything failed.
  std::size_t finish() {
    pipelines_->drain();
    std::lock_guard lock(mutex_);
    if (error_) throw InputError(*error_);
    writer_.flush();
    return results_;
  }

  void abandon() { pipelines_->drain(); }

  std::optional<std::string> error() {
    std::lock_guard lock(mutex_);
    return error_;
  }

 private:
  // Completion threads of every pipeline call this; the writer is not thread-safe.
  void write(const PublishedResult& result) {
    v1::ResultHeader header = result_header(result);
    header.mutable_timing()->set_published_ns(tools::wall_clock_ns());
    std::lock_guard lock(mutex_);
    if (error_) return;
    try {
      writer_.append_result(header, result.data, result.bytes);
      ++results_;
    } catch (const std::exception& e) {
      error_ = "result " + result.pipeline + "/" + result.output + " of stream " +
               std::to_string(result.frame.stream_id) + " sequence " + std::to_string(result.frame.sequence) +
               ": " + e.what();
    }
  }

  void fail(const std::string& why) {
    std::lock_guard lock(mutex_);
    if (!error_) error_ = why;
  }

  recording::Writer writer_;
  std::mutex mutex_;
  std::optional<std::string> error_;
  std::size_t results_ = 0;
  std::optional<PipelineSet> pipelines_;  // last: drained (its callbacks write above) before the rest goes
};

// Removes the temporary file unless it was renamed into place.
struct TemporaryFile {
  std::filesystem::path path;
  bool kept = false;
  ~TemporaryFile() {
    if (kept) return;
    std::error_code ignored;
    std::filesystem::remove(path, ignored);
  }
};

}  // namespace

std::string output_path_for(const std::string& input, const std::string& out_dir) {
  return (std::filesystem::path(out_dir) / std::filesystem::path(input).stem()).string() + ".h5";
}

BatchRunner::BatchRunner(DaemonConfig config, BackendSelection backend)
    : config_(std::move(config)), backend_(std::move(backend)) {}

InputOutcome BatchRunner::run(const std::string& input, const std::string& output, const ProgressCallback& progress,
                              const StopCheck& stop) {
  InputOutcome outcome{.input = input};
  const auto start = std::chrono::steady_clock::now();
  const std::filesystem::path final_path(output);
  // Hidden, beside the output (a rename within one folder is atomic); a retry truncates it.
  TemporaryFile temporary{final_path.parent_path() / ("." + final_path.filename().string() + ".partial")};
  try {
    std::unique_ptr<formats::AcquisitionReader> reader = formats::open_acquisition(input, {});
    const std::size_t total = reader->frame_count();
    if (total == 0) throw InputError("holds no frames");
    std::optional<InputRun> pipelines(std::in_place, config_, backend_, temporary.path.string());
    pipelines->set_attribute("input", std::filesystem::path(input).filename().string());
    pipelines->set_attribute("input_format", reader->description());
    pipelines->set_attribute("config", config_.source);
    pipelines->set_attribute("backend", std::string(backend_name(backend_.backend)));
    try {
      for (std::size_t index = 0; index < total; ++index) {
        if (stop && stop()) throw InputError("interrupted");
        if (auto error = pipelines->error()) throw InputError(*error);  // stop feeding a failed input early
        if (!pipelines->dispatch(admit(reader->read_frame(index), index, config_))) ++outcome.unmatched;
        ++outcome.frames;
        if (progress) progress(index + 1, total);
      }
    } catch (...) {
      pipelines->abandon();
      throw;
    }
    if (outcome.unmatched == outcome.frames)
      throw InputError("no pipeline of " + config_.source + " takes any of its " + std::to_string(total) + " frames");
    outcome.results = pipelines->finish();
    pipelines.reset();  // closes the file before it is renamed
    std::filesystem::rename(temporary.path, final_path);
    temporary.kept = true;
    outcome.output = output;
    outcome.ok = true;
  } catch (const std::exception& e) {
    outcome.error = e.what();
    // Messages from the readers name the file already; ours get it prefixed.
    if (outcome.error.find(input) == std::string::npos) outcome.error = input + ": " + outcome.error;
  }
  outcome.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return outcome;
}

}  // namespace sonopipe::run
