#include "stages/common/convert/convert.h"

#include "sdk/thread_pool.h"

#ifdef SONOPIPE_WITH_CUDA
#include "stages/common/convert/convert.cuh"
#endif

namespace sonopipe {

StageInfo ConvertStage::info() {
  return {
      .name = "convert",
      .doc = "int16 IQ/RF to complex64/float32 (IQ interleaved on a last axis 'iq' of size 2), times scale",
      .params = {{.key = "scale", .type = ParamType::real, .default_value = "1.0", .unit = "1/count",
                  .doc = "multiplier applied to every value"}},
      .create = [](const ParamValues& p) { return std::make_unique<ConvertStage>(p); },
  };
}

ConvertStage::ConvertStage(const ParamValues& params)
    : scale_(static_cast<float>(params.real("scale"))) {}

StagePlan ConvertStage::configure(const FrameMeta& frame, const TensorSpec& input, Backend) {
  if (input.axes.empty()) throw StageError("convert: input has no axes");
  TensorSpec out = input;
  if (input.dtype == DType::int16) {
    input_is_int16_ = true;
    const bool interleaved_iq = input.axes.back().name == "iq";
    if (interleaved_iq) {
      if (input.axes.back().size != 2)
        throw StageError("convert: the 'iq' axis must have size 2, got " +
                         std::to_string(input.axes.back().size));
      out.axes.pop_back();
      out.dtype = DType::complex64;
    } else {
      if (frame.kind == FrameKind::iq || frame.kind == FrameKind::channel_iq)
        throw StageError("convert: int16 IQ needs a last axis named 'iq' of size 2 (I, Q)");
      out.dtype = DType::float32;
    }
  } else if (input.dtype == DType::float32 || input.dtype == DType::complex64) {
    input_is_int16_ = false;
  } else {
    throw StageError("convert: expected int16, float32 or complex64 input, got " +
                     std::string(dtype_name(input.dtype)));
  }
  if (out.axes.empty() || out.element_count() == 0)
    throw StageError("convert: the frame holds no sample (" + input.shape_string() + ")");
  scalar_count_ = static_cast<std::size_t>(input.element_count()) *
                  (input.dtype == DType::complex64 ? 2 : 1);
  return StagePlan{.outputs = {{"converted", out}}};
}

void ConvertStage::convert_reference(const std::int16_t* in, float* out, std::size_t count,
                                     float scale) {
  for (std::size_t i = 0; i < count; ++i) out[i] = scale * static_cast<float>(in[i]);
}

bool ConvertStage::run_cpu(const StageIo& io) {
  auto* out = static_cast<float*>(io.outputs[0]);
  const float scale = scale_;
  if (input_is_int16_) {
    const auto* in = static_cast<const std::int16_t*>(io.input);
    io.pool->parallel_for(scalar_count_, [&](std::size_t begin, std::size_t end) {
      convert_reference(in + begin, out + begin, end - begin, scale);
    }, 1 << 16);
  } else {
    const auto* in = static_cast<const float*>(io.input);
    io.pool->parallel_for(scalar_count_, [&](std::size_t begin, std::size_t end) {
      for (std::size_t i = begin; i < end; ++i) out[i] = scale * in[i];
    }, 1 << 16);
  }
  return true;
}

#ifdef SONOPIPE_WITH_CUDA
bool ConvertStage::run_cuda(const StageIo& io) {
  auto* out = static_cast<float*>(io.outputs[0]);
  if (input_is_int16_)
    cuda::convert_int16_to_float(static_cast<const std::int16_t*>(io.input), out, scalar_count_,
                                 scale_, io.stream);
  else
    cuda::scale_float(static_cast<const float*>(io.input), out, scalar_count_, scale_, io.stream);
  return true;
}
#else
bool ConvertStage::run_cuda(const StageIo& io) { return Stage::run_cuda(io); }
#endif

}  // namespace sonopipe
