// sonopipe-cufft-plan DEVICE TYPE N0 [N1 [N2]] BATCH: makes the cuFFT plan of that shape (TYPE: cuFFT's
// cufftType value, e.g. 42 = R2C; N slowest first) on CUDA device DEVICE, without a work area, and
// exits: 0 when cuFFT made it, 1 with a line on stderr otherwise.
// sonopipe-cufft-plan --serve: the same for each line "DEVICE TYPE N0 [N1 [N2]] BATCH" on stdin,
// answering one line on stdout each: "ok", or "fail <reason>"; exits at EOF on stdin.
//
// Why a process: cuFFT compiles kernels for an FFT size it has not seen on this machine when it
// plans it (the CUDA driver's JIT, 20-90 ms per size on the H100 with CUDA 13) and the driver holds
// its lock meanwhile, so every launch of the process waits: in sonopiped, every pipeline's frames on
// the device (33-51 ms on the run's first ncc_track kernel change, session 11). Compiled here, the
// kernels land in the driver's JIT cache (CUDA_CACHE_PATH, inherited), where the daemon's own plan
// of the same shape finds them (its plan then takes about 1 ms and holds no frame). ncc_track's plan
// cache (stages/strain/ncc_track/cufft_helper.h) starts one --serve helper per process, with the
// daemon's environment, so that only the first shape pays this process's start and CUDA context.
#include <cuda_runtime_api.h>
#include <cufft.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

// Plans the shape `words` describe (DEVICE TYPE N0 [N1 [N2]] BATCH); "" when cuFFT made it, else why not.
std::string make_plan(const std::vector<std::string>& words) {
  std::vector<long> values;
  for (const std::string& word : words) {
    char* end = nullptr;
    values.push_back(std::strtol(word.c_str(), &end, 10));
    if (word.empty() || *end != '\0' || values.back() < 0) return "bad request (DEVICE TYPE N0 [N1 [N2]] BATCH)";
  }
  const std::size_t rank = values.size() >= 4 ? values.size() - 3 : 0;
  if (rank < 1 || rank > 3) return "bad request (DEVICE TYPE N0 [N1 [N2]] BATCH)";
  int n[3] = {1, 1, 1};
  for (std::size_t d = 0; d < rank; ++d) n[d] = static_cast<int>(values[2 + d]);
  const int batch = static_cast<int>(values.back());
  if (cudaSetDevice(static_cast<int>(values[0])) != cudaSuccess) return "cudaSetDevice(" + words[0] + ") failed";
  cufftHandle plan = 0;
  std::size_t work_bytes = 0;
  const bool made = cufftCreate(&plan) == CUFFT_SUCCESS && cufftSetAutoAllocation(plan, 0) == CUFFT_SUCCESS &&
                    cufftMakePlanMany(plan, static_cast<int>(rank), n, nullptr, 1, 0, nullptr, 1, 0,
                                      static_cast<cufftType>(values[1]), batch, &work_bytes) == CUFFT_SUCCESS;
  if (plan) cufftDestroy(plan);
  return made ? "" : "cuFFT could not plan type " + words[1] + ", batch " + words.back();
}

std::vector<std::string> split(const char* line) {
  std::vector<std::string> words;
  std::string word;
  for (const char* c = line; *c; ++c) {
    if (*c == ' ' || *c == '\t' || *c == '\n' || *c == '\r') {
      if (!word.empty()) words.push_back(word);
      word.clear();
    } else {
      word += *c;
    }
  }
  if (!word.empty()) words.push_back(word);
  return words;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--serve") == 0) {
    char line[512];
    while (std::fgets(line, sizeof line, stdin)) {
      const std::string why = make_plan(split(line));
      std::printf("%s\n", why.empty() ? "ok" : ("fail " + why).c_str());
      std::fflush(stdout);
    }
    return 0;
  }
  const std::string why = make_plan(std::vector<std::string>(argv + 1, argv + argc));
  if (why.empty()) return 0;
  std::fprintf(stderr, "sonopipe-cufft-plan: %s\nusage: sonopipe-cufft-plan DEVICE TYPE N0 [N1 [N2]] BATCH | --serve\n",
               why.c_str());
  return 1;
}
