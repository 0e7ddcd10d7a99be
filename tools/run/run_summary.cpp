#include "tools/run/run_summary.h"

#include <iomanip>
#include <sstream>

namespace sonopipe::run {
namespace {

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n\r") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

}  // namespace

std::string summary_line(const InputOutcome& outcome) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(3);
  if (!outcome.ok) {
    out << "failed " << outcome.error;
    return out.str();
  }
  out << "ok " << outcome.input << " -> " << outcome.output << ": " << outcome.frames << " frames, "
      << outcome.results << " results in " << outcome.seconds << " s (" << std::setprecision(1)
      << outcome.frames_per_s() << " frames/s)";
  if (outcome.unmatched > 0) out << ", " << outcome.unmatched << " frames no pipeline takes";
  return out.str();
}

std::string summary_csv(const std::vector<InputOutcome>& outcomes) {
  std::ostringstream out;
  out << "input,output,status,frames,unmatched_frames,results,seconds,frames_per_s,error\n";
  out << std::fixed;
  for (const InputOutcome& o : outcomes)
    out << csv_field(o.input) << "," << csv_field(o.output) << "," << (o.ok ? "ok" : "failed") << "," << o.frames
        << "," << o.unmatched << "," << o.results << "," << std::setprecision(3) << o.seconds << ","
        << std::setprecision(2) << o.frames_per_s() << "," << csv_field(o.error) << "\n";
  return out.str();
}

}  // namespace sonopipe::run
