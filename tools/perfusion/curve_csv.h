// Input curves as CSV (time in s, value in mM): "time,value" rows, an optional header line.
#pragma once

#include <string>
#include <vector>

namespace sonopipe::nifti {

struct Curve {
  std::vector<double> time_s;
  std::vector<double> values;
};

// Throws std::runtime_error naming the file and line (missing file, bad number, NaN, < 2 columns).
Curve read_curve_csv(const std::string& path);
void write_curve_csv(const std::string& path, const std::vector<double>& time_s,
                     const std::vector<double>& values, const std::string& value_name);

}  // namespace sonopipe::nifti
