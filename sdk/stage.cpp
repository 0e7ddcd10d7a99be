#include "sdk/stage.h"

namespace sonopipe {

bool Stage::run_cuda(const StageIo&) {
  throw StageError("this stage has no CUDA implementation");
}

}  // namespace sonopipe
