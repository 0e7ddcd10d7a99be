// Stage `convert`: scanner integers to floating point.
//
// int16 RF -> float32, same axes. int16 IQ carries I and Q interleaved along a last axis named
// "iq" of size 2; it becomes complex64 with that axis removed. float32/complex64 input is only
// rescaled. out = scale * in, so `scale` maps ADC counts to the unit the next stages expect.
#pragma once

#include "sdk/registry.h"

namespace sonopipe {

class ConvertStage : public Stage {
 public:
  static StageInfo info();
  explicit ConvertStage(const ParamValues& params);

  StagePlan configure(const FrameMeta& frame, const TensorSpec& input, Backend backend) override;
  bool run_cpu(const StageIo& io) override;
  bool run_cuda(const StageIo& io) override;

  // The CPU reference, also used by tests: out[i] = scale * in[i] for `count` scalars.
  static void convert_reference(const std::int16_t* in, float* out, std::size_t count, float scale);

 private:
  float scale_;
  std::size_t scalar_count_ = 0;   // scalars (not complex elements) per frame
  bool input_is_int16_ = true;
};

}  // namespace sonopipe
