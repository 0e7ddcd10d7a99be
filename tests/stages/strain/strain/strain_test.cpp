#include "stages/strain/strain/strain.h"

#include <cmath>
#include <vector>

#include "sdk/thread_pool.h"
#include "tests/support/test_support.h"

#ifdef SONOPIPE_WITH_CUDA
#include <cuda_runtime_api.h>
#include "stages/common/cuda_check.h"
#endif

using namespace sonopipe;

namespace {

RawParam item(const std::string& v) { return RawParam{{v}, false, 0}; }
RawParam list(std::vector<std::string> v) { return RawParam{std::move(v), true, 0}; }

// Displacement spec as ncc_track emits it: [lateral, axial, component=2] with grid spacing.
TensorSpec displacement_spec(int lateral, int axial, double lateral_step, double axial_step) {
  TensorSpec spec;
  spec.dtype = DType::float32;
  spec.unit = "m";
  spec.axes = {{"lateral", lateral, lateral_step, "m", 0.0}, {"axial", axial, axial_step, "m", 0.0},
               {"component", 2}};
  return spec;
}

std::vector<float> run(Stage& stage, const TensorSpec& spec, const std::vector<float>& displacement) {
  FrameMeta frame;
  frame.kind = FrameKind::rf;
  StagePlan plan = stage.configure(frame, spec, Backend::cpu);
  std::vector<float> out(plan.outputs[0].spec.element_count(), -7.f);
  std::vector<std::byte> workspace(plan.workspace_bytes);
  void* outputs[] = {out.data()};
  ThreadPool pool(2);
  StageIo io{.frame = frame, .input_spec = spec, .input = displacement.data(), .outputs = outputs,
             .workspace = workspace.data(), .pool = &pool};
  REQUIRE(stage.run_cpu(io));
  return out;
}

std::unique_ptr<Stage> make(std::map<std::string, RawParam> given) {
  return StrainStage::info().create(validate_params(StrainStage::info().params, given));
}

}  // namespace

TEST_CASE("strain of a uniform compression is negative and exact, edges included", "[strain]") {
  const int nl = 6, na = 30;
  const double step_z = 9 * 19.25e-6, step_x = 2.67e-4;
  std::vector<float> u(nl * na * 2);
  for (int l = 0; l < nl; ++l)
    for (int a = 0; a < na; ++a) {
      u[(l * na + a) * 2 + 0] = static_cast<float>(-0.012 * a * step_z + 1e-5);  // axial: -1.2 %
      u[(l * na + a) * 2 + 1] = static_cast<float>(0.006 * l * step_x);          // lateral: +0.6 %
    }
  auto stage = make({{"window", item("7")}});
  auto strain = run(*stage, displacement_spec(nl, na, step_x, step_z), u);
  for (int p = 0; p < nl * na; ++p) {
    // float32 displacements of ~1e-4 m: relative rounding 1e-7 over steps of 1.7e-4 m.
    REQUIRE(strain[p * 2] == Approx(-0.012).margin(1e-5));
    REQUIRE(strain[p * 2 + 1] == Approx(0.006).margin(1e-5));
  }
}

TEST_CASE("least-squares differentiator: interior exact for quadratics, shrinking window at edges",
          "[strain]") {
  // u = c z^2 along axial (step 1): the symmetric least-squares slope is exactly 2 c z inside;
  // edge policy: h_j = min(h, j, n-1-j), end points one-sided difference.
  const int na = 12;
  const double c = 0.01;
  std::vector<float> u(na * 2, 0.f);
  for (int a = 0; a < na; ++a) u[a * 2] = static_cast<float>(c * a * a);
  auto stage = make({{"window", item("5")}});
  auto strain = run(*stage, displacement_spec(1, na, 1.0, 1.0), u);
  for (int a = 1; a < na - 1; ++a) REQUIRE(strain[a * 2] == Approx(2 * c * a).margin(1e-6));
  CHECK(strain[0] == Approx(c * 1).margin(1e-6));                                  // u1 - u0
  CHECK(strain[(na - 1) * 2] == Approx(c * ((na - 1) * (na - 1) - (na - 2) * (na - 2))).margin(1e-5));
  // One lateral line: lateral strain 0 by policy.
  for (int a = 0; a < na; ++a) REQUIRE(strain[a * 2 + 1] == 0.f);
}

