#include "stages/doppler/mean_bmode/mean_bmode.h"

#include "sdk/thread_pool.h"
#include "stages/doppler/doppler_conventions.h"
#include "stages/doppler/slow_time.h"

#ifdef SONOPIPE_WITH_CUDA
#include "stages/doppler/mean_bmode/mean_bmode.cuh"
#endif

namespace sonopipe {
namespace {

constexpr const char* kName = "mean_bmode";

}  // namespace

StageInfo MeanBmodeStage::info() {
  return make_stage_info<MeanBmodeStage>(
      kName, "B-mode (dB) of the mean frame of an IQ ensemble [frame, lateral, axial]; passes the ensemble on");
}

void MeanBmodeStage::declare(ParamSpec<Params>& spec) {
  spec.choice(&Params::average, "average", {{"coherent", Params::Average::coherent}, {"incoherent", Params::Average::incoherent}},
              {.doc = "coherent: |mean IQ| (the mean frame); incoherent: sqrt(mean |IQ|^2)", .live = true});
}

StagePlan MeanBmodeStage::configure(const FrameMeta&, const TensorSpec& input, Backend backend) {
  const doppler::EnsembleShape e = doppler::ensemble_shape(kName, input, 1);
  shape_ = MeanBmodeShape{.frames = e.frames, .lateral = e.lateral, .axial = e.axial,
                          .coherent = params_.average == Params::Average::coherent};
  TensorSpec bmode{.dtype = DType::float32, .axes = {input.axes[1], input.axes[2]}, .unit = "dB"};
  bmode.attributes[doppler::kMeanOfFramesAttribute] = std::to_string(e.frames);
  if (backend == Backend::cuda) {
#ifndef SONOPIPE_WITH_CUDA
    throw StageError(std::string(kName) + ": this binary has no CUDA backend");
#endif
  }
  return StagePlan{.outputs = {{"bmode", bmode}}, .passes_input = true};
}

void MeanBmodeStage::mean_bmode(const std::complex<float>* ensemble, const MeanBmodeShape& s, float* bmode_db,
                                std::int64_t begin, std::int64_t end) {
  const std::int64_t pixels = s.pixels();
  for (std::int64_t p = begin; p < end; ++p) {
    std::complex<double> sum = 0;
    double sum_norm = 0;
    for (std::int64_t n = 0; n < s.frames; ++n) {
      const std::complex<double> x(ensemble[n * pixels + p]);
      sum += x;
      sum_norm += std::norm(x);
    }
    bmode_db[p] = static_cast<float>(mean_bmode_db(sum.real(), sum.imag(), sum_norm, s.frames, s.coherent));
  }
}

bool MeanBmodeStage::run_cpu(const StageIo& io) {
  const auto* ensemble = static_cast<const std::complex<float>*>(io.input);
  auto* bmode_db = static_cast<float*>(io.outputs[0]);
  const MeanBmodeShape& s = shape_;
  // Lateral lines split over the pool: each line's pixels are contiguous in every frame.
  auto lines = [&](std::size_t begin, std::size_t end) {
    mean_bmode(ensemble, s, bmode_db, static_cast<std::int64_t>(begin) * s.axial, static_cast<std::int64_t>(end) * s.axial);
  };
  if (io.pool) io.pool->parallel_for(static_cast<std::size_t>(s.lateral), lines);
  else lines(0, static_cast<std::size_t>(s.lateral));
  return true;
}

#ifdef SONOPIPE_WITH_CUDA
bool MeanBmodeStage::run_cuda(const StageIo& io) {
  cuda::mean_bmode(static_cast<const float2*>(io.input), shape_, static_cast<float*>(io.outputs[0]), io.stream);
  return true;
}
#else
bool MeanBmodeStage::run_cuda(const StageIo& io) { return Stage::run_cuda(io); }
#endif

}  // namespace sonopipe
