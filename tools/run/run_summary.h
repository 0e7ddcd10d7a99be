// What sonopipe-run reports per input: a line on stdout and a row of <out>/summary.csv.
//   summary.csv columns: input,output,status,frames,unmatched_frames,results,seconds,frames_per_s,error
//   status is "ok" or "failed"; output is empty for a failed input; fields are quoted as RFC 4180 says.
#pragma once

#include <string>
#include <vector>

#include "tools/run/batch_runner.h"

namespace sonopipe::run {

inline constexpr const char* kSummaryFileName = "summary.csv";

std::string summary_line(const InputOutcome& outcome);  // one line, no newline
std::string summary_csv(const std::vector<InputOutcome>& outcomes);

}  // namespace sonopipe::run
