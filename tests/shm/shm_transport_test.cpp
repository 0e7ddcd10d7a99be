// The shared-memory transport on its own: byte-exact round trips, both modes, back-pressure, the
// acknowledgement, processes SIGKILLed mid-message, a creator restarted, permissions, hostile
// descriptors. Processes are real (fork): what a dead process held must come back.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "shm/consumer.h"
#include "shm/producer.h"
#include "shm/signal.h"
#include "tests/support/test_support.h"

using namespace sonopipe::shm;
using Clock = std::chrono::steady_clock;

namespace {

// A fresh endpoint name; its object is removed at the end of the test whatever was left in it
// (lossless messages nobody took are kept by design).
// `open` must throw a ShmError of one line holding every part of `expected`.
template <class Open>
void require_one_line_error(Open open, const char* if_not, std::initializer_list<const char*> expected) {
  try {
    open();
    FAIL(if_not);
  } catch (const ShmError& e) {
    const std::string what = e.what();
    for (const char* part : expected) CHECK(what.find(part) != std::string::npos);
    CHECK(what.find('\n') == std::string::npos);
  }
}

struct TestEndpoint {
  TestEndpoint() {
    static std::atomic<int> counter{0};
    value = "shm://test-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
  }
  ~TestEndpoint() { shm_unlink(object_name(value).c_str()); }
  std::string value;
};

Clock::time_point in(std::chrono::milliseconds ms) { return Clock::now() + ms; }
Clock::time_point now() { return Clock::now(); }  // a deadline already passed: never waits

PoolOptions options(std::uint32_t slots, std::uint64_t payload, Mode mode) {
  PoolOptions o;
  o.slot_count = slots;
  o.header_capacity = 4096;
  o.payload_capacity = payload;
  o.mode = mode;
  return o;
}

// Message i: header "h<i>", payload of `bytes` seeded bytes.
std::vector<std::byte> payload_of(std::uint64_t seed, std::uint64_t i, std::size_t bytes) {
  std::mt19937_64 random(seed * 1000003 + i);
  std::vector<std::byte> data(bytes);
  for (auto& b : data) b = static_cast<std::byte>(random());
  return data;
}

void send(Producer& producer, std::uint64_t seed, std::uint64_t i, std::size_t bytes) {
  auto claim = producer.claim(in(std::chrono::seconds(20)));
  REQUIRE(claim);
  const std::string header = "h" + std::to_string(i);
  std::memcpy(claim->header.data(), header.data(), header.size());
  const auto data = payload_of(seed, i, bytes);
  std::memcpy(claim->payload.data(), data.data(), data.size());
  producer.commit(*claim, header.size(), bytes);
}

// Checks the message is message i, byte for byte, and releases it.
void expect_message(Consumer& consumer, const Message& m, std::uint64_t seed, std::uint64_t i, std::size_t bytes) {
  const std::string header(reinterpret_cast<const char*>(m.header), m.header_bytes);
  CHECK(header == "h" + std::to_string(i));
  const auto data = payload_of(seed, i, bytes);
  REQUIRE(m.payload_bytes == bytes);
  CHECK(std::memcmp(m.payload, data.data(), bytes) == 0);
  CHECK(reinterpret_cast<std::uintptr_t>(m.payload) % kPayloadAlignment == 0);
  consumer.release(m.slot);
}

// Sizes from 1000 bytes up to the 1 MiB payload capacity.
std::size_t size_of_message(int i) { return 1000 + static_cast<std::size_t>(i) * 99991 % ((1 << 20) - 1000); }

int wait_child(pid_t child) {
  int status = 0;
  waitpid(child, &status, 0);
  return status;
}

}  // namespace

