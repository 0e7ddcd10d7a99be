// Stage `ncc_track`: block-matching motion tracking between RF frame i - lag (reference) and
// frame i (target) by normalised cross-correlation, 2-D or 3-D, with the three NCC evaluations of
// peng2019 (standard eq. (1), Lewis FFT + sum-tables, Luo-Konofagou sum-tables) and sub-sample
// peak fitting. Every convention (axes, sign, guard, flags, outputs): stages/strain/ncc_track/ncc_track_params.h.
//
// Keeps the last `lag` normalised frames of each stream as state (keeps_state(); the executor
// keeps one state per stream id); the first `lag` frames of a stream only prime the stage (run
// returns false). `method: auto` is timed once per tracking geometry and remembered.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "sdk/registry.h"
#include "stages/strain/ncc_track/ncc_reference.h"
#include "stages/strain/ncc_track/ncc_track_params.h"

namespace sonopipe {

namespace cuda {
class NccTracker;
}

class NccTrackStage : public Stage {
 public:
  static StageInfo info();
  explicit NccTrackStage(const ParamValues& params);
  ~NccTrackStage() override;

  StagePlan configure(const FrameMeta& frame, const TensorSpec& input, Backend backend) override;
  bool run_cpu(const StageIo& io) override;
  bool run_cuda(const StageIo& io) override;
  bool keeps_state() const override { return true; }

  // The tracking geometry for an input shape, or StageError saying what does not fit.
  static ncc::Geometry geometry_for(const ParamValues& params, const TensorSpec& input);
  static ncc::Method parse_method(const std::string& name);

  const ncc::Geometry& geometry() const { return geometry_; }
  ncc::Method method_in_use() const { return method_; }  // auto resolved after configure
  std::size_t device_bytes() const { return device_bytes_; }  // CUDA scratch, peak
  std::uint64_t auto_timings() const { return auto_timings_; }  // times `auto` timed the methods

 private:
  // Stream bookkeeping shared by both backends: where this frame goes in the state ring and
  // whether a reference exists yet.
  struct Slots {
    int current;
    int reference;
    bool ready;
  };
  Slots advance(std::uint64_t frames_seen) const;
  std::vector<int> shape_key(Backend backend) const;
  void write_outputs_cpu(const StageIo& io) const;
  ncc::Method resolve_auto_cpu();
  ncc::Method resolve_auto_cuda();

  ParamValues params_;
  ncc::Method requested_method_;
  ncc::Method method_ = ncc::Method::standard;
  int lag_;
  ncc::Geometry geometry_{};
  Backend backend_ = Backend::cpu;
  std::size_t frame_elements_ = 0;
  float spacing_[ncc::kDims] = {1.f, 1.f, 1.f};  // metres per sample (1 when unknown: samples)
  // Per geometry and backend: the method `auto` picked (timing again would cost every change of
  // shape ~100 ms and a log line). Bounded: forgotten wholesale past kRememberedShapes.
  static constexpr std::size_t kRememberedShapes = 64;
  std::map<std::vector<int>, ncc::Method> auto_choices_;
  std::uint64_t auto_timings_ = 0;
  std::unique_ptr<ncc::CpuTracker> cpu_;
  std::unique_ptr<cuda::NccTracker> gpu_;
  std::size_t device_bytes_ = 0;
};

}  // namespace sonopipe
