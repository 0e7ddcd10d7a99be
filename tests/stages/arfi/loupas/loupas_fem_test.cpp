// A second, realistic truth: the public FEM ARFI displacement field (tests/data/arfi/README.md)
// drives the simulator's scatterers; the chain's displacement must follow it.
#include <cstdio>
#include <fstream>

#include "tests/stages/arfi/arfi_chain.h"
#include "tests/stages/common/python_reference.h"
#include "tests/support/test_support.h"

using namespace sonopipe;

namespace {

// The FEM field: arfidata [axial, lateral, time] in um on 0.2 mm grids from 0, times 0, 2, 4 ms.
struct FemField {
  std::int64_t axial = 0, lateral = 0, times = 0;
  std::vector<double> axial_mm, lateral_mm, time_s, values;

  double at(std::int64_t a, std::int64_t l, std::int64_t t) const { return values[(a * lateral + l) * times + t]; }

  // Bilinear in space (lateral symmetric about the push axis: the model is a quarter), linear in
  // time, 0 before the push and outside the grid in depth.
  double operator()(double depth_m, double lateral_m, double time_s_) const {
    const double z = depth_m * 1e3, x = std::abs(lateral_m) * 1e3;
    if (time_s_ <= time_s.front() || z < axial_mm.front() || z > axial_mm.back()) return 0;
    auto locate = [](const std::vector<double>& grid, double v, std::int64_t& i, double& f) {
      const double step = grid[1] - grid[0];
      double pos = (v - grid[0]) / step;
      pos = std::clamp(pos, 0.0, double(grid.size() - 1) - 1e-9);
      i = static_cast<std::int64_t>(pos);
      f = pos - i;
    };
    std::int64_t ia, il;
    double fa, fl;
    locate(axial_mm, z, ia, fa);
    locate(lateral_mm, x, il, fl);
    std::int64_t it = 0;
    while (it + 2 < times && time_s[it + 1] < time_s_) ++it;
    const double ft = std::clamp((time_s_ - time_s[it]) / (time_s[it + 1] - time_s[it]), 0.0, 1.0);
    auto space = [&](std::int64_t t) {
      return (1 - fa) * ((1 - fl) * at(ia, il, t) + fl * at(ia, il + 1, t)) +
             fa * ((1 - fl) * at(ia + 1, il, t) + fl * at(ia + 1, il + 1, t));
    };
    return (1 - ft) * space(it) + ft * space(it + 1);
  }
};

// Reads the .mat through scipy into a plain text file, then into FemField.
bool load_fem(const std::string& python, FemField& fem) {
  const std::string mat = test::source_path("tests/data/arfi/fem_arfi_gauss_qsym_res_sim_valid.mat");
  char dir_template[] = "/tmp/sonopipe_fem_XXXXXX";
  const std::string dir = mkdtemp(dir_template);
  const std::string script = dir + "/dump.py", text = dir + "/fem.txt";
  std::ofstream(script) << "import sys, numpy as np, scipy.io as sio\n"
                        << "m = sio.loadmat(sys.argv[1]); a = m['arfidata']\n"
                        << "with open(sys.argv[2], 'w') as f:\n"
                        << "  f.write(' '.join(str(n) for n in a.shape) + '\\n')\n"
                        << "  for k in ('axial', 'lat', 't'): f.write(' '.join(repr(float(v)) for v in m[k].ravel()) + '\\n')\n"
                        << "  f.write(' '.join(repr(float(v)) for v in a.ravel(order='C')) + '\\n')\n";
  if (std::system(("'" + python + "' " + script + " '" + mat + "' " + text).c_str()) != 0) return false;
  std::ifstream in(text);
  in >> fem.axial >> fem.lateral >> fem.times;
  auto read = [&](std::vector<double>& v, std::int64_t n) {
    v.resize(n);
    for (auto& x : v) in >> x;
  };
  read(fem.axial_mm, fem.axial);
  read(fem.lateral_mm, fem.lateral);
  read(fem.time_s, fem.times);
  read(fem.values, fem.axial * fem.lateral * fem.times);
  std::system(("rm -rf " + dir).c_str());
  return static_cast<bool>(in);
}

}  // namespace

TEST_CASE("loupas follows the FEM ARFI displacement field (second truth)", "[loupas][sim][fem]") {
  const std::string python = test::python_with_scipy();
  if (python.empty()) {
    WARN("skipped: no python3 with numpy and scipy on PATH to read the .mat (Debian: python3-scipy)");
    return;
  }
  FemField fem;
  REQUIRE(load_fem(python, fem));
  REQUIRE(fem.times == 3);
  ThreadPool pool(2);
  sim::ArfiSimConfig config;
  config.locations = 8;          // 0.2 mm apart about the push axis, as the FEM grid
  config.tracks = 2;             // at 2 and 4 ms: the FEM's own time samples
  config.push_duration_s = 2e-3;
  config.track_prf_hz = 500;
  config.samples = 230;          // 5 to 25 mm: the FEM peak sits at 15 mm
  config.snr_db = 40;
  config.seed = test::fresh_seed();
  config.tissue_field = [&fem](double z, double x, double t) { return fem(z, x, t); };
  const auto set = sim::simulate_arfi(config, &pool);
  double peak = 0;
  for (double v : set.tissue_um) peak = std::max(peak, std::abs(v));
  REQUIRE(peak > 20);  // the FEM peak is 25.9 um at 2 ms
  config.peak_um = peak;  // compare_with_truth selects |truth| >= fraction x peak_um
  const auto r = test::run_arfi_chain(set, "loupas", pool);
  const auto c = test::compare_with_truth(r, set.displacement_um, config, 0.3);
  INFO("FEM peak " << peak << " um: bias " << c.bias_um << " um, rms " << c.rms_um << " um, gain " << c.ratio << " over "
                   << c.compared << " samples (seed " << config.seed << ")");
  REQUIRE(c.compared > 500);
  CHECK(std::abs(c.bias_um) < 0.02 * peak);
  CHECK(c.ratio == Approx(1.0).margin(0.02));
}
