#include "tools/run/progress_display.h"

#include <algorithm>

namespace sonopipe::run {

ProgressDisplay::ProgressDisplay(std::FILE* stream, bool terminal, std::size_t inputs)
    : stream_(stream), terminal_(terminal), inputs_(inputs) {}

void ProgressDisplay::start_input(std::size_t number, const std::string& input) {
  number_ = number;
  input_ = input;
  input_started_ = std::chrono::steady_clock::now();
  last_redraw_ = {};
  if (!terminal_) {
    std::fprintf(stream_, "sonopipe-run: [%zu/%zu] %s\n", number, inputs_, input.c_str());
    std::fflush(stream_);
  }
}

void ProgressDisplay::frames(std::size_t done, std::size_t total) {
  if (!terminal_) return;
  const auto now = std::chrono::steady_clock::now();
  if (done < total && now - last_redraw_ < kRedrawInterval) return;
  last_redraw_ = now;
  // The bar covers all inputs: the finished ones plus the current one's fraction.
  const double fraction = (static_cast<double>(number_ - 1) + static_cast<double>(done) / static_cast<double>(std::max<std::size_t>(total, 1))) /
                          static_cast<double>(inputs_);
  const int filled = static_cast<int>(fraction * kBarWidth);
  const double seconds = std::chrono::duration<double>(now - input_started_).count();
  std::string bar(static_cast<std::size_t>(filled), '#');
  bar.resize(kBarWidth, '.');
  std::fprintf(stream_, "\r\033[K[%s] %zu/%zu %s: frame %zu/%zu, %.1f frames/s", bar.c_str(), number_, inputs_,
               input_.c_str(), done, total, seconds > 0 ? static_cast<double>(done) / seconds : 0.0);
  std::fflush(stream_);
  drawn_ = true;
}

void ProgressDisplay::clear() {
  if (!terminal_ || !drawn_) return;
  std::fprintf(stream_, "\r\033[K");
  std::fflush(stream_);
  drawn_ = false;
}

}  // namespace sonopipe::run
