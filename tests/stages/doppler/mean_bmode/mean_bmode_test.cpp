// The `mean_bmode` stage: the B-mode of a simulated ensemble's mean frame against a direct
// computation, the incoherent mean against the power Doppler of the unfiltered ensemble, refusals,
// the Doppler chain with the stage in place (the next stage reads the ensemble, not the B-mode),
// and the CUDA kernel against the CPU reference on fresh random ensembles.
#include "stages/doppler/mean_bmode/mean_bmode.h"

#include <cmath>
#include <complex>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <random>

#include "runtime/device_lane.h"
#include "stages/doppler/doppler_conventions.h"
#include "tests/stages/doppler/flow_chain.h"
#include "tests/support/test_support.h"

using namespace sonopipe;

namespace {

// A small flow phantom ensemble (tools/sim/flow_sim.h): 16 frames, 32 x 48 pixels.
sim::FlowIqResult small_phantom(std::uint64_t seed) {
  sim::FlowSimConfig c;
  c.seed = seed;
  c.frames = 16;
  c.lateral_pixels = 32;
  c.axial_pixels = 48;
  c.snr_db = 20;
  return sim::simulate_flow_iq(c);
}

MeanBmodeParams with_average(MeanBmodeParams::Average average) {
  MeanBmodeParams p;
  p.average = average;
  return p;
}

// 20 log10 |mean| (coherent) or 10 log10 mean |x|^2, in long double, straight from the definition.
double expected_db(const std::vector<std::complex<float>>& x, std::int64_t frames, std::int64_t pixel, bool coherent) {
  const std::int64_t pixels = static_cast<std::int64_t>(x.size()) / frames;
  std::complex<long double> sum = 0;
  long double energy = 0;
  for (std::int64_t n = 0; n < frames; ++n) {
    const std::complex<long double> v(x[n * pixels + pixel].real(), x[n * pixels + pixel].imag());
    sum += v;
    energy += std::norm(v);
  }
  const long double value = coherent ? 20 * std::log10(std::abs(sum) / frames) : 10 * std::log10(energy / frames);
  return static_cast<double>(value);
}

// What a DeviceLane published, by output name (the last frame's).
struct Published {
  std::mutex mutex;
  std::map<std::string, std::vector<float>> images;
  std::map<std::string, TensorSpec> specs;
  std::vector<std::string> errors;
  ExecutorCallbacks callbacks() {
    return {.publish =
                [this](const PublishedResult& r) {
                  const auto* begin = static_cast<const float*>(r.data);
                  std::lock_guard lock(mutex);
                  images[r.output].assign(begin, begin + r.bytes / sizeof(float));
                  specs[r.output] = r.spec;
                },
            .stage_error = [this](const FrameMeta&, const std::string&, const std::string& why) {
              std::lock_guard lock(mutex);
              errors.push_back(why);
            }};
  }
};

InputFrame input_frame(const FrameMeta& meta, const std::vector<std::complex<float>>& iq) {
  auto bytes = std::make_shared<std::vector<std::complex<float>>>(iq);
  InputFrame frame;
  frame.meta = meta;
  frame.payload = std::shared_ptr<const std::byte>(bytes, reinterpret_cast<const std::byte*>(bytes->data()));
  frame.payload_bytes = iq.size() * sizeof(iq[0]);
  frame.received_ns = 1;
  return frame;
}

// The chain mean_bmode (published) -> clutter_filter -> doppler, as config/doppler.yaml has it.
std::vector<PipelineStage> doppler_chain_with_bmode(const ClutterFilterParams& filter, const DopplerParams& estimator) {
  std::vector<PipelineStage> stages;
  stages.push_back({.label = "mean_bmode", .stage = std::make_unique<MeanBmodeStage>(MeanBmodeParams{}), .publish = true});
  stages.push_back({.label = "clutter_filter", .stage = std::make_unique<ClutterFilterStage>(filter)});
  stages.push_back({.label = "doppler", .stage = std::make_unique<DopplerStage>(estimator), .publish = true});
  return stages;
}

}  // namespace

