#include "tools/perfusion/curve_csv.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <sstream>
#include <stdexcept>

namespace sonopipe::nifti {
namespace {

bool parse_number(const std::string& text, double& out) {
  std::size_t used = 0;
  try {
    out = std::stod(text, &used);
  } catch (const std::exception&) {
    return false;
  }
  while (used < text.size() && std::isspace(static_cast<unsigned char>(text[used]))) ++used;
  return used == text.size();
}

}  // namespace

Curve read_curve_csv(const std::string& path) {
  if (!std::filesystem::exists(path)) throw std::runtime_error(path + ": no such file");
  std::ifstream file(path);
  if (!file) throw std::runtime_error(path + ": cannot be read");
  Curve curve;
  std::string line;
  int number = 0;
  while (std::getline(file, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    std::stringstream ss(line);
    std::string a, b;
    if (!std::getline(ss, a, ',') || !std::getline(ss, b, ','))
      throw std::runtime_error(path + ":" + std::to_string(number) + ": expected 'time,value'");
    double t = 0, v = 0;
    const bool numeric = parse_number(a, t) && parse_number(b, v);
    if (!numeric) {
      if (curve.time_s.empty() && number == 1) continue;  // a header line
      throw std::runtime_error(path + ":" + std::to_string(number) + ": not a number in '" + line + "'");
    }
    if (!std::isfinite(t) || !std::isfinite(v))
      throw std::runtime_error(path + ":" + std::to_string(number) + ": NaN or infinite value");
    curve.time_s.push_back(t);
    curve.values.push_back(v);
  }
  if (curve.time_s.empty()) throw std::runtime_error(path + ": no samples");
  return curve;
}

void write_curve_csv(const std::string& path, const std::vector<double>& time_s,
                     const std::vector<double>& values, const std::string& value_name) {
  std::ofstream file(path);
  if (!file) throw std::runtime_error(path + ": cannot be written");
  file << "time_s," << value_name << "\n" << std::setprecision(17);
  for (std::size_t i = 0; i < time_s.size(); ++i) file << time_s[i] << "," << values[i] << "\n";
}

}  // namespace sonopipe::nifti
