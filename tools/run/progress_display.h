// sonopipe-run's progress on stderr: on a terminal one bar redrawn in place (files done, frames of
// the current input, frames/s), at most every kRedrawInterval; otherwise (a log, a pipe) one plain
// line as each input starts.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <string>

namespace sonopipe::run {

class ProgressDisplay {
 public:
  ProgressDisplay(std::FILE* stream, bool terminal, std::size_t inputs);

  void start_input(std::size_t number, const std::string& input);  // number counts from 1
  void frames(std::size_t done, std::size_t total);
  void clear();  // removes the bar before other output is written

 private:
  static constexpr auto kRedrawInterval = std::chrono::milliseconds(100);
  static constexpr int kBarWidth = 30;

  std::FILE* stream_;
  const bool terminal_;
  const std::size_t inputs_;
  std::size_t number_ = 0;
  std::string input_;
  std::chrono::steady_clock::time_point input_started_, last_redraw_;
  bool drawn_ = false;
};

}  // namespace sonopipe::run
