#include "stages/doppler/doppler/doppler.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "sdk/thread_pool.h"
#include "stages/doppler/doppler_conventions.h"
#include "stages/doppler/slow_time.h"

#ifdef SONOPIPE_WITH_CUDA
#include "stages/doppler/doppler/doppler.cuh"
#endif

namespace sonopipe {
namespace {

constexpr const char* kDopplerName = "doppler";

// The header attribute's text: shortest round-trip form of the double.
std::string number_text(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", value);
  return text;
}

}  // namespace

StageInfo DopplerStage::info() {
  return make_stage_info<DopplerStage>(
      kDopplerName, "power Doppler and Kasai axial velocity (m/s, + = away) of a filtered ensemble [frame, lateral, axial]");
}

void DopplerStage::declare(ParamSpec<Params>& spec) {
  spec.param(&Params::average_lateral, "average_lateral",
             {.min = 1, .max = 255, .unit = "pixels", .doc = "lateral size of the box R1 is summed over (odd; 1 = none)",
              .live = true});
  spec.param(&Params::average_axial, "average_axial",
             {.min = 1, .max = 255, .unit = "pixels", .doc = "axial size of the box R1 is summed over (odd; 1 = none)",
              .live = true});
  spec.param(&Params::power_threshold_db, "power_threshold_db",
             {.min = -300, .max = 0, .unit = "dB",
              .doc = "velocity NaN where power is this far below the frame's maximum; -300 = off", .live = true});
  spec.rule(&DopplerStage::check);
}

void DopplerStage::check(const Params& params) {
  if (params.average_lateral % 2 == 0) throw ParamError("average_lateral", "an odd box size (centred on its pixel)", 0);
  if (params.average_axial % 2 == 0) throw ParamError("average_axial", "an odd box size (centred on its pixel)", 0);
}

StagePlan DopplerStage::configure(const FrameMeta& frame, const TensorSpec& input, Backend backend) {
  auto fail = [&](const std::string& why) { throw StageError(std::string(kDopplerName) + ": " + why); };
  const doppler::EnsembleShape e = doppler::ensemble_shape(kDopplerName, input, 2);
  if (params_.average_lateral % 2 == 0 || params_.average_axial % 2 == 0)
    fail("average_lateral and average_axial must be odd (a box centred on its pixel)");
  const double period_s = doppler::frame_period_s(kDopplerName, frame, input);
  if (!(period_s > 0))
    fail("no PRF: give the frame vector '" + std::string(doppler::kEnsembleTimeVector) +
         "' or a frame axis spacing in s");
  const double f_c = frame.center_frequency_hz > 0 ? frame.center_frequency_hz : frame.demodulation_frequency_hz;
  if (!(f_c > 0)) fail("center_frequency_hz (or demodulation_frequency_hz) must be > 0");
  if (!(frame.speed_of_sound_m_per_s > 0)) fail("speed_of_sound_m_per_s must be > 0");
  DopplerShape s;
  s.frames = e.frames;
  s.lateral = e.lateral;
  s.axial = e.axial;
  s.half_lateral = params_.average_lateral / 2;
  s.half_axial = params_.average_axial / 2;
  s.velocity_per_radian = doppler::velocity_per_radian(frame.speed_of_sound_m_per_s, 1 / period_s, f_c);
  s.nyquist_velocity_m_per_s = doppler::nyquist_velocity_m_per_s(frame.speed_of_sound_m_per_s, 1 / period_s, f_c);
  s.power_threshold_db = params_.power_threshold_db;
  s.frame_period_s = period_s;
  shape_ = s;

  TensorSpec image{.dtype = DType::float32, .axes = {input.axes[1], input.axes[2]}};
  image.attributes[doppler::kNyquistAttribute] = number_text(s.nyquist_velocity_m_per_s);
  TensorSpec velocity = image, power = image, power_db = image;
  velocity.unit = "m/s";
  power_db.unit = "dB";
  StagePlan plan{.outputs = {{"velocity", velocity}, {"power", power}, {"power_db", power_db}}};
  plan.workspace_bytes = static_cast<std::size_t>(s.pixels()) * sizeof(std::complex<double>);  // CPU: R1 per pixel
  if (backend == Backend::cuda) {
#ifdef SONOPIPE_WITH_CUDA
    plan.workspace_bytes = cuda::doppler_workspace_bytes(s);
#else
    fail("this binary has no CUDA backend");
#endif
  }
  return plan;
}

void DopplerStage::estimate(const std::complex<float>* ensemble, const DopplerShape& s, float* velocity, float* power,
                            float* power_db, std::complex<double>* r1) {
  const std::int64_t pixels = s.pixels();
  double max_power = 0;
  for (std::int64_t p = 0; p < pixels; ++p) {
    double energy = 0;
    std::complex<double> lag_one = 0;
    for (std::int64_t n = 0; n < s.frames; ++n) {
      const std::complex<double> x(ensemble[n * pixels + p]);
      energy += std::norm(x);
      if (n + 1 < s.frames) lag_one += std::complex<double>(ensemble[(n + 1) * pixels + p]) * std::conj(x);
    }
    const double mean_power = energy / static_cast<double>(s.frames);
    power[p] = static_cast<float>(mean_power);
    power_db[p] = static_cast<float>(doppler::power_db(mean_power));
    max_power = std::max(max_power, mean_power);
    r1[p] = lag_one;
  }
  // -300 dB is "off": every pixel passes (the kernels use the same rule).
  const double threshold = s.power_threshold_db <= doppler::kPowerFloorDb ? 0.0 : max_power * std::pow(10.0, s.power_threshold_db / 10);
  for (std::int64_t i = 0; i < s.lateral; ++i)
    for (std::int64_t j = 0; j < s.axial; ++j) {
      std::complex<double> sum = 0;  // the box, clipped at the image edges
      for (std::int64_t a = std::max<std::int64_t>(0, i - s.half_lateral); a <= std::min(s.lateral - 1, i + s.half_lateral); ++a)
        for (std::int64_t b = std::max<std::int64_t>(0, j - s.half_axial); b <= std::min(s.axial - 1, j + s.half_axial); ++b)
          sum += r1[a * s.axial + b];
      const std::int64_t p = i * s.axial + j;
      velocity[p] = static_cast<float>(
          doppler::kasai_velocity(sum.real(), sum.imag(), s.velocity_per_radian, double(power[p]) >= threshold));
    }
}

void DopplerStage::check_frame_period(const StageIo& io) const {
  // The ensemble times are values, read per frame; the executor reconfigures only when their count
  // changes. A new PRF would leave the Nyquist velocity of the output headers stale: refused.
  const double period_s = doppler::frame_period_s(kDopplerName, io.frame, io.input_spec);
  if (!(std::abs(period_s - shape_.frame_period_s) <= 1e-9 * shape_.frame_period_s))
    throw StageError(std::string(kDopplerName) + ": the frame period changed from " + number_text(shape_.frame_period_s) +
                     " s to " + number_text(period_s) + " s without a new stream description");
}

bool DopplerStage::run_cpu(const StageIo& io) {
  check_frame_period(io);
  estimate(static_cast<const std::complex<float>*>(io.input), shape_, static_cast<float*>(io.outputs[0]),
           static_cast<float*>(io.outputs[1]), static_cast<float*>(io.outputs[2]),
           static_cast<std::complex<double>*>(io.workspace));
  return true;
}

#ifdef SONOPIPE_WITH_CUDA
bool DopplerStage::run_cuda(const StageIo& io) {
  check_frame_period(io);
  cuda::doppler(static_cast<const float2*>(io.input), shape_, static_cast<float*>(io.outputs[0]),
                static_cast<float*>(io.outputs[1]), static_cast<float*>(io.outputs[2]), io.workspace, io.stream);
  return true;
}
#else
bool DopplerStage::run_cuda(const StageIo& io) { return Stage::run_cuda(io); }
#endif

}  // namespace sonopipe
