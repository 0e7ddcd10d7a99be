// sonopipe-record over real sockets: results published by the test are written byte-exact, bad
// messages are counted and do not stop it, SIGINT stops it cleanly, and a raw recording it makes
// replays identically to the original.
#include <google/protobuf/util/message_differencer.h>
#include <signal.h>

#include <zmq.hpp>

#include <cstring>
#include <random>

#include "wire/wire.h"
#include "tests/tools/tool_test_support.h"
#include "tools/common/published_message.h"
#include "tools/common/recording.h"
#include "tools/common/zmq_io.h"
#include "tools/sim/speckle_sim.h"

using namespace sonopipe;
using namespace std::chrono;
using test::TempPath;

namespace {

v1::ResultHeader result_header(std::uint64_t sequence) {
  v1::ResultHeader header;
  header.set_schema_version(wire::kSchemaVersion);
  header.set_pipeline("demo");
  header.set_output("converted");
  header.set_stream_id(3);
  header.set_input_sequence(sequence);
  header.set_acquisition_time_ns(1'000 + static_cast<std::int64_t>(sequence) * 10'000'000);
  header.set_input_kind(v1::FRAME_KIND_IQ);
  header.set_element_type(v1::ELEMENT_TYPE_COMPLEX64);
  for (auto [name, size] : {std::pair<const char*, int>{"line", 3}, {"sample", 16}}) {
    v1::Axis* axis = header.add_axes();
    axis->set_name(name);
    axis->set_size(static_cast<std::uint64_t>(size));
  }
  header.mutable_timing()->set_received_ns(5'000 + static_cast<std::int64_t>(sequence));
  header.set_backend("cpu");
  return header;
}

std::vector<std::byte> random_payload(std::size_t bytes, std::mt19937_64& rng) {
  std::vector<std::byte> payload(bytes);
  for (auto& b : payload) b = static_cast<std::byte>(rng() & 0xff);
  return payload;
}

void publish(zmq::socket_t& socket, const std::vector<std::string>& parts) {
  for (std::size_t i = 0; i < parts.size(); ++i)
    socket.send(zmq::buffer(parts[i]), i + 1 < parts.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
}

std::string bytes_string(const std::vector<std::byte>& bytes) {
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

// Two streams at different rates (IQ int16 and RF float32), interleaved in time.
void write_two_stream_recording(const std::string& path, std::uint64_t seed) {
  sim::SpeckleParams iq;
  iq.shape = {4, 32};
  iq.frames = 6;
  iq.stream_id = 1;
  iq.frame_rate_hz = 100;
  iq.seed = seed;
  sim::SpeckleParams rf = iq;
  rf.kind = FrameKind::rf;
  rf.integer_samples = false;
  rf.stream_id = 2;
  rf.frame_rate_hz = 60;
  rf.frames = 4;
  rf.start_time_ns = 3'000'000;
  sim::SpeckleGenerator a(iq), b(rf);
  recording::Writer writer(path);
  std::size_t i = 0, j = 0;
  while (i < iq.frames || j < rf.frames) {
    const bool take_a = j >= rf.frames ||
                        (i < iq.frames && a.frame_meta(i).acquisition_time_ns <= b.frame_meta(j).acquisition_time_ns);
    sim::SpeckleGenerator& g = take_a ? a : b;
    std::size_t& k = take_a ? i : j;
    const auto payload = g.frame(k);
    writer.append_frame(g.frame_meta(k), payload.data(), payload.size());
    ++k;
  }
}

void check_same_frames(const recording::Reader& a, const recording::Reader& b) {
  REQUIRE(a.streams() == b.streams());
  for (std::uint32_t stream : a.streams()) {
    REQUIRE(a.frame_count(stream) == b.frame_count(stream));
    for (std::size_t i = 0; i < a.frame_count(stream); ++i) {
      const recording::Frame x = a.read_frame(stream, i), y = b.read_frame(stream, i);
      CHECK(wire::frame_header_from_meta(x.meta).SerializeAsString() ==
            wire::frame_header_from_meta(y.meta).SerializeAsString());
      CHECK(x.payload == y.payload);
    }
  }
}

}  // namespace

TEST_CASE("record writes the results it receives byte-exact and counts what it cannot record", "[record]") {
  std::mt19937_64 rng(test::fresh_seed());
  TempPath endpoint("record-pub", ".ipc"), out("record-results"), ready("record-ready", ".ready"), log("record", ".log");
  zmq::context_t context(1);
  zmq::socket_t pub(context, zmq::socket_type::pub);
  pub.set(zmq::sockopt::linger, 0);
  pub.bind(endpoint.ipc());
  tools::ChildProcess recorder({test::tool("record"), "--out", out.path, "--endpoint", endpoint.ipc(), "--topic",
                                "result/", "--topic", "status", "--count", "5", "--ready-file", ready.path},
                               log.path);
  REQUIRE(test::wait_for_file(ready.path, seconds(10)));

  // Bad messages first: each is counted, none stops the recorder.
  publish(pub, {"result/demo/converted", "header only"});
  publish(pub, {"result/demo/converted", "\xff\xff\xff", "x"});
  const v1::ResultHeader good = result_header(0);
  publish(pub, {"result/other/name", good.SerializeAsString(), std::string(3 * 16 * 8, '\0')});
  publish(pub, {"result/demo/converted", good.SerializeAsString(), std::string(7, '\0')});
  v1::Status status;
  status.set_backend("cpu");
  status.set_frames_received(17);
  publish(pub, {"status", status.SerializeAsString()});

  std::vector<v1::ResultHeader> headers;
  std::vector<std::vector<std::byte>> payloads;
  for (std::uint64_t s = 0; s < 6; ++s) {
    if (s == 2) continue;  // a gap the recorder must report
    headers.push_back(result_header(s));
    payloads.push_back(random_payload(3 * 16 * 8, rng));
    publish(pub, {"result/demo/converted", headers.back().SerializeAsString(), bytes_string(payloads.back())});
  }
  const auto exit_code = recorder.wait(seconds(10));
  const std::string output = tools::read_text_file(log.path);
  INFO(output);
  REQUIRE(exit_code.has_value());
  CHECK(*exit_code == 0);
  CHECK(output.find("wrote 5 results") != std::string::npos);
  CHECK(output.find("stopped by count") != std::string::npos);
  CHECK(output.find("rejected 4") != std::string::npos);
  CHECK(output.find("malformed_message: 1") != std::string::npos);
  CHECK(output.find("unparsable_header: 1") != std::string::npos);
  CHECK(output.find("topic_mismatch: 1") != std::string::npos);
  CHECK(output.find("unwritable_result: 1") != std::string::npos);
  CHECK(output.find("sequence 0..5, 1 missing") != std::string::npos);

  recording::Reader reader(out.path);
  CHECK(reader.attribute("created_by") == "sonopipe-record");
  CHECK(reader.attribute("daemon_status").find("frames_received: 17") != std::string::npos);
  REQUIRE(reader.result_count("demo", "converted") == 5);
  for (std::size_t i = 0; i < 5; ++i) {
    const recording::Result result = reader.read_result("demo", "converted", i);
    CHECK(google::protobuf::util::MessageDifferencer::Equals(result.header, headers[i]));
    CHECK(result.payload == payloads[i]);
  }
}

TEST_CASE("record stops on SIGINT and keeps everything it wrote", "[record]") {
  TempPath endpoint("record-sigint", ".ipc"), out("record-sigint"), ready("record-sigint", ".ready"), log("rec", ".log");
  zmq::context_t context(1);
  zmq::socket_t pub(context, zmq::socket_type::pub);
  pub.set(zmq::sockopt::linger, 0);
  pub.bind(endpoint.ipc());
  tools::ChildProcess recorder({test::tool("record"), "--out", out.path, "--endpoint", endpoint.ipc(),
                                "--ready-file", ready.path},
                               log.path);
  REQUIRE(test::wait_for_file(ready.path, seconds(10)));
  for (std::uint64_t s = 0; s < 3; ++s)
    publish(pub, {"result/demo/converted", result_header(s).SerializeAsString(), std::string(3 * 16 * 8, 'x')});
  std::this_thread::sleep_for(milliseconds(300));  // let it write; nothing tells the publisher when
  recorder.send_signal(SIGINT);
  const auto exit_code = recorder.wait(seconds(10));
  const std::string output = tools::read_text_file(log.path);
  INFO(output);
  REQUIRE(exit_code.has_value());
  CHECK(*exit_code == 0);
  CHECK(output.find("stopped by signal") != std::string::npos);
  recording::Reader reader(out.path);
  CHECK(reader.result_count("demo", "converted") == 3);
}

TEST_CASE("a raw recording made by sonopipe-record replays identically", "[record][replay]") {
  TempPath original("raw-original"), copy("raw-copy"), sink("raw-sink", ".ipc"), ready("raw-ready", ".ready"),
      log("raw-record", ".log");
  write_two_stream_recording(original.path, test::fresh_seed());

  // replay -> sonopipe-record as the frame sink (PULL, bound).
  tools::ChildProcess recorder({test::tool("record"), "--out", copy.path, "--no-results", "--raw-endpoint",
                                sink.ipc(), "--raw-bind", "--raw-count", "10", "--ready-file", ready.path},
                               log.path);
  REQUIRE(test::wait_for_file(ready.path, seconds(10)));
  const auto replay = test::run_tool({test::tool("replay"), original.path, "--endpoint", sink.ipc(), "--lossless",
                                      "--speed", "5"});
  INFO(replay.output);
  CHECK(replay.exit_code == 0);
  const auto exit_code = recorder.wait(seconds(10));
  INFO(tools::read_text_file(log.path));
  REQUIRE(exit_code.has_value());
  CHECK(*exit_code == 0);

  recording::Reader a(original.path), b(copy.path);
  check_same_frames(a, b);
  const auto order_a = a.frame_order(), order_b = b.frame_order();
  REQUIRE(order_a.size() == order_b.size());
  for (std::size_t i = 0; i < order_a.size(); ++i) {
    CHECK(order_a[i].stream_id == order_b[i].stream_id);
    CHECK(order_a[i].acquisition_time_ns == order_b[i].acquisition_time_ns);
  }
  CHECK(b.read_frame(1, 0).received_ns > 0);  // the recorder stamps arrival

  // Replaying the copy sends the original's messages, in the original's order.
  TempPath endpoint("raw-replay", ".ipc");
  zmq::context_t context(1);
  zmq::socket_t pull(context, zmq::socket_type::pull);
  pull.set(zmq::sockopt::linger, 0);
  pull.set(zmq::sockopt::rcvtimeo, 10000);
  pull.bind(endpoint.ipc());
  TempPath replay_log("raw-replay", ".log");
  tools::ChildProcess second({test::tool("replay"), copy.path, "--endpoint", endpoint.ipc(), "--lossless", "--max"},
                             replay_log.path);
  std::vector<zmq::message_t> parts;
  for (const recording::FrameRef& ref : order_a) {
    REQUIRE(tools::receive_message(pull, parts));
    REQUIRE(parts.size() == 2);
    const FrameMeta meta = wire::decode_frame(parts[0].data(), parts[0].size(), parts[1].size(), 1u << 30);
    const recording::Frame expected = a.read_frame(ref.stream_id, ref.index);
    CHECK(meta.stream_id == ref.stream_id);
    CHECK(wire::frame_header_from_meta(meta).SerializeAsString() ==
          wire::frame_header_from_meta(expected.meta).SerializeAsString());
    REQUIRE(parts[1].size() == expected.payload.size());
    CHECK(std::memcmp(parts[1].data(), expected.payload.data(), parts[1].size()) == 0);
  }
  CHECK(second.wait(seconds(10)) == std::optional<int>(0));
}

TEST_CASE("record --duration stops on time even when nothing arrives", "[record]") {
  TempPath endpoint("record-duration", ".ipc"), out("record-duration");
  const auto started = steady_clock::now();
  const auto run = test::run_tool({test::tool("record"), "--out", out.path, "--endpoint", endpoint.ipc(),
                                   "--duration", "0.5"});
  INFO(run.output);
  CHECK(run.exit_code == 0);
  CHECK(run.output.find("wrote 0 results") != std::string::npos);
  CHECK(run.output.find("stopped by duration") != std::string::npos);
  CHECK(steady_clock::now() - started < seconds(10));
  recording::Reader reader(out.path);  // an empty recording is still a valid file
  CHECK(reader.result_outputs().empty());
}

// A result read in place from publish.shm: the slot header is [topic '\0' ResultHeader] as the
// daemon writes it; here protobuf's own serializer writes it, then truncated and hostile variants.
TEST_CASE("a publish.shm slot header decodes to its ResultHeader, and damaged ones are refused with their reason",
          "[record][shm]") {
  const v1::ResultHeader written = result_header(7);
  const std::string topic = tools::result_topic(written.pipeline(), written.output());
  const auto slot = [](const std::string& topic_part, const std::string& header_part) {
    return topic_part + std::string(1, '\0') + header_part;
  };
  const auto decode = [](const std::string& bytes) { return tools::decode_published_slot(bytes.data(), bytes.size()); };

  const tools::PublishedMessage good = decode(slot(topic, written.SerializeAsString()));
  REQUIRE(good.kind == tools::PublishedMessage::Kind::result);
  CHECK(good.topic == topic);
  CHECK(google::protobuf::util::MessageDifferencer::Equals(good.header, written));

  const std::string no_terminator = topic;  // a topic that fills the header: no '\0'
  CHECK(decode(no_terminator).reason == "malformed_message");
  CHECK(decode(std::string()).reason == "malformed_message");
  // Cut inside the pipeline name's bytes: a string field shorter than its length prefix. (A cut on a
  // field boundary is a valid shorter message: protobuf cannot tell, nor can the ZeroMQ path.)
  const std::string serialized = written.SerializeAsString();
  const std::size_t name_at = serialized.find(written.pipeline());
  REQUIRE(name_at != std::string::npos);
  CHECK(decode(slot(topic, serialized.substr(0, name_at + 2))).reason == "unparsable_header");
  for (std::size_t cut = 0; cut <= serialized.size(); ++cut) {  // every prefix: refused or a result, never more
    const tools::PublishedMessage message = decode(slot(topic, serialized.substr(0, cut)));
    CHECK((message.kind == tools::PublishedMessage::Kind::refused) == !message.reason.empty());
  }
  CHECK(decode(slot(topic, std::string("\x0a\xff", 2))).reason == "unparsable_header");
  CHECK(decode(slot("result/elsewhere/out", written.SerializeAsString())).reason == "topic_mismatch");
}
