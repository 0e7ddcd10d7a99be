// Nelder-Mead (stages/perfusion/nelder_mead.h) against scipy.optimize.fmin and the published fminsearch
// Rosenbrock results.
#include "stages/perfusion/nelder_mead.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <random>
#include <sstream>

#include "stages/perfusion/perfusion_problem.h"
#include "stages/perfusion/perfusion_voxel_fit.h"
#include "tests/stages/perfusion/perfusion_test_data.h"

using namespace sonopipe;
using namespace sonopipe::perfusion;

namespace {

struct Rosenbrock {
  int calls = 0;
  double operator()(const double* x) {
    ++calls;
    return 100.0 * (x[1] - x[0] * x[0]) * (x[1] - x[0] * x[0]) + (1.0 - x[0]) * (1.0 - x[0]);
  }
};

double relative_difference(double a, double b) {
  return std::abs(a - b) / std::max(std::abs(b), 1e-300);
}

}  // namespace

TEST_CASE("nelder_mead reproduces scipy's Rosenbrock counts and minimum (fminsearch examples)",
          "[nelder_mead]") {
  int checked = 0;
  for (const auto& row : test::read_csv(test::perfusion_data("nelder_mead_banana_reference.csv"))) {
    if (row.at("source").rfind("scipy", 0) != 0) continue;
    const double x0[2] = {std::stod(row.at("x0_1")), std::stod(row.at("x0_2"))};
    NelderMeadSettings settings;  // the reference used xatol = fatol = 1e-4, maxiter = maxfev = 400
    settings.cost_tolerance = 1e-4;
    settings.parameter_tolerance = 1e-4;
    settings.max_iterations = 400;
    settings.max_evaluations = 400;
    Rosenbrock f;
    const auto r = nelder_mead<2>(f, x0, settings);
    INFO("x0 = " << x0[0] << ", " << x0[1]);
    CHECK(r.iterations == std::stoi(row.at("nit")));
    CHECK(r.evaluations == std::stoi(row.at("nfev")));
    CHECK(f.calls == r.evaluations);
    CHECK(r.stop == NelderMeadStop::converged);
    // Same operations in the same order as scipy: agreement to rounding of the CSV's repr().
    CHECK(relative_difference(r.x[0], std::stod(row.at("x1"))) < 1e-10);
    CHECK(relative_difference(r.x[1], std::stod(row.at("x2"))) < 1e-10);
    CHECK(relative_difference(r.cost, std::stod(row.at("fval"))) < 1e-10);
    ++checked;
  }
  CHECK(checked == 2);
}

TEST_CASE("nelder_mead stops at the iteration and evaluation limits", "[nelder_mead]") {
  const double x0[2] = {-1.2, 1.0};
  NelderMeadSettings settings;
  settings.cost_tolerance = 0.0;
  settings.max_iterations = 20;
  Rosenbrock f;
  auto r = nelder_mead<2>(f, x0, settings);
  CHECK(r.iterations == 20);  // scipy's nit: the initial simplex counts as iteration 1
  CHECK(r.stop == NelderMeadStop::max_iterations);
  settings.max_iterations = 600;
  settings.max_evaluations = 50;
  r = nelder_mead<2>(f, x0, settings);
  CHECK(r.evaluations >= 50);
  CHECK(r.evaluations <= 50 + 2);  // the limit is checked once per iteration, as in scipy
  CHECK(r.stop == NelderMeadStop::max_evaluations);
}

TEST_CASE("nelder_mead matches scipy.optimize.fmin step for step on the perfusion cost",
          "[nelder_mead][scipy]") {
  const std::string python = test::python_with_scipy();
  REQUIRE_FALSE(python.empty());  // install python3-scipy (tools/install-deps.sh) or set SONOPIPE_PYTHON
  const auto madym = test::read_madym_series();
  FitProblem problem(madym.time_s, madym.aif, madym.pif);
  const ModelInputs in = problem.view();

  // Cases: the madym curves from the wang2012 start and from madym's truth, plus fresh random
  // truths with noise.
  struct Case {
    std::array<double, 5> x0;  // SI
    std::vector<double> tissue;
  };
  std::vector<Case> cases;
  auto si = [](std::array<double, 5> edge) { to_si(edge.data()); return edge; };
  cases.push_back({si({10, 80, 200, 2, 3}), madym.discm});
  cases.push_back({si({10, 80, 200, 2, 3}), madym.discm_noise});
  cases.push_back({si({12, 48, 100, 6, 6}), madym.discm_noise});
  const std::uint64_t seed = test::fresh_seed();
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  std::normal_distribution<double> noise(0.0, 0.002);
  for (int c = 0; c < 4; ++c) {
    std::array<double, 5> truth = si({5 + 30 * uniform(rng), 20 + 100 * uniform(rng),
                                      50 + 300 * uniform(rng), 1 + 8 * uniform(rng),
                                      1 + 8 * uniform(rng)});
    std::vector<double> tissue = model_curve(truth.data(), problem, Convolution::recursive);
    for (double& v : tissue) v += noise(rng);
    cases.push_back({si({10, 80, 200, 2, 3}), tissue});
  }

  const std::string input_path = test::binary_path("nelder_mead_test_cases.txt");
  const std::string output_path = test::binary_path("nelder_mead_test_scipy.txt");
  {
    std::ofstream out(input_path);
    out << std::setprecision(17) << problem.dt_s() << " " << in.samples << "\n";
    for (double v : problem.arterial()) out << v << " ";
    out << "\n";
    for (double v : problem.portal()) out << v << " ";
    out << "\n";
    for (const auto& c : cases) {
      for (double v : c.x0) out << v << " ";
      for (double v : c.tissue) out << v << " ";
      out << "\n";
    }
  }
  const std::string command = "'" + python + "' '" +
                              test::source_path("tests/stages/perfusion/perfusion_scipy_reference.py") +
                              "' '" + input_path + "' '" + output_path + "'";
  REQUIRE(std::system(command.c_str()) == 0);
  std::ifstream scipy_out(output_path);
  NelderMeadSettings settings;  // wang2012 / scipy: ftol 1e-8, xtol inf, maxiter 600, maxfun 1000
  for (std::size_t c = 0; c < cases.size(); ++c) {
    int nit = 0, nfev = 0, warn = 0;
    double fopt = 0, x[5];
    std::string line;
    REQUIRE(std::getline(scipy_out, line));
    std::istringstream ss(line);
    ss >> nit >> nfev >> warn >> fopt >> x[0] >> x[1] >> x[2] >> x[3] >> x[4];
    RecursiveCost cost{in, cases[c].tissue.data(), 1};
    const auto r = nelder_mead<5>(cost, cases[c].x0.data(), settings);
    INFO("case " << c << ": scipy nit " << nit << " nfev " << nfev << " warnflag " << warn
                 << "; ours " << r.iterations << " " << r.evaluations);
    CHECK(r.iterations == nit);
    CHECK(r.evaluations == nfev);
    CHECK(static_cast<int>(r.stop) == warn);
    // The costs are bit-identical (same operations), so only the text round trip differs.
    CHECK(relative_difference(r.cost, fopt) < 1e-10);
    for (int j = 0; j < 5; ++j) CHECK(relative_difference(r.x[j], x[j]) < 1e-10);
  }
}