TEST_CASE("shm: descriptors outside the slot, overlapping, misaligned or empty are refused by reason") {
  const std::uint64_t slot = 8192, header_capacity = 4096;
  auto check = [&](SlotDescriptor d) { return check_descriptor(d, slot, header_capacity); };
  CHECK(check({0, 100, 4096, 4096}) == DescriptorError::none);
  CHECK(check({0, 100, 4096, 0}) == DescriptorError::none);
  CHECK(check({0, 0, 4096, 10}) == DescriptorError::empty_header);
  CHECK(check({0, 4097, 4160, 10}) == DescriptorError::header_too_large);
  CHECK(check({8000, 200, 0, 10}) == DescriptorError::header_outside_slot);
  CHECK(check({UINT64_MAX, 1, 0, 10}) == DescriptorError::header_outside_slot);
  CHECK(check({0, 100, 4096, 4097}) == DescriptorError::payload_outside_slot);
  CHECK(check({0, 100, 64, UINT64_MAX - 10}) == DescriptorError::payload_outside_slot);
  CHECK(check({0, 100, 4100, 10}) == DescriptorError::payload_misaligned);
  CHECK(check({0, 100, 64, 10}) == DescriptorError::ranges_overlap);
  CHECK(check({128, 100, 64, 100}) == DescriptorError::ranges_overlap);
}

TEST_CASE("shm: endpoint names map to /dev/shm objects and bad names are refused") {
  CHECK(object_name("shm://scanner-1.rf_0") == "/sonopipe.scanner-1.rf_0");
  CHECK_THROWS_AS(object_name("shm://"), std::invalid_argument);
  CHECK_THROWS_AS(object_name("shm://../x"), std::invalid_argument);
  CHECK_THROWS_AS(object_name("shm://a/b"), std::invalid_argument);
  CHECK_THROWS_AS(object_name("ipc://x"), std::invalid_argument);
  CHECK_THROWS_AS(make_geometry(0, 4096, 1), std::invalid_argument);
  CHECK_THROWS_AS(make_geometry(kMaxSlots + 1, 4096, 1), std::invalid_argument);
}

TEST_CASE("shm: a missing pool is a one-line error naming the fix") {
  require_one_line_error([] { Producer producer("shm://no-such-pool-" + std::to_string(getpid())); },
                         "opened a pool that does not exist", {"no such pool", "start sonopiped"});
}

TEST_CASE("shm: lossless round trip across processes is byte-exact, in order, and acknowledged") {
  const std::uint64_t seed = sonopipe::test::fresh_seed();
  const TestEndpoint name;
  const std::string& endpoint = name.value;
  auto pool = std::shared_ptr<Pool>(Pool::create(endpoint, options(4, 1 << 20, Mode::lossless)));
  Consumer consumer(pool, Mode::lossless);
  constexpr int kMessages = 200;
  const pid_t child = fork();
  if (child == 0) {
    Producer producer(endpoint);
    for (int i = 0; i < kMessages; ++i) {
      auto claim = producer.claim(in(std::chrono::seconds(30)));
      if (!claim) _exit(2);
      const std::string header = "h" + std::to_string(i);
      std::memcpy(claim->header.data(), header.data(), header.size());
      const auto data = payload_of(seed, i, size_of_message(i));
      std::memcpy(claim->payload.data(), data.data(), data.size());
      producer.commit(*claim, header.size(), data.size());
    }
    _exit(producer.wait_delivered(in(std::chrono::seconds(30))) && producer.counters().delivered == kMessages ? 0 : 3);
  }
  std::uint64_t last_sequence = 0;
  for (int i = 0; i < kMessages; ++i) {
    auto m = consumer.take(in(std::chrono::seconds(30)));
    REQUIRE(m);
    CHECK(m->sequence > last_sequence);
    last_sequence = m->sequence;
    CHECK(m->producer_pid == child);
    expect_message(consumer, *m, seed, i, size_of_message(i));
  }
  const int status = wait_child(child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);  // the producer saw every message acknowledged
  CHECK(consumer.counters().taken == kMessages);
}

