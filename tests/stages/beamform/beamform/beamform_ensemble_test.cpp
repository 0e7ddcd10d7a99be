// The beamform stage on ensembles [frame, transmit, element, sample]: every frame is beamformed as
// the same acquisition alone would be, the frame axis (1 / PRF) reaches the output in either layout
// ([frame, lateral, axial] or the ARFI chain's [location, ensemble, sample]), baseband IQ is the
// carrier-phase image demodulated on the two-way time of its depth, and the CUDA kernels (the
// ensemble kernel, its per-pixel fallback, the per-pixel kernel) equal the CPU reference on random
// ensembles.
#include <complex>
#include <cstring>
#include <numbers>
#include <random>

#include "sdk/thread_pool.h"
#include "stages/beamform/beamform/beamform.h"
#include "stages/beamform/channel_conventions.h"
#include "tests/stages/common/stage_runner.h"
#include "tests/support/test_support.h"
#include "tools/sim/channel_sim.h"

#ifdef SONOPIPE_WITH_CUDA
#include "stages/beamform/beamform/beamform.cuh"
#endif

using namespace sonopipe;

namespace {

constexpr double kFramePeriodS = 1.0 / 5000;  // PRF 5 kHz

// An ensemble of `frames` acquisitions with the geometry of `config` (its transmits and elements)
// and fresh random samples: the channel frame's header with a leading frame axis.
struct Ensemble {
  FrameMeta meta;
  std::vector<float> data;  // [frame, transmit, element, sample] x (1 RF, 2 IQ)
  std::int64_t frames = 0, frame_floats = 0;
};

Ensemble random_ensemble(const sim::ChannelSimConfig& config, std::int64_t frames, std::mt19937_64& rng,
                         ThreadPool& pool) {
  const sim::ChannelSimResult geometry = sim::simulate_channel(config, &pool);  // no scatterers: zeros
  Ensemble e;
  e.meta = geometry.meta;
  e.frames = frames;
  e.meta.payload.axes.insert(e.meta.payload.axes.begin(),
                             Axis{std::string(channel::frame_axis), frames, kFramePeriodS, "s", 0.0});
  e.frame_floats = static_cast<std::int64_t>(geometry.bytes() / sizeof(float));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  e.data.resize(static_cast<std::size_t>(frames * e.frame_floats));
  for (float& v : e.data) v = normal(rng);
  return e;
}

// Frame f of the ensemble as a single acquisition (header without the frame axis).
FrameMeta single_meta(const Ensemble& e) {
  FrameMeta meta = e.meta;
  meta.payload.axes.erase(meta.payload.axes.begin());
  return meta;
}

sim::ChannelSimConfig array_config(bool iq, int elements) {
  sim::ChannelSimConfig c;
  c.iq = iq;
  c.elements = elements;
  c.sampling_frequency_hz = iq ? 2 * c.center_frequency_hz : 4 * c.center_frequency_hz;
  c.initial_time_s = 1e-6;
  c.samples = 700;
  return c;
}

BeamformParams small_grid() {
  BeamformParams p;
  p.window = beamform::Window::tukey;
  p.x_min_m = -5e-3, p.x_max_m = 5e-3, p.z_min_m = 8e-3, p.z_max_m = 30e-3;
  p.lateral_pixels = 13, p.depth_pixels = 29;
  return p;
}

}  // namespace

