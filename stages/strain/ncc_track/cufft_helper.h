// The client side of sonopipe-cufft-plan --serve (tools/cufft_plan): one long-lived helper process
// that makes a cuFFT plan of each shape it is asked for, so that cuFFT's run-time compilation of a
// size new to the machine happens there and not in this process (see PlanCache in ncc_track.cu).
// Plain C++ (no CUDA): the protocol is tested against stand-in helpers without a GPU.
//
// Protocol: one request line per shape ("DEVICE TYPE N0 [N1 [N2]] BATCH\n") on the helper's stdin,
// one answer line on its stdout: "ok" (the plan was made) or "fail <reason>". The helper exits at EOF
// on its stdin (this process closed it, or died). Its stdin and stdout are one end of a socket pair,
// so that a write to a dead helper is an EPIPE error (MSG_NOSIGNAL), never a SIGPIPE.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <mutex>
#include <string>

namespace sonopipe::ncc {

class CufftHelper {
 public:
  enum class Answer {
    made,         // the helper made the plan ("ok"): the kernels are in the JIT cache
    failed,       // the helper answered "fail ...": it compiled nothing
    unavailable,  // no helper (none given, it cannot start, it died twice, it timed out): plan here
  };
  struct Counts {
    int starts = 0, made = 0, failed = 0, deaths = 0, timeouts = 0, unavailable = 0;
  };
  // The process's helper, which ncc_track's plan cache asks (2 s timeout). Never destroyed: the
  // helper sees EOF and exits when this process ends.
  static CufftHelper& of_process();
  explicit CufftHelper(std::chrono::milliseconds timeout = std::chrono::milliseconds(2000)) : timeout_(timeout) {}
  ~CufftHelper();  // closes the helper's stdin (it exits) and reaps it
  CufftHelper(const CufftHelper&) = delete;
  CufftHelper& operator=(const CufftHelper&) = delete;

  // Asks `program` (started with `program --serve` on the first request, or again when the program
  // differs from the running one's) to make the plan `request` describes (one line, without its
  // newline), and waits for the answer at most the timeout. A helper that died (EOF, EPIPE) or did not
  // answer in time (it is killed) leaves this request unavailable; it is restarted once, at the next
  // request; after a second such end the program is not asked again (unavailable from then on, one
  // log line). Another program (a test, $SONOPIPE_CUFFT_PLAN changed) starts afresh.
  Answer make(const std::string& program, const std::string& request);
  Counts counts() const;

 private:
  int start(const std::string& program);  // 0, or the error
  void stop(bool kill_it);
  void give_up();

  const std::chrono::milliseconds timeout_;
  mutable std::mutex mutex_;
  std::string program_;  // the running (or last) helper's program
  pid_t child_ = -1;
  int socket_ = -1;      // our end: requests out, answers in
  int ends_ = 0;         // how often the program's helper ended (died, or was killed when it hung)
  bool given_up_ = false;
  Counts counts_;
};

}  // namespace sonopipe::ncc