TEST_CASE("shm: a lossless producer waits when every slot is in use and goes on when one is released") {
  const TestEndpoint name;
  const std::string& endpoint = name.value;
  auto pool = std::shared_ptr<Pool>(Pool::create(endpoint, options(2, 4096, Mode::lossless)));
  Consumer consumer(pool, Mode::lossless);
  Producer producer(endpoint);
  send(producer, 1, 0, 100);
  send(producer, 1, 1, 100);
  CHECK_FALSE(producer.claim(now()));  // both slots wait for the consumer: back-pressure
  auto first = consumer.take(now());
  REQUIRE(first);
  CHECK_FALSE(producer.claim(now()));  // taken but still read in place: not free yet
  CHECK(producer.counters().delivered == 1);
  consumer.release(first->slot);
  auto claim = producer.claim(now());
  REQUIRE(claim);
  producer.abandon(*claim);
}

TEST_CASE("shm: lossless messages committed with no consumer wait for the next one and are then acknowledged") {
  const std::uint64_t seed = sonopipe::test::fresh_seed();
  const TestEndpoint name;
  const std::string& endpoint = name.value;
  auto pool = std::shared_ptr<Pool>(Pool::create(endpoint, options(4, 4096, Mode::lossless)));
  Producer producer(endpoint);
  for (int i = 0; i < 3; ++i) send(producer, seed, i, 500);
  CHECK(producer.counters().undelivered() == 3);
  CHECK_FALSE(producer.wait_delivered(now()));
  Consumer consumer(pool, Mode::lossless);
  for (int i = 0; i < 3; ++i) {
    auto m = consumer.take(now());
    REQUIRE(m);
    expect_message(consumer, *m, seed, i, 500);
  }
  CHECK(producer.counters().delivered == 3);
  CHECK(producer.wait_delivered(now()));
}

TEST_CASE("shm: a live pool keeps the newest messages and counts what it overwrote") {
  const std::uint64_t seed = sonopipe::test::fresh_seed();
  const TestEndpoint name;
  const std::string& endpoint = name.value;
  auto pool = std::shared_ptr<Pool>(Pool::create(endpoint, options(3, 4096, Mode::live)));
  Consumer consumer(pool, Mode::lossless);  // a live pool makes every consumer live
  Producer producer(endpoint);
  for (int i = 0; i < 10; ++i) send(producer, seed, i, 300);  // never waits
  for (int i = 7; i < 10; ++i) {  // the three newest are left, oldest first
    auto m = consumer.take(now());
    REQUIRE(m);
    expect_message(consumer, *m, seed, i, 300);
  }
  CHECK_FALSE(consumer.take(now()));
  CHECK(consumer.counters().missed == 7);
  const ProducerCounters counters = producer.counters();
  CHECK(counters.overwritten == 7);
  CHECK(counters.delivered == 3);
  CHECK(counters.undelivered() == 0);
}

TEST_CASE("shm: a message committed with a hold is neither freed nor overwritten until its producer lets go") {
  // The daemon commits a result into its pool and sends the same bytes over ZeroMQ: the slot must
  // keep them while ZeroMQ reads, also in a live pool whose consumers have taken and released it.
  const std::uint64_t seed = sonopipe::test::fresh_seed();
  const TestEndpoint name;
  const std::string& endpoint = name.value;
  auto pool = std::shared_ptr<Pool>(Pool::create(endpoint, options(2, 4096, Mode::live)));
  Consumer consumer(pool, Mode::live);
  Producer producer(endpoint);
  auto held = producer.claim(in(std::chrono::seconds(5)));
  REQUIRE(held);
  const auto data = payload_of(seed, 0, 512);
  std::memcpy(held->header.data(), "h0", 2);
  std::memcpy(held->payload.data(), data.data(), data.size());
  producer.commit(*held, 2, data.size(), true);
  auto m = consumer.take(now());
  REQUIRE(m);
  expect_message(consumer, *m, seed, 0, 512);  // taken and released by its only consumer
  // Live: newer messages take the other slot over and over, never the held one.
  for (int i = 1; i < 6; ++i) send(producer, seed, i, 512);
  CHECK(std::memcmp(held->payload.data(), data.data(), data.size()) == 0);
  CHECK(producer.counters().overwritten == 4);  // 1..4 overwritten by their successors
  // With both slots in use (one held, one being written) a claim finds none.
  auto writing = producer.claim(now());
  REQUIRE(writing);
  CHECK_FALSE(producer.claim(now()));
  producer.abandon(*writing);
  producer.release_hold(held->slot);
  auto first = producer.claim(now());
  auto second = producer.claim(now());
  CHECK(first);
  CHECK(second);  // the slot that was held is free again
}

