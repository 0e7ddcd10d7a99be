#include "tools/formats/verasonics_timing.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string_view>

namespace sonopipe::formats {

namespace {

constexpr double kNanosecondsPerMicrosecond = 1e3;
constexpr double kNanosecondsPerNoopStep = 200.0;  // noop argument unit
// Bounds against hostile values: one hour per command, far beyond the hardware's timers (seconds),
// and a day between frames, which keeps every time exact in int64 nanoseconds.
constexpr double kLongestCommandNs = 3600e9;
constexpr double kLongestSpanNs = 86400e9;
// Events walked before giving up on a sequence that never repeats a frame (a loop without
// acquisitions): far more than any real sequence has per frame cycle.
constexpr std::size_t kMostEventsWalked = std::size_t{1} << 22;

// Commands that take no programmed time on the hardware's path.
constexpr std::string_view kTimeless[] = {"returnToMatlab", "transferToHost", "markTransferProcessed", "triggerOut",
                                          "setTPCProfile",  "setRcvProfile",  "DMA"};
// Commands that hold the hardware until the host catches up: the programmed time is a lower bound.
constexpr std::string_view kHostWaits[] = {"sync", "waitForTransferComplete"};
// Commands that wait for something outside the sequence.
constexpr std::string_view kOutsideWaits[] = {"triggerIn", "multiSysSync", "pause"};
// Control flow this model does not follow.
constexpr std::string_view kUnfollowedFlow[] = {"loopCnt", "loopTst", "cBranch", "call", "rtn"};

template <std::size_t N>
bool one_of(const std::string& name, const std::string_view (&names)[N]) {
  return std::find(std::begin(names), std::end(names), name) != std::end(names);
}


std::string control_name(std::size_t control) { return "SeqControl(" + std::to_string(control) + ")"; }
std::string event_name(std::size_t event) { return "Event(" + std::to_string(event + 1) + ")"; }

// A command's duration in nanoseconds: its argument in `unit_ns` steps, positive and bounded.
double duration_ns(const SequenceCommand& command, std::size_t control, double unit_ns, const char* unit) {
  const std::string where = control_name(control) + ".argument (" + command.command + ")";
  if (!command.argument) throw SequenceTimingUnknown(where + ": missing, expected a time in " + unit);
  const double ns = *command.argument * unit_ns;
  if (!(ns > 0) || !(ns <= kLongestCommandNs))
    throw SequenceTimingUnknown(where + ": " + number_text(*command.argument) + " is not a time in " + unit +
                                " (expected > 0, at most one hour)");
  return ns;
}

}  // namespace

std::string number_text(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.10g", value);
  return text;
}

ProgrammedFrameTimes programmed_frame_times(const std::vector<SequenceEvent>& events,
                                            const std::vector<SequenceCommand>& commands,
                                            const std::vector<std::size_t>& frame_start_receive) {
  if (events.empty()) throw SequenceTimingUnknown("Event: no events");
  const std::size_t frames = frame_start_receive.size();
  std::vector<std::optional<double>> start_ns(frames);
  std::optional<std::size_t> first_frame;
  double first_ns = 0.0;
  ProgrammedFrameTimes result;

  // The last acquisition: its event, start, the timer it set and how long the sequencer has been
  // held (noop) since.
  std::optional<std::size_t> last_event;
  double last_ns = 0.0, held_ns = 0.0;
  double timer_ns = -1.0;  // < 0: no timer set since the last acquisition

  std::size_t next = 0;
  for (std::size_t walked = 0; next < events.size(); ++walked) {
    if (walked == kMostEventsWalked)
      throw SequenceTimingUnknown("Event: no frame of the buffer repeats within " + std::to_string(walked) +
                                  " events (a loop without acquisitions?)");
    const std::size_t current = next++;
    const SequenceEvent& event = events[current];
    const bool acquires = event.transmits || event.receive != 0;
    if (acquires) {
      double now_ns = 0.0;
      if (last_event) {
        if (timer_ns < 0)
          throw SequenceTimingUnknown(event_name(*last_event) +
                                      " acquires without timeToNextAcq: the next acquisition follows when the hardware "
                                      "is ready, which the save does not tell");
        // The timer runs from the start of the last acquisition; a longer noop holds the sequencer past it.
        now_ns = last_ns + std::max(timer_ns, held_ns);
      }
      last_event = current, last_ns = now_ns, held_ns = 0.0, timer_ns = -1.0;
      if (now_ns - first_ns > kLongestSpanNs)
        throw SequenceTimingUnknown(event_name(current) + ": more than a day after the first frame");
      const auto frame = std::find(frame_start_receive.begin(), frame_start_receive.end(), event.receive);
      if (event.receive != 0 && frame != frame_start_receive.end()) {
        const auto f = static_cast<std::size_t>(frame - frame_start_receive.begin());
        if (!first_frame) first_frame = f, first_ns = now_ns;
        if (!start_ns[f]) {
          start_ns[f] = now_ns - first_ns;
        } else if (f == *first_frame) {
          result.cycle_ns = std::llround(now_ns - first_ns);
          break;
        } else {
          throw SequenceTimingUnknown(event_name(current) + " starts frame " + std::to_string(f + 1) +
                                      " again before frame " + std::to_string(*first_frame + 1) + " repeats");
        }
      }
    }
    bool stop = false;
    for (std::size_t control : event.controls) {
      if (control == 0) continue;  // Event.seqControl 0: none
      if (control > commands.size())
        throw SequenceTimingUnknown(event_name(current) + ".seqControl: refers to " + control_name(control) +
                                    ", SeqControl has " + std::to_string(commands.size()) + " elements");
      const SequenceCommand& command = commands[control - 1];
      const std::string& name = command.command;
      if (name == "timeToNextAcq" || name == "timeToNextEB") {
        if (!acquires)
          throw SequenceTimingUnknown(control_name(control) + " (" + name + ") on " + event_name(current) +
                                      ", which neither transmits nor receives");
        timer_ns = duration_ns(command, control, kNanosecondsPerMicrosecond, "microseconds");
      } else if (name == "noop") {
        held_ns += duration_ns(command, control, kNanosecondsPerNoopStep, "200 ns steps");
      } else if (name == "jump") {
        const double target = command.argument.value_or(0.0);
        if (!(target >= 1 && target <= static_cast<double>(events.size())) || target != std::floor(target))
          throw SequenceTimingUnknown(control_name(control) + ".argument (jump): " +
                                      (command.argument ? number_text(target) : std::string("missing")) +
                                      ", expected an Event number 1.." + std::to_string(events.size()));
        next = static_cast<std::size_t>(target) - 1;
      } else if (name == "stop") {
        stop = true;
      } else if (one_of(name, kHostWaits)) {
        result.waits_for_host = true;
      } else if (one_of(name, kOutsideWaits)) {
        throw SequenceTimingUnknown(control_name(control) + " (" + name + ") on " + event_name(current) +
                                    " waits for a signal outside the sequence");
      } else if (one_of(name, kUnfollowedFlow)) {
        throw SequenceTimingUnknown(control_name(control) + " (" + name + ") on " + event_name(current) +
                                    ": control flow the reader does not follow");
      } else if (!one_of(name, kTimeless)) {
        throw SequenceTimingUnknown(control_name(control) + ".command: unknown command '" + name + "'");
      }
    }
    if (stop) break;
  }
  for (std::size_t f = 0; f < frames; ++f) {
    if (!start_ns[f])
      throw SequenceTimingUnknown("Event: no event acquires Receive(" + std::to_string(frame_start_receive[f]) +
                                  "), the first acquisition of frame " + std::to_string(f + 1));
    result.frame_start_ns.push_back(std::llround(*start_ns[f]));
  }
  return result;
}

}  // namespace sonopipe::formats