TEST_CASE("mean_bmode: the coherent B-mode of a simulated ensemble is 20 log10 of its mean frame's magnitude",
          "[doppler][mean_bmode]") {
  const sim::FlowIqResult flow = small_phantom(test::fresh_seed());
  const FrameMeta& meta = flow.meta;
  ThreadPool pool(2);
  MeanBmodeStage stage(MeanBmodeParams{});
  const test::StageRun run = test::run_stage_cpu(stage, meta, meta.payload, flow.iq.data(), pool);
  REQUIRE(run.plan.outputs.size() == 1);
  CHECK(run.plan.passes_input);
  const TensorSpec& spec = run.plan.outputs[0].spec;
  CHECK(run.plan.outputs[0].name == "bmode");
  CHECK(spec.unit == "dB");
  CHECK(spec.dtype == DType::float32);
  CHECK(spec.axes == std::vector<Axis>{meta.payload.axes[1], meta.payload.axes[2]});
  CHECK(spec.attributes.at(doppler::kMeanOfFramesAttribute) == "16");
  const std::int64_t pixels = meta.payload.axes[1].size * meta.payload.axes[2].size;
  double lowest = 0, highest = -1e300;
  for (std::int64_t p = 0; p < pixels; ++p) {
    INFO("pixel " << p);
    // Double sums in the stage, long double here: equal to the float32 output's rounding (|dB| < 300:
    // a float's spacing is below 3e-5 there).
    CHECK(run.as<float>()[p] == Approx(expected_db(flow.iq, 16, p, true)).margin(3e-5));
    lowest = std::min(lowest, double(run.as<float>()[p]));
    highest = std::max(highest, double(run.as<float>()[p]));
  }
  CHECK(highest - lowest > 30);  // speckle and the dark lumen: an image, not a constant
}

TEST_CASE("mean_bmode: the incoherent mean is the power Doppler of the unfiltered ensemble; equal frames give both",
          "[doppler][mean_bmode]") {
  const sim::FlowIqResult flow = small_phantom(test::fresh_seed());
  const FrameMeta& meta = flow.meta;
  ThreadPool pool(2);
  MeanBmodeStage stage(with_average(MeanBmodeParams::Average::incoherent));
  const test::StageRun run = test::run_stage_cpu(stage, meta, meta.payload, flow.iq.data(), pool);
  DopplerStage doppler(DopplerParams{});
  const test::StageRun power = test::run_stage_cpu(doppler, meta, meta.payload, flow.iq.data(), pool);
  const std::int64_t pixels = meta.payload.axes[1].size * meta.payload.axes[2].size;
  for (std::int64_t p = 0; p < pixels; ++p) {
    INFO("pixel " << p);
    // Both from double sums of the same terms, rounded to float once.
    CHECK(run.as<float>()[p] == Approx(power.as<float>(2)[p]).margin(3e-5));
  }

  // Every frame the same: the mean frame is the frame, coherent or not; zero gives the floor.
  std::vector<std::complex<float>> still(flow.iq.begin(), flow.iq.begin() + pixels);
  std::vector<std::complex<float>> ensemble;
  for (int n = 0; n < 5; ++n) ensemble.insert(ensemble.end(), still.begin(), still.end());
  ensemble[0] = ensemble[pixels] = ensemble[2 * pixels] = ensemble[3 * pixels] = ensemble[4 * pixels] = 0;
  FrameMeta five = meta;
  five.payload.axes[0].size = 5;
  five.vectors.clear();
  for (const auto average : {MeanBmodeParams::Average::coherent, MeanBmodeParams::Average::incoherent}) {
    MeanBmodeStage equal_frames(with_average(average));
    const test::StageRun r = test::run_stage_cpu(equal_frames, five, five.payload, ensemble.data(), pool);
    CHECK(r.as<float>()[0] == doppler::kPowerFloorDb);
    for (std::int64_t p = 1; p < pixels; ++p) {
      INFO("pixel " << p);
      CHECK(r.as<float>()[p] == Approx(20 * std::log10(std::abs(std::complex<double>(still[p])))).margin(3e-5));
    }
  }
}