TEST_CASE("shm: the hold of a producer SIGKILLed after its commit goes with it") {
  const TestEndpoint name;
  const std::string& endpoint = name.value;
  auto pool = std::shared_ptr<Pool>(Pool::create(endpoint, options(1, 4096, Mode::lossless)));
  Consumer consumer(pool, Mode::lossless);
  const pid_t child = fork();
  if (child == 0) {
    Producer producer(endpoint);
    auto claim = producer.claim(in(std::chrono::seconds(5)));
    if (!claim) _exit(2);
    std::memcpy(claim->header.data(), "h", 1);
    producer.commit(*claim, 1, 16, true);
    pause();
    _exit(0);
  }
  auto m = consumer.take(in(std::chrono::seconds(10)));
  REQUIRE(m);
  consumer.release(m->slot);
  Producer next(endpoint);
  CHECK_FALSE(next.claim(now()));  // the only slot is held by the live child
  kill(child, SIGKILL);
  wait_child(child);
  CHECK(next.claim(in(std::chrono::seconds(5))));  // reclaimed once it is dead
}

TEST_CASE("shm: a live observer of a lossless pool never holds the producer back") {
  const std::uint64_t seed = sonopipe::test::fresh_seed();
  const TestEndpoint name;
  const std::string& endpoint = name.value;
  auto pool = std::shared_ptr<Pool>(Pool::create(endpoint, options(2, 4096, Mode::lossless)));
  Consumer daemon(pool, Mode::lossless);
  Consumer recorder(endpoint, Mode::live);
  Producer producer(endpoint);
  send(producer, seed, 0, 64);
  auto seen = recorder.take(now());
  REQUIRE(seen);
  expect_message(recorder, *seen, seed, 0, 64);
  CHECK(producer.counters().delivered == 0);  // the observer does not acknowledge
  auto m = daemon.take(now());
  REQUIRE(m);
  expect_message(daemon, *m, seed, 0, 64);
  CHECK(producer.counters().delivered == 1);
}

TEST_CASE("shm: a producer SIGKILLed mid-message loses nothing it committed and its slot comes back") {
  const std::uint64_t seed = sonopipe::test::fresh_seed();
  const TestEndpoint name;
  const std::string& endpoint = name.value;
  auto pool = std::shared_ptr<Pool>(Pool::create(endpoint, options(4, 1 << 16, Mode::lossless)));
  Consumer consumer(pool, Mode::lossless);
  const pid_t child = fork();
  if (child == 0) {
    Producer producer(endpoint);
    for (int i = 0; i < 3; ++i) {
      auto claim = producer.claim(in(std::chrono::seconds(30)));
      const std::string header = "h" + std::to_string(i);
      std::memcpy(claim->header.data(), header.data(), header.size());
      const auto data = payload_of(seed, i, 5000);
      std::memcpy(claim->payload.data(), data.data(), data.size());
      producer.commit(*claim, header.size(), data.size());
    }
    auto half = producer.claim(in(std::chrono::seconds(30)));  // the 4th slot, half written
    std::memset(half->payload.data(), 0xab, 2000);
    raise(SIGKILL);
  }
  CHECK(WIFSIGNALED(wait_child(child)));
  for (int i = 0; i < 3; ++i) {
    auto m = consumer.take(in(std::chrono::seconds(10)));
    REQUIRE(m);
    expect_message(consumer, *m, seed, i, 5000);
  }
  CHECK_FALSE(consumer.take(now()));  // the half-written message was never committed
  Producer next(endpoint);
  std::vector<Producer::Claim> claims;
  for (int i = 0; i < 4; ++i) {  // all four slots, the dead producer's included
    auto claim = next.claim(now());
    REQUIRE(claim);
    claims.push_back(*claim);
  }
  for (const auto& claim : claims) next.abandon(claim);
  CHECK(pool->header().dead_producers == 1);
}

