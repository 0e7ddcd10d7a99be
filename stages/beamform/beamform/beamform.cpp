#include "stages/beamform/beamform/beamform.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <numbers>
#include <string>

#include "sdk/thread_pool.h"
#include "stages/beamform/channel_conventions.h"

#ifdef SONOPIPE_WITH_CUDA
#include <cuda_runtime_api.h>

#include "stages/beamform/beamform/beamform.cuh"
#include "stages/common/cuda_check.h"
#endif

namespace sonopipe {

namespace {

constexpr double kDegree = std::numbers::pi / 180.0;

using beamform::Transmit;
using beamform::Wave;

std::size_t align_up(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

// Host staging / device workspace: Transmit<float>[T], then element x, z, delay as float[E] each.
std::size_t geometry_bytes(std::int64_t transmits, std::int64_t elements) {
  return align_up(sizeof(Transmit<float>) * static_cast<std::size_t>(transmits) +
                  3 * sizeof(float) * static_cast<std::size_t>(elements));
}

// Copies a header vector into `out` (reusing its storage); an absent optional vector is all zeros.
void copy_vector(const FrameMeta& frame, std::string_view name, std::int64_t size, const char* per, bool required,
                 std::vector<double>& out) {
  const std::vector<double>* v = frame.vector(std::string(name));
  if (!v) {
    if (required)
      throw StageError("beamform: the frame has no vector '" + std::string(name) + "' (one value per " + per + ")");
    out.assign(static_cast<std::size_t>(size), 0.0);
    return;
  }
  if (static_cast<std::int64_t>(v->size()) != size)
    throw StageError("beamform: vector '" + std::string(name) + "' has " + std::to_string(v->size()) +
                     " values, expected one per " + per + " (" + std::to_string(size) + ")");
  out.assign(v->begin(), v->end());
}

}  // namespace

StageInfo BeamformStage::info() {
  return {
      .name = "beamform",
      .doc = "delay-and-sum of channel data (channel_rf/channel_iq [transmit, element, sample]) onto a linear or "
             "sector grid, compounded over transmits, or one line per focused transmit",
      .params =
          {
              {.key = "grid", .type = ParamType::choice, .default_value = "linear", .choices = {"linear", "sector"},
               .doc = "linear: x by z; sector: angle by radius from the origin"},
              {.key = "output", .type = ParamType::choice, .default_value = "image", .choices = {"image", "lines"},
               .doc = "image: every transmit summed; lines: one line per focused transmit at its focus x"},
              {.key = "x_min_m", .type = ParamType::real, .default_value = "-0.019", .unit = "m", .doc = "linear grid: first x"},
              {.key = "x_max_m", .type = ParamType::real, .default_value = "0.019", .unit = "m", .doc = "linear grid: last x"},
              {.key = "angle_min_deg", .type = ParamType::real, .default_value = "-30", .min = -89, .max = 89,
               .unit = "deg", .doc = "sector grid: first angle (positive towards +x)"},
              {.key = "angle_max_deg", .type = ParamType::real, .default_value = "30", .min = -89, .max = 89,
               .unit = "deg", .doc = "sector grid: last angle"},
              {.key = "z_min_m", .type = ParamType::real, .default_value = "0.005", .min = 0, .unit = "m",
               .doc = "first depth (sector: radius)"},
              {.key = "z_max_m", .type = ParamType::real, .default_value = "0.05", .min = 0, .unit = "m",
               .doc = "last depth (sector: radius)"},
              {.key = "lateral_pixels", .type = ParamType::integer, .default_value = "256", .min = 1, .max = 65536,
               .unit = "pixels", .doc = "pixels across (image)"},
              {.key = "depth_pixels", .type = ParamType::integer, .default_value = "1024", .min = 2, .max = 65536,
               .unit = "pixels", .doc = "pixels in depth"},
              {.key = "apodisation", .type = ParamType::choice, .default_value = "hann",
               .choices = {"boxcar", "hann", "tukey"}, .doc = "receive apodisation window"},
              {.key = "tukey_alpha", .type = ParamType::real, .default_value = "0.5", .min = 0.01, .max = 1,
               .doc = "Tukey taper fraction"},
              {.key = "f_number", .type = ParamType::real, .default_value = "1.5", .min = 0, .max = 100,
               .doc = "receive F-number (aperture = depth / F#); 0: the whole array"},
              {.key = "interpolation", .type = ParamType::choice, .default_value = "linear",
               .choices = {"linear", "cubic"}, .doc = "channel-sample interpolation (cubic: natural spline)"},
          },
      .create = [](const ParamValues& p) { return std::make_unique<BeamformStage>(p); },
  };
}

BeamformStage::BeamformStage(const ParamValues& p) {
  params_.grid = p.text("grid") == "sector" ? BeamformParams::Grid::sector : BeamformParams::Grid::linear;
  params_.output = p.text("output") == "lines" ? BeamformParams::Output::lines : BeamformParams::Output::image;
  params_.x_min_m = p.real("x_min_m");
  params_.x_max_m = p.real("x_max_m");
  params_.angle_min_deg = p.real("angle_min_deg");
  params_.angle_max_deg = p.real("angle_max_deg");
  params_.z_min_m = p.real("z_min_m");
  params_.z_max_m = p.real("z_max_m");
  params_.lateral_pixels = p.integer("lateral_pixels");
  params_.depth_pixels = p.integer("depth_pixels");
  const std::string& window = p.text("apodisation");
  params_.window = window == "boxcar" ? beamform::Window::boxcar
                   : window == "tukey" ? beamform::Window::tukey : beamform::Window::hann;
  params_.tukey_alpha = p.real("tukey_alpha");
  params_.f_number = p.real("f_number");
  params_.cubic = p.text("interpolation") == "cubic";
}

void BeamformStage::read_geometry(const FrameMeta& frame) {
  copy_vector(frame, channel::element_x_m, elements_, "element", true, element_x_);
  copy_vector(frame, channel::element_z_m, elements_, "element", false, element_z_);
  copy_vector(frame, channel::element_delay_s, elements_, "element", false, element_delay_);
  copy_vector(frame, channel::transmit_wavefront, transmits_, "transmit", true, wavefront_);
  copy_vector(frame, channel::transmit_angle_rad, transmits_, "transmit", false, angle_);
  copy_vector(frame, channel::transmit_source_x_m, transmits_, "transmit", false, source_x_);
  copy_vector(frame, channel::transmit_source_z_m, transmits_, "transmit", false, source_z_);
  copy_vector(frame, channel::transmit_delay_s, transmits_, "transmit", false, transmit_delay_);
  transmits_host_.resize(static_cast<std::size_t>(transmits_));
  for (std::size_t t = 0; t < transmits_host_.size(); ++t) {
    Wave wave;
    if (wavefront_[t] == channel::wavefront_plane) {
      wave = Wave::plane;
    } else if (wavefront_[t] == channel::wavefront_spherical) {
      if (source_z_[t] == 0.0)
        throw StageError("beamform: transmit " + std::to_string(t) + " is spherical with its source on the array (z = 0)");
      wave = source_z_[t] > 0 ? Wave::focused : Wave::diverging;
    } else {
      throw StageError("beamform: transmit " + std::to_string(t) + " has wavefront code " + std::to_string(wavefront_[t]) +
                       ", expected 0 (plane) or 1 (spherical)");
    }
    transmits_host_[t] = {wave, angle_[t], source_x_[t], source_z_[t], transmit_delay_[t]};
  }
}

StagePlan BeamformStage::configure(const FrameMeta& frame, const TensorSpec& input, Backend backend) {
  if (frame.kind != FrameKind::channel_rf && frame.kind != FrameKind::channel_iq)
    throw StageError("beamform: expected channel_rf or channel_iq frames, got " + std::string(frame_kind_name(frame.kind)));
  if (input.dtype != DType::float32 && input.dtype != DType::complex64)
    throw StageError("beamform: expected float32 (RF) or complex64 (IQ) samples, got " +
                     std::string(dtype_name(input.dtype)) + " (int16 goes through `convert` first)");
  if (input.axes.size() != 3 || input.axes[0].name != channel::transmit_axis ||
      input.axes[1].name != channel::element_axis || input.axes[2].name != channel::sample_axis)
    throw StageError("beamform: expected axes [transmit, element, sample], got " + input.shape_string());
  channels_ = input.dtype == DType::complex64 ? 2 : 1;
  if (channels_ == 2 && frame.demodulation_frequency_hz <= 0)
    throw StageError("beamform: complex64 channel data needs demodulation_frequency_hz > 0");
  if (frame.sampling_frequency_hz <= 0 || frame.speed_of_sound_m_per_s <= 0)
    throw StageError("beamform: the frame needs sampling_frequency_hz and speed_of_sound_m_per_s > 0");
  transmits_ = input.axes[0].size;
  elements_ = input.axes[1].size;
  samples_ = input.axes[2].size;
  if (samples_ < 2) throw StageError("beamform: the sample axis needs at least 2 samples");
  sampling_frequency_hz_ = frame.sampling_frequency_hz;
  sample_origin_s_ = input.axes[2].origin;
  demodulation_frequency_hz_ = channels_ == 2 ? frame.demodulation_frequency_hz : 0.0;
  inverse_c_ = 1.0 / frame.speed_of_sound_m_per_s;
  read_geometry(frame);  // validates the vectors' names and sizes; values are read again per frame

  const BeamformParams& p = params_;
  if (p.z_max_m <= p.z_min_m) throw StageError("beamform: z_max_m must exceed z_min_m");
  const bool lines = p.output == BeamformParams::Output::lines;
  if (lines) {
    for (const auto& t : transmits_host_)
      if (t.wave == Wave::plane)
        throw StageError("beamform: output 'lines' needs spherical (focused) transmits; this frame has plane waves");
  } else if (p.grid == BeamformParams::Grid::linear ? p.x_max_m < p.x_min_m : p.angle_max_deg < p.angle_min_deg) {
    throw StageError("beamform: the lateral extent of the grid is reversed (max < min)");
  }
  lateral_ = lines ? transmits_ : p.lateral_pixels;
  depth_ = p.depth_pixels;

  TensorSpec out;
  out.dtype = input.dtype;
  const double dz = (p.z_max_m - p.z_min_m) / static_cast<double>(depth_ - 1);
  if (lines) {
    out.axes.push_back({"line", lateral_});
  } else if (p.grid == BeamformParams::Grid::linear) {
    const double dx = lateral_ > 1 ? (p.x_max_m - p.x_min_m) / static_cast<double>(lateral_ - 1) : 0.0;
    out.axes.push_back({"lateral", lateral_, dx, "m", p.x_min_m});
  } else {
    const double da = lateral_ > 1 ? (p.angle_max_deg - p.angle_min_deg) * kDegree / static_cast<double>(lateral_ - 1) : 0.0;
    out.axes.push_back({"angle", lateral_, da, "rad", p.angle_min_deg * kDegree});
  }
  out.axes.push_back({p.grid == BeamformParams::Grid::sector && !lines ? "radius" : "axial", depth_, dz, "m", p.z_min_m});

  StagePlan plan{.outputs = {{"beamformed", out}}};
  const std::size_t lines_count = static_cast<std::size_t>(transmits_ * elements_);
  const std::size_t real_size = backend == Backend::cuda ? sizeof(float) : sizeof(double);
  const std::size_t spline_bytes =
      p.cubic ? align_up(lines_count * static_cast<std::size_t>(samples_) * (channels_ + 1) * real_size) : 0;
  if (backend == Backend::cuda) {
    plan.host_staging_bytes = geometry_bytes(transmits_, elements_);
    plan.workspace_bytes = plan.host_staging_bytes + spline_bytes;
  } else {
    plan.workspace_bytes = spline_bytes;
  }
  return plan;
}

void BeamformStage::pixel_position(std::int64_t i, std::int64_t j, double& x, double& z) const {
  const BeamformParams& p = params_;
  const double depth = p.z_min_m + (p.z_max_m - p.z_min_m) * static_cast<double>(j) / static_cast<double>(depth_ - 1);
  const double across = lateral_ > 1 ? static_cast<double>(i) / static_cast<double>(lateral_ - 1) : 0.0;
  if (p.output == BeamformParams::Output::lines) {
    x = transmits_host_[static_cast<std::size_t>(i)].source_x_m;
    z = depth;
  } else if (p.grid == BeamformParams::Grid::linear) {
    x = p.x_min_m + (p.x_max_m - p.x_min_m) * across;
    z = depth;
  } else {
    const double angle = (p.angle_min_deg + (p.angle_max_deg - p.angle_min_deg) * across) * kDegree;
    x = depth * std::sin(angle);
    z = depth * std::cos(angle);
  }
}

namespace {

template <int C>
void beamform_cpu(const BeamformStage& stage, const beamform::DasSetup<double>& setup, const float* input,
                  double* spline_m, double* spline_c, std::int64_t transmits, std::int64_t lateral,
                  std::int64_t depth, bool lines, float* out, ThreadPool& pool) {
  using V = spline::Vec<double, C>;
  const std::int64_t elements = setup.elements, samples = setup.samples;
  V* m = reinterpret_cast<V*>(spline_m);
  if (setup.cubic) {
    pool.parallel_for(static_cast<std::size_t>(transmits * elements), [&](std::size_t begin, std::size_t end) {
      for (std::size_t line = begin; line < end; ++line)
        beamform::spline_line<double, C>(input + line * samples * C, samples, m + line * samples,
                                         spline_c + line * samples);
    });
  }
  pool.parallel_for(static_cast<std::size_t>(lateral * depth), [&](std::size_t begin, std::size_t end) {
    for (std::size_t pixel = begin; pixel < end; ++pixel) {
      const std::int64_t i = static_cast<std::int64_t>(pixel) / depth, j = static_cast<std::int64_t>(pixel) % depth;
      double x, z;
      stage.pixel_position(i, j, x, z);
      const int t_begin = lines ? static_cast<int>(i) : 0;
      const int t_end = lines ? static_cast<int>(i) + 1 : static_cast<int>(transmits);
      const V value = beamform::das_pixel<double, C>(setup, x, z, t_begin, t_end, [&](int t, int e) {
        const std::size_t line = static_cast<std::size_t>(t) * elements + e;
        return beamform::Line<double, C>{input + line * samples * C, setup.cubic ? m + line * samples : nullptr};
      });
      for (int c = 0; c < C; ++c) out[pixel * C + c] = static_cast<float>(value.v[c]);
    }
  }, 64);
}

}  // namespace

bool BeamformStage::run_cpu(const StageIo& io) {
  read_geometry(io.frame);
  beamform::DasSetup<double> setup{
      .transmits = transmits_host_.data(), .element_x_m = element_x_.data(), .element_z_m = element_z_.data(),
      .element_delay_s = element_delay_.data(), .elements = static_cast<int>(elements_), .samples = samples_,
      .inverse_c = inverse_c_, .sampling_frequency_hz = sampling_frequency_hz_, .sample_origin_s = sample_origin_s_,
      .demodulation_frequency_hz = demodulation_frequency_hz_, .window = params_.window,
      .tukey_alpha = params_.tukey_alpha, .f_number = params_.f_number, .cubic = params_.cubic};
  auto* spline_m = static_cast<double*>(io.workspace);
  double* spline_c = spline_m ? spline_m + transmits_ * elements_ * samples_ * channels_ : nullptr;
  const bool lines = params_.output == BeamformParams::Output::lines;
  const auto* input = static_cast<const float*>(io.input);
  auto* out = static_cast<float*>(io.outputs[0]);
  if (channels_ == 1)
    beamform_cpu<1>(*this, setup, input, spline_m, spline_c, transmits_, lateral_, depth_, lines, out, *io.pool);
  else
    beamform_cpu<2>(*this, setup, input, spline_m, spline_c, transmits_, lateral_, depth_, lines, out, *io.pool);
  return true;
}

#ifdef SONOPIPE_WITH_CUDA
bool BeamformStage::run_cuda(const StageIo& io) {
  read_geometry(io.frame);
  // This frame's geometry as floats: pinned staging -> device workspace, on the stream.
  auto* transmits = static_cast<beamform::Transmit<float>*>(io.host_staging);
  for (std::int64_t t = 0; t < transmits_; ++t) {
    const auto& h = transmits_host_[static_cast<std::size_t>(t)];
    transmits[t] = {h.wave, float(h.angle_rad), float(h.source_x_m), float(h.source_z_m), float(h.delay_s)};
  }
  auto* floats = reinterpret_cast<float*>(transmits + transmits_);
  for (std::int64_t e = 0; e < elements_; ++e) {
    floats[e] = float(element_x_[e]);
    floats[elements_ + e] = float(element_z_[e]);
    floats[2 * elements_ + e] = float(element_delay_[e]);
  }
  const std::size_t geometry = geometry_bytes(transmits_, elements_);
  SONOPIPE_CUDA_CHECK(cudaMemcpyAsync(io.workspace, io.host_staging, geometry, cudaMemcpyHostToDevice, io.stream));
  auto* device_transmits = static_cast<const beamform::Transmit<float>*>(io.workspace);
  const auto* device_floats = reinterpret_cast<const float*>(device_transmits + transmits_);
  float* spline_m = params_.cubic ? reinterpret_cast<float*>(static_cast<std::byte*>(io.workspace) + geometry) : nullptr;
  float* spline_c = spline_m ? spline_m + transmits_ * elements_ * samples_ * channels_ : nullptr;

  const BeamformParams& p = params_;
  cuda::BeamformLaunch launch{
      .input = static_cast<const float*>(io.input),
      .channels = channels_,
      .transmits = transmits_,
      .setup = {.transmits = device_transmits, .element_x_m = device_floats, .element_z_m = device_floats + elements_,
                .element_delay_s = device_floats + 2 * elements_, .elements = static_cast<int>(elements_),
                .samples = samples_, .inverse_c = float(inverse_c_), .sampling_frequency_hz = float(sampling_frequency_hz_),
                .sample_origin_s = float(sample_origin_s_), .demodulation_frequency_hz = float(demodulation_frequency_hz_),
                .window = p.window, .tukey_alpha = float(p.tukey_alpha), .f_number = float(p.f_number), .cubic = p.cubic},
      .spline_m = spline_m,
      .spline_c = spline_c,
      .grid = p.output == BeamformParams::Output::lines ? cuda::BeamformLaunch::Grid::lines
              : p.grid == BeamformParams::Grid::sector  ? cuda::BeamformLaunch::Grid::sector
                                                        : cuda::BeamformLaunch::Grid::linear,
      .lateral = lateral_,
      .depth = depth_,
      .lateral_min = float(p.grid == BeamformParams::Grid::sector ? p.angle_min_deg * kDegree : p.x_min_m),
      .lateral_step = float(lateral_ > 1 ? (p.grid == BeamformParams::Grid::sector
                                                ? (p.angle_max_deg - p.angle_min_deg) * kDegree
                                                : p.x_max_m - p.x_min_m) / double(lateral_ - 1)
                                         : 0.0),
      .depth_min_m = float(p.z_min_m),
      .depth_step_m = float((p.z_max_m - p.z_min_m) / double(depth_ - 1)),
      .output = io.outputs[0],
      .elements_ascending = std::is_sorted(element_x_.begin(), element_x_.end()),
      .focused_transmits = std::any_of(transmits_host_.begin(), transmits_host_.end(),
                                       [](const auto& t) { return t.wave == beamform::Wave::focused; }),
  };
  cuda::beamform(launch, io.stream);
  return true;
}
#else
bool BeamformStage::run_cuda(const StageIo& io) { return Stage::run_cuda(io); }
#endif

}  // namespace sonopipe
