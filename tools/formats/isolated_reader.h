// A reader run in a child process, for parsers that damaged input can crash, hang or exhaust
// (libmatio 1.5.23 on damaged MAT v5 files: docs/formats.md, "Bad files"; libhdf5 on damaged UFF, v7.3 and
// recording files: docs/clients.md). The child opens the file and sends the frames it is asked
// for over a socket; whatever happens to the child (a signal, the memory or time limit) becomes
// one FormatError in the caller, "<file>: <what the child was reading>: <parser> failed reading
// it (damaged file?): ...", and the caller's own memory is never touched by the parser.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "tools/formats/acquisition_reader.h"

namespace sonopipe::formats::isolation {

struct Limits {
  // Wall-clock time for opening the file, and again for each frame; the child is killed after it
  // (0: no limit). A legitimate v5 open takes milliseconds; the slowest legitimate frame read,
  // seconds (a v5 variable holds < 2 GiB, which libmatio inflates from its start for every frame).
  // The environment variable SONOPIPE_READER_SECONDS_PER_STEP sets the default of every program.
  int seconds_per_step = 30;
  // Address space of the child (not applied under AddressSanitizer, which reserves terabytes).
  std::size_t address_space_bytes = std::size_t{8} << 30;
};
// The limits of later child processes (tests and fuzz harnesses shorten them).
void set_limits(const Limits& limits);
const Limits& limits();
// Whether SONOPIPE_READER_SECONDS_PER_STEP chose the time limit (then it applies to every format).
bool time_limit_from_environment();

// Runs `open(path, options)` in a child process and returns a reader that asks it for frames.
// `parser` names the library a death is blamed on ("libmatio", "libhdf5").
using Opener = std::function<std::unique_ptr<AcquisitionReader>(const std::string&, const ImportOptions&)>;
std::unique_ptr<AcquisitionReader> open_in_child(const std::string& path, const ImportOptions& options,
                                                 const Opener& open, const std::string& parser,
                                                 const Limits& limits = isolation::limits());

// Runs `question()` (an answer 0..255) in a child process; a child that dies or runs out of time
// is a FormatError "<path>: <object>: <parser> failed <doing> (damaged file?): <how>". An exception
// in `question` is the answer `on_exception`.
int ask_in_child(const std::string& path, const std::string& parser, const std::string& doing,
                 const std::function<int()>& question, int on_exception, const Limits& limits = isolation::limits());

// Runs `check()` in a child process: its answer (false when it throws), nullopt when the child died
// or ran out of time.
std::optional<bool> check_in_child(const std::function<bool()>& check, const Limits& limits = isolation::limits());

// Called by a parser inside the child before each risky step ("Receive", "RcvData{1}"): the
// object a death is reported against. Does nothing outside a child.
void note_progress(const std::string& object);

}  // namespace sonopipe::formats::isolation