TEST_CASE("shm: a consumer SIGKILLed while reading gives its slots back and what it had not taken goes to the next") {
  const std::uint64_t seed = sonopipe::test::fresh_seed();
  const TestEndpoint name;
  const std::string& endpoint = name.value;
  auto pool = std::shared_ptr<Pool>(Pool::create(endpoint, options(3, 4096, Mode::lossless)));
  Producer producer(endpoint);
  int ready[2];
  REQUIRE(pipe(ready) == 0);
  const pid_t child = fork();
  if (child == 0) {
    Consumer consumer(endpoint, Mode::lossless);
    if (write(ready[1], "a", 1) != 1) _exit(2);
    auto m = consumer.take(in(std::chrono::seconds(30)));  // held, never released
    if (!m) _exit(3);
    if (write(ready[1], "t", 1) != 1) _exit(2);
    pause();
    _exit(0);
  }
  char byte = 0;
  REQUIRE(read(ready[0], &byte, 1) == 1);
  for (int i = 0; i < 3; ++i) send(producer, seed, i, 200);
  REQUIRE(read(ready[0], &byte, 1) == 1);  // message 0 is being read by the child
  CHECK_FALSE(producer.claim(now()));
  kill(child, SIGKILL);
  wait_child(child);
  close(ready[0]);
  close(ready[1]);
  Consumer next(pool, Mode::lossless);  // the daemon restarted, say
  for (int i = 1; i < 3; ++i) {
    auto m = next.take(now());
    REQUIRE(m);
    expect_message(next, *m, seed, i, 200);
  }
  CHECK(producer.counters().delivered == 3);  // message 0 was taken by the child before it died
  auto claim = producer.claim(in(std::chrono::seconds(5)));  // its slot came back
  REQUIRE(claim);
  producer.abandon(*claim);
  CHECK(pool->header().dead_consumers == 1);
}

TEST_CASE("shm: a creator killed with messages waiting is adopted by the next, and producers go on") {
  const std::uint64_t seed = sonopipe::test::fresh_seed();
  const TestEndpoint name;
  const std::string& endpoint = name.value;
  const PoolOptions o = options(4, 4096, Mode::lossless);
  int ready[2];
  REQUIRE(pipe(ready) == 0);
  const pid_t daemon = fork();
  if (daemon == 0) {
    auto pool = std::shared_ptr<Pool>(Pool::create(endpoint, o));
    Consumer consumer(pool, Mode::lossless);
    if (write(ready[1], "c", 1) != 1) _exit(2);
    auto m = consumer.take(in(std::chrono::seconds(30)));  // takes message 0, then dies reading it
    if (!m) _exit(3);
    if (write(ready[1], "t", 1) != 1) _exit(2);
    pause();
    _exit(0);
  }
  char byte = 0;
  REQUIRE(read(ready[0], &byte, 1) == 1);
  Producer producer(endpoint);
  send(producer, seed, 0, 100);
  REQUIRE(read(ready[0], &byte, 1) == 1);
  send(producer, seed, 1, 100);
  send(producer, seed, 2, 100);
  CHECK_THROWS_WITH(Pool::create(endpoint, o), Catch::Contains("in use by sonopiped pid"));
  kill(daemon, SIGKILL);
  wait_child(daemon);
  close(ready[0]);
  close(ready[1]);
  auto pool = std::shared_ptr<Pool>(Pool::create(endpoint, o));  // adopts
  Consumer consumer(pool, Mode::lossless);
  for (int i = 1; i < 3; ++i) {
    auto m = consumer.take(now());
    REQUIRE(m);
    expect_message(consumer, *m, seed, i, 100);
  }
  send(producer, seed, 3, 100);  // the same producer, no reconnect
  auto m = consumer.take(now());
  REQUIRE(m);
  expect_message(consumer, *m, seed, 3, 100);
  CHECK(producer.counters().delivered == 4);
}