TEST_CASE("the median pre-filter removes an isolated outlier", "[strain]") {
  const int nl = 5, na = 20;
  std::vector<float> u(nl * na * 2);
  for (int l = 0; l < nl; ++l)
    for (int a = 0; a < na; ++a) u[(l * na + a) * 2] = static_cast<float>(-0.01 * a);
  u[(2 * na + 10) * 2] += 3.0f;  // a tracking outlier
  auto plain = run(*make({{"window", item("3")}}), displacement_spec(nl, na, 1.0, 1.0), u);
  auto filtered = run(*make({{"window", item("3")}, {"median", list({"3", "3"})}}),
                      displacement_spec(nl, na, 1.0, 1.0), u);
  CHECK(std::fabs(plain[(2 * na + 9) * 2] + 0.01) > 0.5);  // the outlier corrupts its neighbours
  for (int a = 2; a < na - 2; ++a) REQUIRE(filtered[(2 * na + a) * 2] == Approx(-0.01).margin(1e-6));
}

TEST_CASE("strain rejects even windows and inputs that are not displacement fields", "[strain]") {
  CHECK_THROWS_AS(make({{"window", item("4")}}), ParamError);
  auto stage = make({});
  TensorSpec bad;
  bad.axes = {{"lateral", 4, 1.0}, {"axial", 4, 1.0}};
  FrameMeta frame;
  CHECK_THROWS_AS(stage->configure(frame, bad, Backend::cpu), StageError);
  TensorSpec no_spacing = displacement_spec(4, 4, 0.0, 1.0);
  CHECK_THROWS_AS(stage->configure(frame, no_spacing, Backend::cpu), StageError);
}

#ifdef SONOPIPE_WITH_CUDA
TEST_CASE("strain on CUDA matches the CPU reference on random displacements", "[strain][cuda]") {
  SONOPIPE_REQUIRE_CUDA();
  const auto seed = test::fresh_seed();
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal;
  const int nl = 37, na = 101;
  std::vector<float> u(nl * na * 2);
  for (auto& v : u) v = normal(rng);
  for (auto median : {std::vector<std::string>{"1"}, std::vector<std::string>{"5", "3"}}) {
    auto stage = make({{"window", item("7")}, {"median", list(median)}});
    const TensorSpec spec = displacement_spec(nl, na, 0.5, 0.25);
    auto expected = run(*stage, spec, u);
    FrameMeta frame;
    StagePlan plan = stage->configure(frame, spec, Backend::cuda);
    float *d_in = nullptr, *d_out = nullptr, *d_work = nullptr;
    SONOPIPE_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&d_in), u.size() * 4));
    SONOPIPE_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&d_out), u.size() * 4));
    SONOPIPE_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&d_work), u.size() * 4));
    SONOPIPE_CUDA_CHECK(cudaMemset(d_out, 0xff, u.size() * 4));
    SONOPIPE_CUDA_CHECK(cudaMemcpy(d_in, u.data(), u.size() * 4, cudaMemcpyHostToDevice));
    void* outputs[] = {d_out};
    StageIo io{.frame = frame, .input_spec = spec, .input = d_in, .outputs = outputs, .workspace = d_work};
    REQUIRE(stage->run_cuda(io));
    std::vector<float> got(u.size());
    SONOPIPE_CUDA_CHECK(cudaMemcpy(got.data(), d_out, got.size() * 4, cudaMemcpyDeviceToHost));
    cudaFree(d_in);
    cudaFree(d_out);
    cudaFree(d_work);
    // float vs double sums of <= 7 terms of O(1) values, divided by 0.25: ~1e-6.
    for (std::size_t i = 0; i < got.size(); ++i) REQUIRE(got[i] == Approx(expected[i]).margin(1e-5));
  }
}
#endif