TEST_CASE("mean_bmode: refuses what is not a complex ensemble, with the stage's name", "[doppler][mean_bmode]") {
  MeanBmodeStage stage(MeanBmodeParams{});
  FrameMeta frame;
  frame.payload = TensorSpec{.dtype = DType::float32, .axes = {{"frame", 4}, {"lateral", 3}, {"axial", 5}}};
  CHECK_THROWS_WITH(stage.configure(frame, frame.payload, Backend::cpu), Catch::Contains("mean_bmode"));
  frame.payload = TensorSpec{.dtype = DType::complex64, .axes = {{"lateral", 3}, {"axial", 5}}};
  CHECK_THROWS_WITH(stage.configure(frame, frame.payload, Backend::cpu), Catch::Contains("mean_bmode"));
}

TEST_CASE("mean_bmode in the Doppler chain: the B-mode is published and the clutter filter still gets the ensemble",
          "[doppler][mean_bmode]") {
  const sim::FlowIqResult flow = small_phantom(test::fresh_seed());
  ClutterFilterParams filter;
  filter.tissue_rank = 2;
  DopplerParams estimator;
  estimator.average_lateral = 3;
  ThreadPool pool(2);
  Published got;
  DeviceLane lane("doppler", doppler_chain_with_bmode(filter, estimator), {.slots = 2, .pool = &pool}, got.callbacks());
  lane.submit(input_frame(flow.meta, flow.iq));
  lane.drain();
  REQUIRE(got.errors.empty());
  REQUIRE(got.images.count("bmode"));
  REQUIRE(got.images.count("velocity"));
  CHECK(got.specs.at("bmode").unit == "dB");
  CHECK(got.specs.at("bmode").attributes.at(doppler::kMeanOfFramesAttribute) == "16");
  MeanBmodeStage reference(MeanBmodeParams{});
  const test::StageRun bmode = test::run_stage_cpu(reference, flow.meta, flow.meta.payload, flow.iq.data(), pool);
  const test::DopplerImages chain = test::run_doppler_chain(flow.meta, flow.iq, filter, estimator, pool);
  const std::size_t pixels = chain.velocity.size();
  REQUIRE(got.images.at("bmode").size() == pixels);
  REQUIRE(got.images.at("velocity").size() == pixels);
  std::size_t estimates = 0;
  for (std::size_t p = 0; p < pixels; ++p) {
    INFO("pixel " << p);
    // The same CPU code on the same data: identical.
    CHECK(got.images.at("bmode")[p] == bmode.as<float>()[p]);
    CHECK(got.images.at("power")[p] == chain.power[p]);
    const float v = got.images.at("velocity")[p];
    CHECK((v == chain.velocity[p] || (std::isnan(v) && std::isnan(chain.velocity[p]))));
    estimates += std::isfinite(v);
  }
  CHECK(estimates > pixels / 2);
}

#ifdef SONOPIPE_WITH_CUDA
TEST_CASE("mean_bmode: CUDA matches the CPU reference on fresh random ensembles", "[doppler][mean_bmode][cuda]") {
  SONOPIPE_REQUIRE_CUDA();
  std::mt19937_64 rng(test::fresh_seed());
  std::normal_distribution<float> normal(0, 1);
  ThreadPool pool(2);
  for (const std::int64_t frames : {1, 32, 200}) {
    const std::int64_t lateral = 37, axial = 53, pixels = lateral * axial;  // odd: a partial last block
    FrameMeta frame;
    frame.payload = TensorSpec{.dtype = DType::complex64, .axes = {{"frame", frames}, {"lateral", lateral}, {"axial", axial}}};
    // A steady part (tissue, amplitude 2..10 per pixel) plus unit noise per frame: the coherent mean
    // keeps the tissue, and where the tissue is weak the mean nearly cancels.
    std::vector<std::complex<float>> x(static_cast<std::size_t>(frames * pixels));
    std::uniform_real_distribution<float> amplitude(2, 10), phase(-3.14159f, 3.14159f);
    std::vector<std::complex<float>> steady(static_cast<std::size_t>(pixels));
    for (auto& s : steady) s = std::polar(amplitude(rng), phase(rng));
    for (std::int64_t n = 0; n < frames; ++n)
      for (std::int64_t p = 0; p < pixels; ++p) x[n * pixels + p] = steady[p] + std::complex<float>(normal(rng), normal(rng));
    for (const auto average : {MeanBmodeParams::Average::coherent, MeanBmodeParams::Average::incoherent}) {
      MeanBmodeStage cpu_stage(with_average(average)), gpu_stage(with_average(average));
      const auto cpu = test::run_stage_cpu(cpu_stage, frame, frame.payload, x.data(), pool);
      const auto gpu = test::run_stage_cuda(gpu_stage, frame, frame.payload, x.data());
      for (std::int64_t p = 0; p < pixels; ++p) {
        INFO(frames << " frames, " << (average == MeanBmodeParams::Average::coherent ? "coherent" : "incoherent")
                    << ", pixel " << p);
        // Compared as amplitudes (10^(dB/20)). A float sum of N terms is within (N - 1) eps of the
        // sum of their magnitudes (recursive summation, Higham 2002 eq. 4.4); divided by N: within
        // N eps of mean |x| (coherent) or of mean |x|^2, i.e. N eps / 2 relative in amplitude
        // (incoherent). Plus log10/pow rounding (a few eps relative): 4 eps relative more.
        double mean_magnitude = 0;
        for (std::int64_t n = 0; n < frames; ++n) mean_magnitude += std::abs(std::complex<double>(x[n * pixels + p]));
        mean_magnitude /= static_cast<double>(frames);
        const double eps = std::numeric_limits<float>::epsilon();
        const double a_cpu = std::pow(10.0, cpu.as<float>()[p] / 20.0), a_gpu = std::pow(10.0, gpu.as<float>()[p] / 20.0);
        CHECK(std::abs(a_gpu - a_cpu) <= frames * eps * mean_magnitude + 4 * eps * a_cpu);
      }
    }
  }
}