TEST_CASE("shm: a clean close removes the pool and producers are told to open it again") {
  const TestEndpoint name;
  const std::string& endpoint = name.value;
  auto pool = std::shared_ptr<Pool>(Pool::create(endpoint, options(1, 4096, Mode::lossless)));
  auto consumer = std::make_unique<Consumer>(pool, Mode::lossless);
  Producer producer(endpoint);
  send(producer, 1, 0, 10);
  auto m = consumer->take(now());
  REQUIRE(m);  // taken but held: the only slot stays in use
  consumer.reset();
  pool.reset();
  CHECK(access(("/dev/shm" + object_name(endpoint)).c_str(), F_OK) != 0);
  CHECK_THROWS_WITH(producer.claim(in(std::chrono::seconds(5))), Catch::Contains("open it again"));
}

TEST_CASE("shm: pools are created for their owner only, or a group, never for others") {
  const TestEndpoint name;
  const std::string& endpoint = name.value;
  const std::string path = "/dev/shm" + object_name(endpoint);
  {
    auto pool = Pool::create(endpoint, options(1, 4096, Mode::lossless));
    struct stat info {};
    REQUIRE(stat(path.c_str(), &info) == 0);
    CHECK((info.st_mode & 0777) == 0600);
  }
  {
    PoolOptions o = options(1, 4096, Mode::lossless);
    o.permissions = 0666;
    auto pool = Pool::create(endpoint, o);
    struct stat info {};
    REQUIRE(stat(path.c_str(), &info) == 0);
    CHECK((info.st_mode & 0777) == 0660);
  }
  if (geteuid() != 0) {
    WARN("not root: the other-user checks are skipped");
    return;
  }
  auto pool = Pool::create(endpoint, options(1, 4096, Mode::lossless));
  const pid_t child = fork();
  if (child == 0) {
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(2);
    try {
      Producer producer(endpoint);
      _exit(3);
    } catch (const ShmError& e) {
      _exit(std::string(e.what()).find("permission denied") != std::string::npos ? 0 : 4);
    }
  }
  const int status = wait_child(child);
  CHECK(WEXITSTATUS(status) == 0);  // another user cannot open it
  pool.reset();
  // An object planted by another user under our name is refused, not used.
  const int fd = shm_open(object_name(endpoint).c_str(), O_RDWR | O_CREAT | O_EXCL, 0666);
  REQUIRE(fd >= 0);
  REQUIRE(fchown(fd, 65534, 65534) == 0);
  close(fd);
  CHECK_THROWS_WITH(Pool::create(endpoint, options(1, 4096, Mode::lossless)), Catch::Contains("belongs to uid 65534"));
  shm_unlink(object_name(endpoint).c_str());
}

TEST_CASE("shm: hostile descriptors written into a slot are refused with a counted reason and the slot comes back") {
  const std::uint64_t seed = sonopipe::test::fresh_seed();
  const TestEndpoint name;
  const std::string& endpoint = name.value;
  auto pool = std::shared_ptr<Pool>(Pool::create(endpoint, options(2, 4096, Mode::lossless)));
  Consumer consumer(pool, Mode::lossless);
  Producer producer(endpoint);
  const std::vector<std::pair<SlotDescriptor, DescriptorError>> hostile = {
      {{0, 1, 4096, 1ull << 40}, DescriptorError::payload_outside_slot},
      {{1ull << 62, 10, 4096, 1}, DescriptorError::header_outside_slot},
      {{0, 100, 4097, 1}, DescriptorError::payload_misaligned},
      {{0, 0, 4096, 1}, DescriptorError::empty_header},
      {{0, 1 << 20, 4096, 1}, DescriptorError::header_too_large},
      {{0, 100, 0, 100}, DescriptorError::ranges_overlap},
  };
  for (const auto& [descriptor, reason] : hostile) {
    send(producer, seed, 0, 10);
    // A hostile producer rewrites the committed descriptor (shared memory is writable to it).
    for (std::uint32_t i = 0; i < 2; ++i)
      if (pool->slot(i).state == static_cast<std::uint32_t>(SlotState::ready)) pool->slot(i).descriptor = descriptor;
    CHECK_FALSE(consumer.take(now()));
    CHECK(consumer.counters().refused[static_cast<std::size_t>(reason)] == 1);
  }
  CHECK(consumer.counters().refused_total() == hostile.size());
  send(producer, seed, 1, 10);  // the slots came back; a good message still goes through
  auto m = consumer.take(now());
  REQUIRE(m);
  expect_message(consumer, *m, seed, 1, 10);
}