TEST_CASE("beamform: each frame of an ensemble is beamformed as that acquisition alone, in either layout",
          "[beamform][ensemble]") {
  ThreadPool pool(2);
  const auto seed = test::fresh_seed();
  std::mt19937_64 rng(seed);
  INFO("seed " << seed);
  for (const bool iq : {false, true})
    for (const auto axes : {BeamformParams::EnsembleAxes::frame_first, BeamformParams::EnsembleAxes::arfi}) {
      INFO("iq " << iq << " arfi " << (axes == BeamformParams::EnsembleAxes::arfi));
      sim::ChannelSimConfig config = array_config(iq, 16);
      config.transmits = {sim::ChannelTransmit::plane(-0.1), sim::ChannelTransmit::diverging(1e-3, -10e-3)};
      const Ensemble ensemble = random_ensemble(config, 3, rng, pool);
      BeamformParams params = small_grid();
      params.ensemble_axes = axes;
      BeamformStage stage(params);
      const auto all = test::run_stage_cpu(stage, ensemble.meta, ensemble.meta.payload, ensemble.data.data(), pool);
      const TensorSpec& out = all.plan.outputs[0].spec;
      REQUIRE(out.axes.size() == 3);
      const bool arfi = axes == BeamformParams::EnsembleAxes::arfi;
      const Axis& frame_axis = out.axes[arfi ? 1 : 0];
      CHECK(out.axes[0].name == (arfi ? "location" : "frame"));
      CHECK(out.axes[1].name == (arfi ? "ensemble" : "lateral"));
      CHECK(out.axes[2].name == (arfi ? "sample" : "axial"));
      CHECK(frame_axis.size == 3);
      CHECK(frame_axis.spacing == kFramePeriodS);  // the PRF travels with the frame axis
      CHECK(frame_axis.unit == "s");

      const FrameMeta single = single_meta(ensemble);
      const std::int64_t lateral = params.lateral_pixels, depth = params.depth_pixels, channels = iq ? 2 : 1;
      for (std::int64_t f = 0; f < ensemble.frames; ++f) {
        BeamformStage alone{small_grid()};
        const auto one = test::run_stage_cpu(alone, single, single.payload, ensemble.data.data() + f * ensemble.frame_floats,
                                             pool);
        std::int64_t mismatches = 0;
        for (std::int64_t i = 0; i < lateral; ++i)
          for (std::int64_t j = 0; j < depth; ++j)
            for (std::int64_t c = 0; c < channels; ++c) {
              const std::int64_t at = arfi ? (i * ensemble.frames + f) * depth + j : (f * lateral + i) * depth + j;
              // The same double sum in the same order: bit for bit.
              mismatches += all.as<float>()[at * channels + c] != one.as<float>()[(i * depth + j) * channels + c];
            }
        CHECK(mismatches == 0);
      }
    }
}

TEST_CASE("beamform: baseband IQ is the carrier-phase image times exp(-j 2 pi f_dem 2 z / c)", "[beamform][ensemble]") {
  ThreadPool pool(2);
  const auto seed = test::fresh_seed();
  std::mt19937_64 rng(seed);
  INFO("seed " << seed);
  sim::ChannelSimConfig config = array_config(true, 16);
  const Ensemble ensemble = random_ensemble(config, 2, rng, pool);
  BeamformParams carrier = small_grid(), baseband = small_grid();
  baseband.baseband = true;
  BeamformStage a(carrier), b(baseband);
  const auto x = test::run_stage_cpu(a, ensemble.meta, ensemble.meta.payload, ensemble.data.data(), pool);
  const auto y = test::run_stage_cpu(b, ensemble.meta, ensemble.meta.payload, ensemble.data.data(), pool);
  const auto* cx = x.as<std::complex<float>>();
  const auto* cy = y.as<std::complex<float>>();
  const std::int64_t depth = carrier.depth_pixels, n = x.plan.outputs[0].spec.element_count();
  const double dz = (carrier.z_max_m - carrier.z_min_m) / double(depth - 1);
  double scale = 0, worst = 0;
  for (std::int64_t k = 0; k < n; ++k) {
    const double z = carrier.z_min_m + dz * double(k % depth);
    const double phase = -2 * std::numbers::pi * config.center_frequency_hz * 2 * z / config.speed_of_sound_m_per_s;
    const std::complex<double> expected = std::complex<double>(cx[k]) * std::polar(1.0, phase);
    scale = std::max(scale, std::abs(expected));
    worst = std::max(worst, std::abs(expected - std::complex<double>(cy[k])));
  }
  // Both outputs are rounded to float once; the rotation itself is exact in double.
  CHECK(worst < 1e-6 * scale);
  CHECK(scale > 0);
}

