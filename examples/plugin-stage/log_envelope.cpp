// log_envelope: B-mode log compression as a stage plugin (docs/adding-a-stage.md follows this file).
//   out = max(20 log10(|in| / reference), floor_db)   in dB, float32, same axes as the input
// Input complex64 (IQ: |z| is the envelope) or float32 (|x|). CPU path only; a CUDA path would be a
// run_cuda() override launching a kernel on io.stream (see the stages under stages/ in sonopipe).
#include <algorithm>
#include <cmath>
#include <complex>
#include <memory>
#include <string>

#include "sdk/plugin.h"
#include "sdk/thread_pool.h"

namespace {

using namespace sonopipe;

class LogEnvelopeStage final : public Stage {
 public:
  static StageInfo info() {
    return {
        .name = "log_envelope",
        .doc = "B-mode log compression: max(20 log10(|in| / reference), floor_db), float32 dB (plugin example)",
        .params = {{.key = "reference", .type = ParamType::real, .default_value = "1.0", .min = 1e-30,
                    .unit = "input units", .doc = "input magnitude shown as 0 dB"},
                   {.key = "floor_db", .type = ParamType::real, .default_value = "-60", .min = -400, .max = 0,
                    .unit = "dB", .doc = "lowest value written (dynamic range)"}},
        .create = [](const ParamValues& p) { return std::make_unique<LogEnvelopeStage>(p); },
    };
  }

  explicit LogEnvelopeStage(const ParamValues& p) : reference_(p.real("reference")), floor_db_(p.real("floor_db")) {}

  StagePlan configure(const FrameMeta&, const TensorSpec& input, Backend) override {
    if (input.dtype != DType::complex64 && input.dtype != DType::float32)
      throw StageError("log_envelope: expected complex64 or float32 input, got " + std::string(dtype_name(input.dtype)));
    complex_ = input.dtype == DType::complex64;
    count_ = static_cast<std::size_t>(input.element_count());
    TensorSpec out = input;
    out.dtype = DType::float32;
    out.unit = "dB";
    return StagePlan{.outputs = {{"log_envelope", out}}};
  }

  bool run_cpu(const StageIo& io) override {
    auto* out = static_cast<float*>(io.outputs[0]);
    const auto* in_complex = static_cast<const std::complex<float>*>(io.input);
    const auto* in_real = static_cast<const float*>(io.input);
    io.pool->parallel_for(count_, [&](std::size_t begin, std::size_t end) {
      for (std::size_t i = begin; i < end; ++i) {
        const double magnitude = complex_ ? std::abs(std::complex<double>(in_complex[i])) : std::abs(double(in_real[i]));
        const double db = magnitude > 0 ? 20.0 * std::log10(magnitude / reference_) : floor_db_;
        out[i] = static_cast<float>(std::max(db, floor_db_));
      }
    }, 4096);
    return true;
  }

 private:
  double reference_, floor_db_;
  bool complex_ = true;
  std::size_t count_ = 0;
};

}  // namespace

SONOPIPE_STAGE_PLUGIN(registry) { registry.add(LogEnvelopeStage::info()); }