TEST_CASE("shm: many producers and consumer threads keep every lossless message exactly once") {
  const std::uint64_t seed = sonopipe::test::fresh_seed();
  const TestEndpoint name;
  const std::string& endpoint = name.value;
  auto pool = std::shared_ptr<Pool>(Pool::create(endpoint, options(4, 4096, Mode::lossless)));
  Consumer consumer(pool, Mode::lossless);
  constexpr int kProducers = 3, kEach = 300;
  std::vector<std::thread> threads;
  for (int p = 0; p < kProducers; ++p)
    threads.emplace_back([&, p] {
      Producer producer(endpoint);
      for (int i = 0; i < kEach; ++i) {
        auto claim = producer.claim(in(std::chrono::seconds(30)));
        if (!claim) return;
        const std::uint64_t id = p * kEach + i;
        std::memcpy(claim->header.data(), &id, sizeof id);
        const auto data = payload_of(seed, id, 256);
        std::memcpy(claim->payload.data(), data.data(), data.size());
        producer.commit(*claim, sizeof id, data.size());
      }
    });
  std::vector<int> seen(kProducers * kEach, 0);
  int mismatches = 0;
  for (int n = 0; n < kProducers * kEach; ++n) {
    auto m = consumer.take(in(std::chrono::seconds(30)));
    REQUIRE(m);
    std::uint64_t id = 0;
    std::memcpy(&id, m->header, sizeof id);
    REQUIRE(id < seen.size());
    ++seen[id];
    const auto data = payload_of(seed, id, 256);
    mismatches += std::memcmp(m->payload, data.data(), 256) != 0;
    consumer.release(m->slot);
  }
  for (auto& thread : threads) thread.join();
  CHECK(mismatches == 0);
  CHECK(std::count(seen.begin(), seen.end(), 1) == kProducers * kEach);
}

// A producer opening `endpoint` on a thread of its own (Pool::open, 2 s for the creator) while the
// test makes the pool; finished() joins it and sends one message through the pool made meanwhile.
struct WaitingOpener {
  std::atomic<bool> opened{false}, done{false};  // done: opened or refused
  std::string error;  // read after finished() joined
  std::unique_ptr<Producer> producer;
  std::thread thread;

  explicit WaitingOpener(const std::string& endpoint)
      : thread([this, endpoint] {
          try {
            producer = std::make_unique<Producer>(endpoint);
            opened = true;
          } catch (const std::exception& e) {
            error = e.what();
          }
          done = true;
        }) {}

  void finished(const std::shared_ptr<Pool>& pool, std::uint64_t seed) {
    thread.join();
    INFO(error);
    REQUIRE(opened);
    Consumer consumer(pool, Mode::lossless);
    send(*producer, seed, 0, 300);
    auto m = consumer.take(in(std::chrono::seconds(5)));
    REQUIRE(m);
    expect_message(consumer, *m, seed, 0, 300);
  }
};