TEST_CASE("beamform: an ensemble's description is checked", "[beamform][ensemble]") {
  ThreadPool pool(1);
  std::mt19937_64 rng(1);
  sim::ChannelSimConfig config = array_config(false, 8);
  const Ensemble ensemble = random_ensemble(config, 2, rng, pool);
  BeamformParams arfi = small_grid();
  arfi.ensemble_axes = BeamformParams::EnsembleAxes::arfi;
  BeamformStage arfi_stage(arfi);
  const FrameMeta single = single_meta(ensemble);
  CHECK_THROWS_WITH(arfi_stage.configure(single, single.payload, Backend::cpu),
                    Catch::Contains("'arfi' needs an ensemble [frame, transmit, element, sample]"));
  FrameMeta swapped = ensemble.meta;
  std::swap(swapped.payload.axes[0], swapped.payload.axes[1]);  // [transmit, frame, element, sample]
  BeamformStage stage{small_grid()};
  CHECK_THROWS_WITH(stage.configure(swapped, swapped.payload, Backend::cpu),
                    Catch::Contains("expected axes [transmit, element, sample] or [frame, transmit, element, sample]"));
  FrameMeta empty = ensemble.meta;
  empty.payload.axes[0].size = 0;
  CHECK_THROWS_WITH(stage.configure(empty, empty.payload, Backend::cpu), Catch::Contains("the frame axis is empty"));
}

#ifdef SONOPIPE_WITH_CUDA
// Which GPU path an ensemble case reaches (stages/beamform/beamform/beamform.cu): plane and diverging
// waves with linear interpolation on an image -> the ensemble kernel, which on a coarse grid (a
// block's window exceeds kTileSamples) sums each pixel and frame the per-pixel way, on a fine grid
// stages every frame's samples (`cut`: the recording ends inside the image, so deep blocks take the
// checked staging path, and F# 0 with 96 elements fills two chunks of the element table); cubic
// interpolation or a focused transmit -> the per-pixel kernel over every frame.
enum class Path { per_pixel, coarse, fine, fine_cut };

