#include "runtime/sample_window.h"

#include <algorithm>

#include "tests/support/test_support.h"

using namespace sonopipe;

TEST_CASE("percentiles use the nearest rank over the window", "[stats]") {
  SampleWindow window(1000);
  CHECK(window.percentiles().count == 0);
  CHECK(window.percentiles().p50 == 0.0);
  std::vector<double> values(100);
  for (int i = 0; i < 100; ++i) values[i] = i + 1;  // 1..100
  std::mt19937_64 rng(test::fresh_seed());
  std::shuffle(values.begin(), values.end(), rng);
  for (double v : values) window.add(v);
  Percentiles p = window.percentiles();
  CHECK(p.count == 100);
  CHECK(p.p50 == 50.0);  // the 50th of 100 sorted values
  CHECK(p.p99 == 99.0);
}

TEST_CASE("the window forgets samples older than its capacity", "[stats]") {
  SampleWindow window(10);
  for (int i = 0; i < 10; ++i) window.add(1000.0);
  for (int i = 0; i < 10; ++i) window.add(1.0);
  Percentiles p = window.percentiles();
  CHECK(p.count == 20);
  CHECK(p.p99 == 1.0);
}
