#include "tests/stages/doppler/flow_chain.h"
#include "tests/support/test_support.h"
#include <cstdlib>
using namespace sonopipe;
TEST_CASE("scratch", "[scratch]") {
  ThreadPool pool(2);
  auto env = [](const char* k, double d) { const char* v = std::getenv(k); return v ? std::atof(v) : d; };
  sim::FlowSimConfig c;
  c.seed = env("SEED", 7); c.frames = env("FRAMES", 64);
  c.snr_db = env("SNR", 20);
  c.psf_lateral_m = env("PSFX", 0.25e-3);
  c.tissue_velocity_z_m_per_s = env("VT", 5e-3);
  const auto sim = sim::simulate_flow_iq(c, &pool);
  ClutterFilterParams f; f.tissue_rank = env("K", 4);
  if (env("AUTO", 0) > 0) f.rank_choice = ClutterFilterParams::RankChoice::similarity;
  f.block_lateral = env("BL", 0); f.block_axial = env("BA", 0);
  if (env("POLY", -1) >= 0) { f.method = ClutterFilterParams::Method::polynomial; f.polynomial_order = env("POLY", 2); }
  DopplerParams e; e.average_lateral = env("AL", 3); e.average_axial = env("AA", 5);
  const auto images = test::run_doppler_chain(sim.meta, sim.iq, f, e, pool);
  ClutterFilterStage st(f);
  for (double frac : {0.5, 0.8, 1.0}) {
    const auto m = test::flow_metrics(c, sim, images, frac);
    WARN("frac " << frac << " rms% " << 100 * m.velocity_rms_m_per_s / sim.truth.peak_axial_velocity_m_per_s << " bias " << m.velocity_bias_m_per_s
         << " slope " << m.slope << " missing " << m.missing << "/" << m.lumen_pixels << " rej " << m.clutter_rejection_db << " contrast " << m.contrast_db);
  }
}