TEST_CASE("beamform CUDA equals the CPU reference on random ensembles", "[beamform][ensemble][cuda]") {
  SONOPIPE_REQUIRE_CUDA();
  ThreadPool pool(2);
  const auto seed = test::fresh_seed();
  std::mt19937_64 rng(seed);
  INFO("seed " << seed);
  for (const bool iq : {false, true})
    for (const Path path : {Path::per_pixel, Path::coarse, Path::fine, Path::fine_cut})
      for (const std::int64_t frames : {2, 17, 35}) {  // one partial block of frames; three blocks, the last partial
        const bool arfi = frames == 17;   // the ARFI layout, at baseband, on one size per path
        const bool sector = frames == 35 && path != Path::fine_cut;
        INFO("iq " << iq << " path " << int(path) << " frames " << frames << " arfi " << arfi << " sector " << sector);
        sim::ChannelSimConfig config = array_config(iq, path == Path::fine_cut ? 96 : 48);
        if (path == Path::per_pixel)
          config.transmits = {sim::ChannelTransmit::plane(0.05), sim::ChannelTransmit::focused(-1e-3, 18e-3, 8, 24)};
        else
          config.transmits = {sim::ChannelTransmit::plane(-0.08), sim::ChannelTransmit::diverging(1e-3, -10e-3)};
        if (path == Path::fine_cut) config.samples = iq ? 140 : 280;  // echoes of 10-12 mm end inside the image
        const Ensemble ensemble = random_ensemble(config, frames, rng, pool);
        BeamformParams params;
        params.window = beamform::Window::tukey;
        params.grid = sector ? BeamformParams::Grid::sector : BeamformParams::Grid::linear;
        params.ensemble_axes = arfi ? BeamformParams::EnsembleAxes::arfi : BeamformParams::EnsembleAxes::frame_first;
        params.baseband = arfi;
        params.x_min_m = -5e-3, params.x_max_m = 5e-3, params.z_min_m = 8e-3, params.z_max_m = 30e-3;
        if (path == Path::fine || path == Path::fine_cut) {
          params.x_min_m = -1.2e-3, params.x_max_m = 1.2e-3, params.z_min_m = 10e-3, params.z_max_m = 12e-3;
          params.angle_min_deg = -7, params.angle_max_deg = 7;  // sector: 0.44 degrees = 0.09 mm at 12 mm
          if (path == Path::fine_cut && iq) params.x_min_m = -2.4e-3, params.x_max_m = 2.4e-3;  // 64-entry rows
        }
        params.lateral_pixels = 33, params.depth_pixels = 41;
        if (path == Path::fine_cut) params.f_number = 0;
        if (path != Path::per_pixel) {
          // The case reaches the path it names: a full block's reach (its corner from its centre
          // pixel) fits the window on the fine grid only.
          const double lateral_step = sector ? params.z_max_m * (params.angle_max_deg - params.angle_min_deg) *
                                                   std::numbers::pi / 180 / (params.lateral_pixels - 1)
                                             : (params.x_max_m - params.x_min_m) / (params.lateral_pixels - 1);
          const double depth_step = (params.z_max_m - params.z_min_m) / (params.depth_pixels - 1);
          const double reach =
              std::hypot(cuda::kEnsembleLateral / 2 * lateral_step, cuda::kEnsembleDepth / 2 * depth_step);
          const float span = cuda::tile_half_span(float(reach), float(1 / config.speed_of_sound_m_per_s),
                                                  float(config.sampling_frequency_hz));
          CHECK((2 * span + 2 <= cuda::kTileSamples) == (path != Path::coarse));
          // Both row lengths of the ensemble kernel: IQ fine the narrow rows, RF fine and IQ
          // fine_cut the 64-entry ones.
          if (path == Path::fine) CHECK((2 * span + 2 <= cuda::kEnsembleNarrowRow) == iq);
          if (path == Path::fine_cut && iq) CHECK(2 * span + 2 > cuda::kEnsembleNarrowRow);
          if (path == Path::fine_cut) CHECK(config.elements > cuda::kTileChunk);
        }
        BeamformStage cpu(params), gpu(params);
        const auto a = test::run_stage_cpu(cpu, ensemble.meta, ensemble.meta.payload, ensemble.data.data(), pool);
        const auto b = test::run_stage_cuda(gpu, ensemble.meta, ensemble.meta.payload, ensemble.data.data());
        const std::size_t n = a.outputs[0].size() / sizeof(float);
        double scale = 0, worst = 0;
        std::size_t worst_at = 0;
        for (std::size_t k = 0; k < n; ++k) {
          scale = std::max(scale, double(std::abs(a.as<float>()[k])));
          const double error = std::abs(double(a.as<float>()[k]) - double(b.as<float>()[k]));
          if (!(error <= worst)) worst = error, worst_at = k;  // NaN (an unwritten output) counts as worst
        }
        INFO("worst at float " << worst_at << ": CPU " << a.as<float>()[worst_at] << ", GPU " << b.as<float>()[worst_at]);
        // As for single acquisitions (beamform_test.cpp): float delays move a sample position by
        // ~2e-4 samples, changing each of the ~48 x 2 terms of white-noise lines by ~2e-4 of a
        // sample; the ensemble kernel multiplies the transmit and receive phasors before the sum
        // (one float rounding, ~1e-7). Far below 1e-3 of the largest output.
        CHECK(worst < 1e-3 * scale);
        CHECK(scale > 0);
      }
}
#endif
