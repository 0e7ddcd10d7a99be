// The ingest of a shm://<name> endpoint: the daemon creates the shared pool (lossless for
// `pattern: pull`, live for `pattern: sub`), registers it with CUDA once when a pipeline runs on
// the GPU, and hands each message to the pipelines in place: the payload pointer is the producer's
// slot (page aligned), so the CUDA path copies it to the device directly and CPU stages read it
// where it lies. The slot goes back to the producers when the last pipeline is done with the
// frame. Descriptors the pool refuses are counted as bad_slot_descriptor with their reason.
#pragma once

#include <array>
#include <atomic>
#include <memory>

#include "shm/layout.h"
#include "daemon/frame_admission.h"

namespace sonopipe {

namespace shm {
class Consumer;
}

class ShmIngest {
 public:
  // `register_with_cuda`: page-lock the pool for the GPU (a failure is logged; frames are then
  // staged through the executor's pinned buffers).
  ShmIngest(const DaemonConfig& config, FrameAdmission::Dispatch dispatch, RejectLog& rejects,
            bool register_with_cuda);
  ~ShmIngest();

  // Takes messages until `stop` is set (checked at least every 100 ms). Lossless messages not
  // taken by then stay in the pool, unacknowledged, for the next daemon on this name.
  void run(const std::atomic<bool>& stop);
  std::uint64_t received() const { return admission_.received(); }
  std::uint64_t missing() const { return admission_.missing(); }
  bool registered_with_cuda() const;

  // Pool slots for a config (ingest.slots, or enough for every pipeline's queue and slots + 2).
  static std::uint32_t pool_slots(const DaemonConfig& config);

  struct Source;  // the pool, its consumer and its CUDA registration, shared with frames in flight

 private:
  void report_refusals();
  std::shared_ptr<Source> source_;
  FrameAdmission admission_;
  std::array<std::uint64_t, shm::kDescriptorErrorCount> refused_seen_{};
};

}  // namespace sonopipe
