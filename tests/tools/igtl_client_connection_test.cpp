// The per-client sender of sonopipe-igtl (tools/igtl/client_connection.h) over a real socket pair:
// latest-only slots per device, first-offered device first, replaced messages counted as conflated,
// a vanished peer ends the connection, and a sender blocked on a peer that never reads can still be
// stopped.
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "tests/support/test_support.h"
#include "tools/igtl/client_connection.h"

using namespace sonopipe::igtl_bridge;
using namespace std::chrono;

namespace {

MessagePointer message(const std::string& device, std::string bytes) {
  return std::make_shared<PackedMessage>(PackedMessage{device, std::move(bytes)});
}

std::string read_exactly(int descriptor, std::size_t count) {
  std::string bytes(count, '\0');
  std::size_t done = 0;
  while (done < count) {
    const ssize_t n = ::recv(descriptor, bytes.data() + done, count - done, 0);
    REQUIRE(n > 0);
    done += static_cast<std::size_t>(n);
  }
  return bytes;
}

template <typename Predicate>
bool wait_until(Predicate done) {  // a generous bound for a loaded machine; never a timing assertion
  const auto deadline = steady_clock::now() + seconds(20);
  while (!done() && steady_clock::now() < deadline) std::this_thread::sleep_for(milliseconds(5));
  return done();
}

}  // namespace

TEST_CASE("a client that does not read gets the newest message of each device once it reads; replaced ones are "
          "counted as conflated",
          "[tools][igtl]") {
  int pair[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, pair) == 0);
  const int peer = pair[1];
  ClientConnection connection(pair[0], "socketpair", 1);
  // 4 MiB is far more than a socket buffer: the sender blocks inside it until the peer reads.
  const std::string big(4 << 20, 'x');
  connection.offer(message("big", big));
  for (int n = 1; n <= 50; ++n) connection.offer(message("a", "a-" + std::to_string(n) + ";"));
  for (int n = 1; n <= 3; ++n) connection.offer(message("b", "b-" + std::to_string(n) + ";"));
  // Whether "big" is already in flight or still in its slot, "a" and "b" each hold only their newest.
  auto counters = connection.counters();
  CHECK(counters.offered == 54);
  CHECK(counters.conflated == 49 + 2);

  // The peer reads: the big one, then the newest "a", then the newest "b" (first-offered device first).
  CHECK(read_exactly(peer, big.size()) == big);
  CHECK(read_exactly(peer, 5) == "a-50;");
  CHECK(read_exactly(peer, 4) == "b-3;");
  REQUIRE(wait_until([&] { return connection.counters().sent == 3; }));
  counters = connection.counters();
  CHECK(counters.bytes_sent == big.size() + 9);
  CHECK(counters.unsent == 0);
  CHECK(connection.alive());

  ::close(peer);  // the client goes away
  REQUIRE(wait_until([&] { return !connection.alive(); }));
  CHECK(connection.end_reason() == "closed by the client");
}

TEST_CASE("a sender blocked on a client that never reads stops when the connection is destroyed", "[tools][igtl]") {
  int pair[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, pair) == 0);
  {
    ClientConnection connection(pair[0], "socketpair", 2);
    connection.offer(message("big", std::string(4 << 20, 'y')));
    connection.offer(message("small", "z"));
    REQUIRE(wait_until([&] { return connection.counters().unsent == 1; }));  // "big" is in flight, blocked
    CHECK(connection.alive());
  }  // the destructor abandons the blocked send and closes the socket
  std::string buffer(1 << 16, '\0');
  ssize_t n;
  while ((n = ::recv(pair[1], buffer.data(), buffer.size(), 0)) > 0) {
  }
  CHECK(n == 0);  // end of stream: the bridge side is closed
  ::close(pair[1]);
}
