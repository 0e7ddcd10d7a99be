// sonopipe-igtl's STRING commands (docs/live-parameters.md): an OpenIGTLink client built from the
// Debian library (igtl::ClientSocket, igtl::StringMessage), as 3D Slicer's OpenIGTLinkIF sends them,
// sets and reads a live parameter of a real sonopiped; the bridge answers each with a STRING on
// device sonopipe-reply, the daemon's one-line reason when it refuses.
#include <igtlClientSocket.h>
#include <igtlMessageHeader.h>
#include <igtlStringMessage.h>

#include <fstream>
#include <optional>

#include "tests/daemon/daemon_harness.h"
#include "tests/tools/tool_test_support.h"
#include "tools/common/child_process.h"

using namespace sonopipe;
using std::chrono::seconds;
using std::chrono::steady_clock;

namespace {

class CommandClient {
 public:
  explicit CommandClient(int port) : socket_(igtl::ClientSocket::New()) {
    REQUIRE(socket_->ConnectToServer("127.0.0.1", port) == 0);
    socket_->SetReceiveTimeout(100);
  }
  ~CommandClient() { socket_->CloseSocket(); }

  void send(const std::string& command) {
    igtl::StringMessage::Pointer message = igtl::StringMessage::New();
    message->SetDeviceName("CMD_1");
    message->SetString(command.c_str());
    message->Pack();
    REQUIRE(socket_->Send(message->GetPackPointer(), message->GetPackSize()) != 0);
  }

  // The next STRING on device sonopipe-reply (status strings and images are read past).
  std::string reply() {
    const auto deadline = steady_clock::now() + seconds(20);
    while (steady_clock::now() < deadline) {
      igtl::MessageHeader::Pointer header = igtl::MessageHeader::New();
      header->InitPack();
      if (!read_exactly(header->GetPackPointer(), header->GetPackSize(), deadline)) continue;
      REQUIRE((header->Unpack() & igtl::MessageHeader::UNPACK_HEADER));
      std::string body(header->GetBodySizeToRead(), '\0');
      REQUIRE(read_exactly(body.data(), body.size(), deadline + seconds(10)));
      if (std::string(header->GetDeviceType()) != "STRING" || std::string(header->GetDeviceName()) != "sonopipe-reply")
        continue;
      igtl::StringMessage::Pointer text = igtl::StringMessage::New();
      text->SetMessageHeader(header);
      text->AllocatePack();
      std::memcpy(text->GetPackBodyPointer(), body.data(), body.size());
      REQUIRE((text->Unpack(1) & igtl::MessageHeader::UNPACK_BODY));
      return text->GetString();
    }
    FAIL("no reply on device sonopipe-reply");
    return "";
  }

 private:
  bool read_exactly(void* data, std::size_t length, steady_clock::time_point deadline) {
    auto* bytes = static_cast<char*>(data);
    std::size_t done = 0;
    while (done < length) {
      const int n = socket_->Receive(bytes + done, static_cast<int>(length - done), 0);
      if (n > 0) done += static_cast<std::size_t>(n);
      else if (n == 0) FAIL("the bridge closed the connection");
      else if (steady_clock::now() > deadline && done == 0) return false;
      if (steady_clock::now() > deadline + seconds(10)) FAIL("a message was cut short");
    }
    return true;
  }

  igtl::ClientSocket::Pointer socket_;
};

}  // namespace

TEST_CASE("sonopipe-igtl: a STRING command from an OpenIGTLink client sets a live parameter and gets a STRING answer",
          "[tools][igtl][daemon][live]") {
  test::DaemonHarness daemon("backend: cpu\npipelines:\n  - {name: demo, stages: [{type: convert, params: {scale: 1}}]}\n");
  daemon.start();
  test::TempPath ready("igtl-ready", ".txt"), bridge_log("igtl-bridge", ".log");
  tools::ChildProcess bridge({test::tool("igtl"), "--results", daemon.endpoint("publish"), "--control",
                              daemon.endpoint("control"), "--port", "0", "--ready-file", ready.path},
                             bridge_log.path);
  REQUIRE(test::wait_for_file(ready.path, seconds(20)));
  int port = 0;
  std::string word;
  std::ifstream(ready.path) >> word >> port;
  REQUIRE(port > 0);
  CommandClient client(port);

  client.send("set demo.convert.scale 2.5");
  CHECK(client.reply() == "ok: demo.convert.scale = 2.5 (generation 1, from the next frame)");
  auto reply = daemon.control("get", "demo.convert.scale");
  REQUIRE(reply);
  CHECK(reply->parameters(0).value() == "2.5");

  client.send("get demo.convert.scale");
  CHECK(client.reply() == "ok: demo.convert.scale = 2.5");
  client.send("set demo.convert.scale loud");
  CHECK(client.reply().rfind("error: demo.convert.scale: expected a number", 0) == 0);
  client.send("reboot now");
  CHECK(client.reply().rfind("error: expected `set <pipeline>.<stage>.<parameter> <value>`", 0) == 0);
  reply = daemon.control("get", "demo.convert.scale");
  REQUIRE(reply);
  CHECK(reply->parameters(0).value() == "2.5");  // refusals changed nothing
}
