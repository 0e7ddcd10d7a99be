// Test helper: configure a stage and run one frame on the CPU backend or on CUDA (device buffers,
// pinned staging, one stream, outputs poisoned with NaN so unwritten elements show), returning the
// outputs as host bytes. Header-only, shared by the ARFI stage tests.
#pragma once

#include <cstring>
#include <vector>

#include "sdk/stage.h"
#include "sdk/thread_pool.h"

#ifdef SONOPIPE_WITH_CUDA
#include <cuda_runtime_api.h>
#include "stages/common/cuda_check.h"
#endif

namespace sonopipe::test {

struct StageRun {
  StagePlan plan;
  std::vector<std::vector<std::byte>> outputs;  // host copies, one per plan output

  template <typename T>
  const T* as(std::size_t output = 0) const {
    return reinterpret_cast<const T*>(outputs[output].data());
  }
};

inline StageRun run_stage_cpu(Stage& stage, const FrameMeta& frame, const TensorSpec& spec,
                              const void* input, ThreadPool& pool) {
  StageRun run;
  run.plan = stage.configure(frame, spec, Backend::cpu);
  std::vector<void*> pointers;
  for (const StageOutput& out : run.plan.outputs) {
    run.outputs.emplace_back(out.spec.byte_size(), std::byte{0xff});  // NaN poison
    pointers.push_back(run.outputs.back().data());
  }
  std::vector<std::byte> workspace(run.plan.workspace_bytes), staging(run.plan.host_staging_bytes);
  StageIo io{.frame = frame, .input_spec = spec, .input = input, .outputs = pointers,
             .workspace = workspace.data(), .host_staging = staging.data(), .pool = &pool};
  stage.run_cpu(io);
  return run;
}

#ifdef SONOPIPE_WITH_CUDA
inline StageRun run_stage_cuda(Stage& stage, const FrameMeta& frame, const TensorSpec& spec,
                               const void* input) {
  StageRun run;
  run.plan = stage.configure(frame, spec, Backend::cuda);
  cudaStream_t stream;
  SONOPIPE_CUDA_CHECK(cudaStreamCreate(&stream));
  void* d_input = nullptr;
  SONOPIPE_CUDA_CHECK(cudaMalloc(&d_input, spec.byte_size()));
  SONOPIPE_CUDA_CHECK(cudaMemcpy(d_input, input, spec.byte_size(), cudaMemcpyHostToDevice));
  std::vector<void*> d_outputs;
  for (const StageOutput& out : run.plan.outputs) {
    void* p = nullptr;
    SONOPIPE_CUDA_CHECK(cudaMalloc(&p, out.spec.byte_size()));
    SONOPIPE_CUDA_CHECK(cudaMemset(p, 0xff, out.spec.byte_size()));
    d_outputs.push_back(p);
  }
  void* d_workspace = nullptr;
  void* staging = nullptr;
  if (run.plan.workspace_bytes) SONOPIPE_CUDA_CHECK(cudaMalloc(&d_workspace, run.plan.workspace_bytes));
  if (run.plan.host_staging_bytes) SONOPIPE_CUDA_CHECK(cudaMallocHost(&staging, run.plan.host_staging_bytes));
  StageIo io{.frame = frame, .input_spec = spec, .input = d_input, .outputs = d_outputs,
             .workspace = d_workspace, .host_staging = staging, .stream = stream};
  stage.run_cuda(io);
  SONOPIPE_CUDA_CHECK(cudaStreamSynchronize(stream));
  for (std::size_t i = 0; i < d_outputs.size(); ++i) {
    run.outputs.emplace_back(run.plan.outputs[i].spec.byte_size());
    SONOPIPE_CUDA_CHECK(cudaMemcpy(run.outputs.back().data(), d_outputs[i], run.outputs.back().size(),
                                   cudaMemcpyDeviceToHost));
    cudaFree(d_outputs[i]);
  }
  cudaFree(d_input);
  cudaFree(d_workspace);
  cudaFreeHost(staging);
  cudaStreamDestroy(stream);
  return run;
}
#endif

}  // namespace sonopipe::test
