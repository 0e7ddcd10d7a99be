#include "stages/common/convert/convert.h"

#include <vector>

#include "sdk/thread_pool.h"
#include "tests/support/test_support.h"

#ifdef SONOPIPE_WITH_CUDA
#include <cuda_runtime_api.h>
#include "stages/common/cuda_check.h"
#endif

using namespace sonopipe;

namespace {

FrameMeta iq_frame(std::int64_t lines, std::int64_t samples) {
  FrameMeta frame;
  frame.kind = FrameKind::iq;
  frame.payload.dtype = DType::int16;
  frame.payload.axes = {{"line", lines}, {"sample", samples}, {"iq", 2}};
  return frame;
}

std::vector<std::int16_t> random_int16(std::size_t count, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> dist(-32768, 32767);
  std::vector<std::int16_t> values(count);
  for (auto& v : values) v = static_cast<std::int16_t>(dist(rng));
  return values;
}

}  // namespace

TEST_CASE("convert turns interleaved int16 IQ into complex64 with the iq axis removed", "[convert]") {
  auto stage = ConvertStage::info().create(default_params(ConvertStage::info().params));
  FrameMeta frame = iq_frame(3, 5);
  StagePlan plan = stage->configure(frame, frame.payload, Backend::cpu);
  REQUIRE(plan.outputs.size() == 1);
  CHECK(plan.outputs[0].spec.dtype == DType::complex64);
  REQUIRE(plan.outputs[0].spec.axes.size() == 2);
  CHECK(plan.outputs[0].spec.axes[1].name == "sample");
  CHECK(plan.outputs[0].spec.byte_size() == 3 * 5 * 8);
}

TEST_CASE("convert rejects int16 IQ without an iq axis and unsupported dtypes", "[convert]") {
  auto stage = ConvertStage::info().create(default_params(ConvertStage::info().params));
  FrameMeta frame = iq_frame(3, 5);
  frame.payload.axes.pop_back();
  CHECK_THROWS_AS(stage->configure(frame, frame.payload, Backend::cpu), StageError);
  frame.payload.dtype = DType::float64;
  frame.kind = FrameKind::rf;
  CHECK_THROWS_AS(stage->configure(frame, frame.payload, Backend::cpu), StageError);
}

TEST_CASE("convert on the CPU scales every int16 value exactly", "[convert]") {
  std::map<std::string, RawParam> given{{"scale", RawParam{{"0.5"}, false, 1}}};
  auto stage = ConvertStage::info().create(validate_params(ConvertStage::info().params, given));
  FrameMeta frame = iq_frame(64, 1000);
  StagePlan plan = stage->configure(frame, frame.payload, Backend::cpu);
  auto input = random_int16(64 * 1000 * 2, test::fresh_seed());
  std::vector<float> output(input.size(), -1e30f);
  ThreadPool pool(2);
  void* outputs[] = {output.data()};
  StageIo io{.frame = frame, .input_spec = frame.payload, .input = input.data(), .outputs = outputs,
             .pool = &pool};
  REQUIRE(stage->run_cpu(io));
  // Exact: int16 values and their halves are representable in float32.
  for (std::size_t i = 0; i < input.size(); ++i) REQUIRE(output[i] == 0.5f * input[i]);
}

#ifdef SONOPIPE_WITH_CUDA
TEST_CASE("convert on CUDA matches the CPU reference bit for bit", "[convert][cuda]") {
  SONOPIPE_REQUIRE_CUDA();
  std::map<std::string, RawParam> given{{"scale", RawParam{{"3.0517578125e-05"}, false, 1}}};
  auto stage = ConvertStage::info().create(validate_params(ConvertStage::info().params, given));
  for (std::int64_t samples : {1000, 1001, 4093}) {  // includes sizes that leave a vector tail
    FrameMeta frame = iq_frame(37, samples);
    stage->configure(frame, frame.payload, Backend::cuda);
    auto input = random_int16(static_cast<std::size_t>(37 * samples * 2), test::fresh_seed());
    std::vector<float> expected(input.size());
    ConvertStage::convert_reference(input.data(), expected.data(), input.size(), 3.0517578125e-05f);
    std::int16_t* d_in = nullptr;
    float* d_out = nullptr;
    SONOPIPE_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&d_in), input.size() * 2));
    SONOPIPE_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&d_out), input.size() * 4));
    SONOPIPE_CUDA_CHECK(cudaMemset(d_out, 0xff, input.size() * 4));  // NaN poison
    SONOPIPE_CUDA_CHECK(cudaMemcpy(d_in, input.data(), input.size() * 2, cudaMemcpyHostToDevice));
    void* outputs[] = {d_out};
    StageIo io{.frame = frame, .input_spec = frame.payload, .input = d_in, .outputs = outputs};
    REQUIRE(stage->run_cuda(io));
    std::vector<float> got(input.size());
    SONOPIPE_CUDA_CHECK(cudaMemcpy(got.data(), d_out, got.size() * 4, cudaMemcpyDeviceToHost));
    cudaFree(d_in);
    cudaFree(d_out);
    // Exact: one float multiply of an exactly representable value, same rounding on both sides.
    for (std::size_t i = 0; i < got.size(); ++i) REQUIRE(got[i] == expected[i]);
  }
}
#endif
