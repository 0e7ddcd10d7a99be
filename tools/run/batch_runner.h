// The core of sonopipe-run: one input recording through the configured pipelines, in process.
//
// The same path as the daemon, minus the sockets: every frame of the input, in replay order, is
// encoded and decoded through the wire header exactly as sonopipe-replay -> ingest does (so it is
// checked the same way: header, payload size, max_frame_bytes, non_finite), given to every
// pipeline whose match takes it, and each published result is written with the header the
// daemon's publisher would send. Executors are built fresh for every input (stateful stages start
// clean) and always block when full (lossless), so a run is deterministic and as fast as the
// backend allows.
//
// An input fails as a whole: a frame the daemon would refuse, a stage error or an unwritable
// result ends it with a one-line error, and its output is never left behind (it is written under a
// temporary name and renamed only when complete).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "daemon/backend_choice.h"
#include "daemon/config.h"

namespace sonopipe {
}

namespace sonopipe::run {

struct InputOutcome {
  std::string input, output;     // output: "" when the input failed
  bool ok = false;
  std::string error;             // one line when !ok
  std::size_t frames = 0;        // frames read from the input
  std::size_t unmatched = 0;     // frames no pipeline takes (counted, as the daemon's no_pipeline)
  std::size_t results = 0;       // results written
  double seconds = 0;            // open to rename
  double frames_per_s() const { return seconds > 0 ? static_cast<double>(frames) / seconds : 0.0; }
};

// Called on the feeding thread after each frame: (frames fed, frames in the input).
using ProgressCallback = std::function<void(std::size_t done, std::size_t total)>;
// Asked between frames; true abandons the input (as failed, "interrupted").
using StopCheck = std::function<bool()>;

class BatchRunner {
 public:
  // Pipelines are assembled as the daemon assembles them (daemon/pipeline_set.h), per input.
  BatchRunner(DaemonConfig config, BackendSelection backend);

  // Runs `input` and writes its results to `output` (created or replaced, atomically).
  InputOutcome run(const std::string& input, const std::string& output, const ProgressCallback& progress = {},
                   const StopCheck& stop = {});

 private:
  DaemonConfig config_;
  BackendSelection backend_;
};

// "<out_dir>/<file name of input without its last extension>.h5"
std::string output_path_for(const std::string& input, const std::string& out_dir);

}  // namespace sonopipe::run
