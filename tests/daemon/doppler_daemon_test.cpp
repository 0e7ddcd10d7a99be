// The ultrafast Doppler chain through the real sonopiped: config/doppler.yaml (beamform ->
// mean_bmode -> clutter_filter -> doppler) on PyMUST's rotating disk read as one 32-frame ensemble
// (tools/formats/must_reader.h). The daemon publishes the B-mode of the mean frame, power and
// velocity on their own topics; the B-mode equals the stages run in this process.
#include <cmath>
#include <complex>
#include <cstring>
#include <map>

#include "stages/beamform/beamform/beamform.h"
#include "stages/doppler/doppler_conventions.h"
#include "stages/doppler/mean_bmode/mean_bmode.h"
#include "tests/daemon/daemon_harness.h"
#include "tests/stages/common/stage_runner.h"
#include "tools/formats/must_reader.h"

using namespace sonopipe;

TEST_CASE("config/doppler.yaml passes --check-config", "[daemon][doppler]") {
  test::DaemonHarness daemon("pipelines: [{name: demo, stages: [{type: convert}]}]");
  std::string output;
  CHECK(daemon.run_to_exit({"--config", test::source_path("config/doppler.yaml"), "--check-config"}, output) == 0);
  INFO(output);
  CHECK(output.find(": ok, ") != std::string::npos);
}

TEST_CASE("PyMUST's disk through sonopiped with config/doppler.yaml publishes the mean-frame B-mode, power and "
          "velocity, the B-mode as the stages compute it",
          "[daemon][doppler]") {
  test::DaemonHarness daemon(test::pipelines_of(test::source_path("config/doppler.yaml")));
  daemon.start();
  formats::ImportOptions options;
  options.ensemble = 32;
  auto reader = formats::open_must(test::source_path("tests/data/pymust-pwi-disk/PWI_disk.mat"), options);
  REQUIRE(reader->frame_count() == 1);
  recording::Frame ensemble = reader->read_frame(0);
  ensemble.meta.sequence = 0;
  daemon.send(wire::frame_header_from_meta(ensemble.meta).SerializeAsString(), ensemble.payload.data(),
              ensemble.payload.size());
  const auto results = daemon.receive_results(4, std::chrono::seconds(120));
  INFO(daemon.log());
  REQUIRE(results.size() == 4);
  std::map<std::string, const test::Received*> by_topic;
  for (const test::Received& r : results) by_topic[r.topic] = &r;
  for (const char* topic : {"result/doppler/bmode", "result/doppler/velocity", "result/doppler/power",
                            "result/doppler/power_db"}) {
    INFO(topic);
    REQUIRE(by_topic.count(topic));
    const TensorSpec spec = wire::tensor_spec_from_result(by_topic.at(topic)->header);
    CHECK(spec.shape_string() == "float32[lateral=126, axial=126]");  // config/doppler.yaml's grid
    CHECK(by_topic.at(topic)->payload.size() == spec.byte_size());
  }
  const v1::ResultHeader& bmode_header = by_topic.at("result/doppler/bmode")->header;
  CHECK(bmode_header.unit() == "dB");
  CHECK(bmode_header.attributes().at(doppler::kMeanOfFramesAttribute) == "32");
  CHECK(by_topic.at("result/doppler/velocity")->header.attributes().count(doppler::kNyquistAttribute) == 1);

  // The same ensemble through the beamform and mean_bmode stages here, with config/doppler.yaml's
  // beamform parameters (the daemon ran the same CPU code on the same bytes: equal to float rounding
  // of a different thread split, none here since every pixel is summed by one thread).
  BeamformParams grid;
  grid.x_min_m = -0.0125;
  grid.x_max_m = 0.0125;
  grid.lateral_pixels = 126;
  grid.z_min_m = 0.010;
  grid.z_max_m = 0.035;
  grid.depth_pixels = 126;
  grid.f_number = 1.0;
  ThreadPool pool(2);
  BeamformStage beamform(grid);
  const test::StageRun beamformed = test::run_stage_cpu(beamform, ensemble.meta, ensemble.meta.payload,
                                                        ensemble.payload.data(), pool);
  MeanBmodeStage mean_bmode(MeanBmodeParams{});
  const test::StageRun expected = test::run_stage_cpu(mean_bmode, ensemble.meta, beamformed.plan.outputs[0].spec,
                                                      beamformed.outputs[0].data(), pool);
  std::vector<float> published(126 * 126);
  std::memcpy(published.data(), by_topic.at("result/doppler/bmode")->payload.data(), published.size() * sizeof(float));
  float top = -1e30f;
  for (std::size_t p = 0; p < published.size(); ++p) {
    INFO("pixel " << p);
    CHECK(published[p] == Approx(expected.as<float>()[p]).margin(1e-3));
    top = std::max(top, published[p]);
  }
  // The disk echoes, the water around it does not: the B-mode spans tens of dB.
  std::size_t dark = 0;
  for (float v : published) dark += v < top - 30;
  CHECK(dark > published.size() / 10);
  auto reply = daemon.control("stop");
  REQUIRE(reply);
  CHECK(daemon.wait_exit() == 0);
}
