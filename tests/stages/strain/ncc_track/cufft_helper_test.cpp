// The protocol of ncc_track's cuFFT helper client (CufftHelper) against stand-in helpers (shell
// scripts): no GPU needed. The real sonopipe-cufft-plan --serve is checked in ncc_track_test [cuda].
#include "stages/strain/ncc_track/cufft_helper.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "tests/support/test_support.h"

using sonopipe::ncc::CufftHelper;
using Answer = CufftHelper::Answer;

namespace {

// A folder of stand-in helpers; each notes "start" when started and every request line it reads in
// calls.txt, then runs `body` for each line (variables: $line, $n = the request's number from 1).
struct StandIns {
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("cufft-helper-test-" + std::to_string(::getpid()));
  StandIns() { std::filesystem::create_directories(dir); }
  ~StandIns() { std::filesystem::remove_all(dir); }
  std::string make(const std::string& name, const std::string& body) const {
    const std::filesystem::path path = dir / name;
    std::ofstream(path) << "#!/bin/sh\n[ \"$1\" = --serve ] || exit 3\necho start >> '" << log().string()
                        << "'\nn=0\nwhile read line; do\n  n=$((n + 1))\n  echo \"$line\" >> '" << log().string()
                        << "'\n" << body << "\ndone\n";
    std::filesystem::permissions(path, std::filesystem::perms::owner_all);
    return path.string();
  }
  std::filesystem::path log() const { return dir / "calls.txt"; }
  std::vector<std::string> calls() const {
    std::vector<std::string> lines;
    std::ifstream in(log());
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  }
};

}  // namespace

TEST_CASE("one helper started once answers each shape's request: ok is made, fail is failed", "[ncc_track]") {
  const StandIns stand_ins;
  const std::string helper = stand_ins.make("answers.sh", "  if [ $n = 2 ]; then echo 'fail no such size'; else echo ok; fi");
  CufftHelper client;
  CHECK(client.make(helper, "0 42 5 35 7") == Answer::made);
  CHECK(client.make(helper, "0 44 5 35 7") == Answer::failed);
  CHECK(client.make(helper, "0 42 5 36 7") == Answer::made);
  CHECK(stand_ins.calls() == std::vector<std::string>{"start", "0 42 5 35 7", "0 44 5 35 7", "0 42 5 36 7"});
  const CufftHelper::Counts counts = client.counts();
  CHECK(counts.starts == 1);
  CHECK(counts.made == 2);
  CHECK(counts.failed == 1);
  CHECK(counts.unavailable == 0);
}

TEST_CASE("a helper that dies is restarted once at the next shape; after a second death none is asked",
          "[ncc_track]") {
  const StandIns stand_ins;
  // Answers its first request, then dies on the second without answering.
  const std::string helper = stand_ins.make("dies.sh", "  [ $n = 2 ] && exit 1\n  echo ok");
  CufftHelper client;
  CHECK(client.make(helper, "0 42 8 1") == Answer::made);
  CHECK(client.make(helper, "0 42 9 1") == Answer::unavailable);  // EOF: planned in-process
  CHECK(client.make(helper, "0 42 10 1") == Answer::made);        // the restart
  CHECK(client.make(helper, "0 42 11 1") == Answer::unavailable);  // died again
  CHECK(client.make(helper, "0 42 12 1") == Answer::unavailable);  // not started again
  CHECK(stand_ins.calls() == std::vector<std::string>{"start", "0 42 8 1", "0 42 9 1", "start", "0 42 10 1", "0 42 11 1"});
  const CufftHelper::Counts counts = client.counts();
  CHECK(counts.starts == 2);
  CHECK(counts.deaths == 2);
  CHECK(counts.made == 2);
  CHECK(counts.unavailable == 3);
  // Another program starts afresh (a test, or $SONOPIPE_CUFFT_PLAN changed).
  CHECK(client.make(stand_ins.make("fine.sh", "  echo ok"), "0 42 13 1") == Answer::made);
}

TEST_CASE("a helper that does not answer within the timeout is killed and the shape planned in-process",
          "[ncc_track]") {
  const StandIns stand_ins;
  // Reads the request, answers nothing, and would wait a minute (exec: the kill ends the sleep too).
  const std::string helper = stand_ins.make("hangs.sh", "  exec sleep 60");
  CufftHelper client(std::chrono::milliseconds(200));
  CHECK(client.make(helper, "0 42 8 1") == Answer::unavailable);
  CHECK(client.counts().timeouts == 1);
  // The next shape restarts it (once); it hangs again: given up.
  CHECK(client.make(helper, "0 42 9 1") == Answer::unavailable);
  CHECK(client.make(helper, "0 42 10 1") == Answer::unavailable);
  const CufftHelper::Counts counts = client.counts();
  CHECK(counts.starts == 2);
  CHECK(counts.timeouts == 2);
  CHECK(counts.unavailable == 3);
  CHECK(stand_ins.calls() == std::vector<std::string>{"start", "0 42 8 1", "start", "0 42 9 1"});
}

TEST_CASE("a helper that cannot be started leaves every shape to the process, without a second try",
          "[ncc_track]") {
  const StandIns stand_ins;
  CufftHelper client;
  const std::string missing = (stand_ins.dir / "no-such-helper").string();
  CHECK(client.make(missing, "0 42 8 1") == Answer::unavailable);
  CHECK(client.make(missing, "0 42 9 1") == Answer::unavailable);
  CHECK(client.counts().starts == 0);
  CHECK(client.counts().unavailable == 2);
}