TEST_CASE("mean_bmode before doppler on CUDA: the B-mode and the power of the ensemble as on the CPU",
          "[doppler][mean_bmode][cuda]") {
  SONOPIPE_REQUIRE_CUDA();
  const sim::FlowIqResult flow = small_phantom(test::fresh_seed());
  const std::int64_t frames = flow.meta.payload.axes[0].size;
  ThreadPool pool(2);
  auto chain = [] {
    std::vector<PipelineStage> stages;
    stages.push_back({.label = "mean_bmode", .stage = std::make_unique<MeanBmodeStage>(MeanBmodeParams{}), .publish = true});
    stages.push_back({.label = "doppler", .stage = std::make_unique<DopplerStage>(DopplerParams{}), .publish = true});
    return stages;
  };
  Published cpu, gpu;
  {
    DeviceLane lane("doppler", chain(), {.slots = 2, .pool = &pool}, cpu.callbacks());
    lane.submit(input_frame(flow.meta, flow.iq));
    lane.drain();
  }
  {
    DeviceLane lane("doppler", chain(), {.backend = Backend::cuda, .slots = 2, .queue_depth = 4}, gpu.callbacks());
    lane.submit(input_frame(flow.meta, flow.iq));
    lane.drain();
  }
  REQUIRE(cpu.errors.empty());
  REQUIRE(gpu.errors.empty());
  REQUIRE(gpu.images.count("bmode"));
  REQUIRE(gpu.images.count("power"));
  const std::vector<float>& bmode_cpu = cpu.images.at("bmode");
  const std::vector<float>& bmode_gpu = gpu.images.at("bmode");
  const std::vector<float>& power_cpu = cpu.images.at("power");
  const std::vector<float>& power_gpu = gpu.images.at("power");
  REQUIRE(bmode_gpu.size() == bmode_cpu.size());
  REQUIRE(power_gpu.size() == bmode_cpu.size());
  const double eps = std::numeric_limits<float>::epsilon();
  for (std::size_t p = 0; p < bmode_cpu.size(); ++p) {
    INFO("pixel " << p);
    // The doppler stage read the ensemble (not the B-mode): its power is the mean |x|^2 of the
    // frames; float sums of 16 terms are within 16 eps relative.
    CHECK(power_gpu[p] == Approx(power_cpu[p]).epsilon(16 * eps));
    // The B-mode amplitude within N eps of the mean magnitude (as in the kernel test above);
    // sqrt(power) bounds the mean magnitude (Cauchy-Schwarz).
    const double a_cpu = std::pow(10.0, bmode_cpu[p] / 20.0), a_gpu = std::pow(10.0, bmode_gpu[p] / 20.0);
    CHECK(std::abs(a_gpu - a_cpu) <= frames * eps * std::sqrt(double(power_cpu[p])) + 4 * eps * a_cpu);
  }
}
#endif