TEST_CASE("shm: an opener waits for a pool its creator is still making (empty object, header not yet written)") {
  const std::uint64_t seed = sonopipe::test::fresh_seed();
  const TestEndpoint name;
  const std::string& endpoint = name.value;
  const std::string object = object_name(endpoint);
  // The creator slowed between its steps: shm_open (size 0), then ftruncate (all zeros, magic 0);
  // Pool::create then finds this object of ours unreadable as a pool and makes it afresh.
  for (const bool sized : {false, true}) {
    INFO((sized ? "sized, header not written" : "size 0"));
    const int fd = shm_open(object.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    REQUIRE(fd >= 0);
    if (sized) REQUIRE(ftruncate(fd, 1 << 20) == 0);
    close(fd);
    WaitingOpener opener(endpoint);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    CHECK_FALSE(opener.opened);  // still waiting, not refused ("not a sonopipe pool of this version (layout 0)")
    opener.finished(std::shared_ptr<Pool>(Pool::create(endpoint, options(2, 4096, Mode::lossless))), seed);
  }  // the creator's clean close removes the object for the next round
}

TEST_CASE("shm: an opener that saw an unfinished pool waits through its creator replacing it") {
  // Pool::create unlinks an object it cannot read as a pool and makes it afresh: between the two
  // there is no object. An opener that already saw the unfinished one waits through that gap (here
  // held open for 150 ms, where the creator's own is microseconds) instead of "no such pool".
  const std::uint64_t seed = sonopipe::test::fresh_seed();
  const TestEndpoint name;
  const std::string& endpoint = name.value;
  const std::string object = object_name(endpoint);
  const int fd = shm_open(object.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  REQUIRE(fd >= 0);
  REQUIRE(ftruncate(fd, 1 << 20) == 0);  // sized, header not written
  close(fd);
  WaitingOpener opener(endpoint);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // it has seen the unfinished object
  REQUIRE(shm_unlink(object.c_str()) == 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  CHECK_FALSE(opener.done);  // still waiting, not refused
  opener.finished(std::shared_ptr<Pool>(Pool::create(endpoint, options(2, 4096, Mode::lossless))), seed);
}

TEST_CASE("shm: an object whose creator never finished it is refused after the wait, in one line") {
  const TestEndpoint name;
  const int fd = shm_open(object_name(name.value).c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  REQUIRE(fd >= 0);
  REQUIRE(ftruncate(fd, 1 << 20) == 0);
  close(fd);
  require_one_line_error([&] { Pool::open(name.value, std::chrono::milliseconds(100)); },
                         "opened a pool whose header was never written", {"never written", "start sonopiped again"});
}

TEST_CASE("shm: a lossless pool that keeps no unclaimed messages frees what its dead or absent consumer did not take") {
  const std::uint64_t seed = sonopipe::test::fresh_seed();
  const TestEndpoint name;
  const std::string& endpoint = name.value;
  PoolOptions o = options(2, 4096, Mode::lossless);
  o.hold_unclaimed = false;  // the daemon's publish pool
  auto pool = std::shared_ptr<Pool>(Pool::create(endpoint, o));
  Producer producer(endpoint);
  // No lossless consumer attached: each message is free at its commit; the producer never waits.
  for (int i = 0; i < 6; ++i) send(producer, seed, i, 100);
  // A lossless consumer that dies without taking: its pending messages are freed with it.
  int ready[2];
  REQUIRE(pipe(ready) == 0);
  const pid_t child = fork();
  if (child == 0) {
    Consumer consumer(endpoint, Mode::lossless);
    if (write(ready[1], "a", 1) != 1) _exit(2);
    pause();
    _exit(0);
  }
  char byte = 0;
  REQUIRE(read(ready[0], &byte, 1) == 1);
  for (int i = 6; i < 8; ++i) send(producer, seed, i, 100);
  CHECK_FALSE(producer.claim(now()));  // both slots wait for the attached consumer (back-pressure)
  kill(child, SIGKILL);
  wait_child(child);
  close(ready[0]);
  close(ready[1]);
  auto claim = producer.claim(in(std::chrono::seconds(5)));  // the dead consumer's slots came back
  REQUIRE(claim);
  producer.abandon(*claim);
  CHECK(pool->header().dead_consumers == 1);
  CHECK(producer.counters().delivered == 0);  // nothing was taken: nothing counts as delivered
}
