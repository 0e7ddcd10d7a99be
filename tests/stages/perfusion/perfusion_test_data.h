// Helpers of the perfusion tests: CSV reference data under tests/data/perfusion and the Python
// interpreter that has numpy and scipy (probed, never assumed).
#pragma once

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/test_support.h"

namespace sonopipe::test {

// Rows of a CSV file with a header line, as strings keyed by column name.
inline std::vector<std::map<std::string, std::string>> read_csv(const std::string& path) {
  std::ifstream file(path);
  if (!file) throw std::runtime_error("cannot open " + path);
  auto split = [](const std::string& line) {
    std::vector<std::string> cells;
    std::stringstream ss(line);
    std::string cell;
    while (std::getline(ss, cell, ',')) cells.push_back(cell);
    return cells;
  };
  std::string line;
  std::getline(file, line);
  const auto header = split(line);
  std::vector<std::map<std::string, std::string>> rows;
  while (std::getline(file, line)) {
    if (line.empty()) continue;
    const auto cells = split(line);
    std::map<std::string, std::string> row;
    for (std::size_t i = 0; i < header.size() && i < cells.size(); ++i) row[header[i]] = cells[i];
    rows.push_back(row);
  }
  return rows;
}

inline std::string perfusion_data(const std::string& name) {
  return source_path("tests/data/perfusion/" + name);
}

// The madym DISCM calibration series (t in s, concentrations in mM).
struct MadymSeries {
  std::vector<double> time_s, aif, pif, discm, discm_noise;
};

inline MadymSeries read_madym_series() {
  MadymSeries m;
  for (const auto& row : read_csv(perfusion_data("madym_discm_timeseries.csv"))) {
    m.time_s.push_back(std::stod(row.at("t_min")) * 60.0);
    m.aif.push_back(std::stod(row.at("aif_mM")));
    m.pif.push_back(std::stod(row.at("pif_mM")));
    m.discm.push_back(std::stod(row.at("DISCM")));
    m.discm_noise.push_back(std::stod(row.at("DISCM_noise")));
  }
  return m;
}

// A python3 that imports numpy and scipy: $SONOPIPE_PYTHON, else the first python3 on PATH that
// can, else the system interpreters (Debian's python3-scipy lives with /usr/bin/python3 while a
// pyenv python3 may come first on PATH). Empty when none.
inline std::string python_with_scipy() {
  std::vector<std::string> candidates;
  if (const char* forced = std::getenv("SONOPIPE_PYTHON")) candidates.push_back(forced);
  if (const char* path = std::getenv("PATH")) {
    std::stringstream ss(path);
    std::string dir;
    while (std::getline(ss, dir, ':'))
      if (!dir.empty()) candidates.push_back(dir + "/python3");
  }
  for (const char* dir : {"/usr/bin", "/usr/local/bin", "/bin"})
    candidates.push_back(std::string(dir) + "/python3");
  for (const auto& c : candidates) {
    std::ifstream exists(c);
    if (!exists) continue;
    const std::string probe = "'" + c + "' -c 'import numpy, scipy' >/dev/null 2>&1";
    if (std::system(probe.c_str()) == 0) return c;
  }
  return {};
}

}  // namespace sonopipe::test
