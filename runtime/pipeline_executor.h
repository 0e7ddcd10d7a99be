// Runs one pipeline over several devices: one DeviceLane (slot ring, stage instances) per
// device, a queue in front with the pipeline's overflow policy, and a dispatcher that hands each
// frame to a device chosen by Placement (frame by frame for stateless pipelines; per stream, with
// affinity, when a stage keeps state). Results leave in the order the frames arrived, whatever
// device finishes first: each device reports its frames in its own order, and a frame's results
// are held until every earlier frame has left.
//
// With one device this is a thin wrapper: frames go straight to that device's lane, which
// keeps its own queue and overflow policy, and nothing is held or reordered.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/device_lane.h"
#include "runtime/frame_queue.h"
#include "runtime/placement.h"

namespace sonopipe {

struct DeviceStats {
  int device = 0;                 // CUDA device id (the lane number on the CPU backend)
  std::uint64_t processed = 0;
  double busy_ms_total = 0;       // H2D + stages + D2H (CUDA) or stages (CPU), summed over frames
  std::size_t queue_depth = 0;    // frames waiting in front of this device's slots
  std::size_t streams = 0;        // streams placed on it (stateful pipelines)
};

struct PipelineStats {
  LaneStats total;               // summed over devices (percentiles: of the first device)
  std::vector<DeviceStats> devices;
  std::uint64_t streams_forgotten = 0;
};

class PipelineExecutor {
 public:
  // `devices`: CUDA device ids (CPU backend: lanes on the one pool, for tests; the daemon uses
  // one). `make_stages` builds one set of stage instances per device. options.device_id is
  // ignored; the other options apply to every device's lane.
  PipelineExecutor(std::string name, std::vector<int> devices,
                      const std::function<std::vector<PipelineStage>()>& make_stages, ExecutorOptions options,
                      ExecutorCallbacks callbacks);
  ~PipelineExecutor();  // drains
  PipelineExecutor(const PipelineExecutor&) = delete;
  PipelineExecutor& operator=(const PipelineExecutor&) = delete;

  const std::string& name() const { return name_; }
  bool submit(InputFrame frame);  // as DeviceLane::submit
  void drain();                   // as DeviceLane::drain
  PipelineStats stats() const;
  // A live parameter change of stage `stage`: `make` builds one new instance per device (all built
  // before any lane changes, so a throwing factory changes nothing); each lane prepares its next
  // setup on this thread (instances configured, buffers planned: DeviceLane::prepare_stages), all
  // before any is committed, so a lane that refuses changes nothing either. The change takes effect
  // on the next frame the pipeline starts: with one device the next frame its lane starts; with
  // several the next frame the dispatcher hands to a device, whichever it is (frames are stated
  // the generation when dispatched), so in frame order no result of generation N-1 follows one of N.
  void update_stage(std::size_t stage, const std::function<std::unique_ptr<Stage>()>& make,
                    std::uint64_t generation);
  // Configures `instance` (a candidate for stage `stage`) on the CPU for the frames the pipeline
  // last configured, on the control's thread: throws the stage's StageError when it cannot take
  // them. Nothing when no frame has arrived yet. Later stages are not tried. Nothing on CUDA: there
  // update_stage() configures the new instances on every device for those frames before anything
  // changes (DeviceLane::prepare_stages) and throws as this would, so a try on the CPU first only
  // made the `set` slower (ncc_track, H100: 0.4-0.8 ms of a CPU tracker's tables).
  void check_stage(std::size_t stage, Stage& instance) const;
  const std::vector<int>& devices() const { return devices_; }
  bool stream_affinity() const { return placement_.stream_affinity(); }
  // The device lanes (tests and benchmarks read their traces).
  const DeviceLane& device_lane(std::size_t lane) const { return *lanes_[lane]; }

 private:
  struct HeldResult;
  struct Ticket;

  void dispatch_loop();
  void on_result(std::size_t lane, const PublishedResult& result);
  void on_frame_done(std::size_t lane);
  void release_finished_locked();

  const std::string name_;
  const std::vector<int> devices_;
  const Backend backend_;
  const ExecutorCallbacks callbacks_;
  mutable std::mutex placement_mutex_;  // the dispatcher places, stats() reads
  Placement placement_;
  std::size_t placements_logged_ = 0;  // dispatcher thread only
  std::unique_ptr<FrameQueue> queue_;  // several devices only
  std::vector<std::unique_ptr<DeviceLane>> lanes_;

  // Frame order across devices (several devices only): tickets in arrival order; each device's
  // tickets in its own order (its lane finishes frames in that order).
  std::mutex order_mutex_;
  std::deque<std::shared_ptr<Ticket>> tickets_;
  std::atomic<std::uint64_t> publish_errors_{0};  // publishing a held result threw
  std::vector<std::deque<std::shared_ptr<Ticket>>> lane_tickets_;
  std::atomic<std::uint64_t> accepted_{0};  // several devices: taken by the front queue
  std::mutex update_mutex_;                     // one live change at a time
  std::atomic<std::uint64_t> dispatch_generation_{0};  // several devices: stated on dispatched frames

  std::thread dispatcher_;
  std::once_flag drained_;
};

}  // namespace sonopipe
