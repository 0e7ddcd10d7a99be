// The frame times that a Verasonics sequence programs: Event(n) runs its transmit/receive, then
// its SeqControl commands; the hardware starts each acquisition (an event that transmits or
// receives) when the timer set by the previous acquisition's timeToNextAcq (or timeToNextEB)
// expires, or later when the events in between hold the sequencer longer (noop delays).
//
// Verasonics units: timeToNextAcq / timeToNextEB argument in microseconds from the start of this
// acquisition to the start of the next; noop argument in 200 ns steps; jump argument an Event
// number (1-based). sync, waitForTransferComplete, transferToHost, returnToMatlab, triggerOut,
// setTPCProfile take no programmed time (sync and waitForTransferComplete wait for the host, so
// real frames can come later than programmed). triggerIn, multiSysSync and pause wait for
// something outside the sequence, and loopCnt/loopTst/cBranch/call/rtn are control flow this
// model does not follow: those make the timing unknown (SequenceTimingUnknown).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace sonopipe::formats {

struct SequenceCommand {
  std::string command;              // SeqControl(n).command
  std::optional<double> argument;   // SeqControl(n).argument, absent when empty
};

struct SequenceEvent {
  bool transmits = false;            // Event(n).tx > 0
  std::size_t receive = 0;           // Event(n).rcv, 1-based Receive index, 0 = none
  std::vector<std::size_t> controls;  // Event(n).seqControl, 1-based SeqControl indices (0 = none)
};

// Why the programmed timing cannot be derived; what() is one line naming the Event or SeqControl.
struct SequenceTimingUnknown : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct ProgrammedFrameTimes {
  // Per buffer frame (0-based), the start of its first acquisition, from the earliest of them.
  std::vector<std::int64_t> frame_start_ns;
  // From that earliest frame start to its repetition after the sequence jumps back; absent when
  // the sequence ends (no jump) before repeating it.
  std::optional<std::int64_t> cycle_ns;
  bool waits_for_host = false;  // a sync or waitForTransferComplete lies on the path
};

// frame_start_receive[f]: the 1-based Receive index whose acquisition starts buffer frame f
// (0-based). Throws SequenceTimingUnknown.
// A number for an error message: up to 10 significant digits, no trailing zeros ("%.10g").
std::string number_text(double value);

ProgrammedFrameTimes programmed_frame_times(const std::vector<SequenceEvent>& events,
                                            const std::vector<SequenceCommand>& commands,
                                            const std::vector<std::size_t>& frame_start_receive);

}  // namespace sonopipe::formats
