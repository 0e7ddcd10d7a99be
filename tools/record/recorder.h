// The recorder behind sonopipe-record: results [topic][ResultHeader][payload] from a SUB socket
// (or read in place from the daemon's publish.shm pool) and, optionally, raw frames
// [FrameHeader][payload] from a PULL or SUB socket (or the daemon's shm:// ingest pool), written
// to a recording (tools/common/recording.h) until a count, a duration, an idle time or a signal.
// Several result endpoints: one SUB socket connects to every daemon's PUB (ZeroMQ fair-queues
// between them), ready once each has completed its handshake. Messages that cannot be recorded are counted by reason and logged at a limited rate; the
// recorder keeps going.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tools/common/zmq_io.h"

namespace sonopipe::record {

struct RecorderOptions {
  std::string out;                               // recording to create
  // Daemon PUB endpoints, one SUB connected to all (results of several daemons merged; each
  // daemon's results stay in its order); empty = record no results. One shm://<name> instead:
  // the daemon's publish.shm pool, read in place (result_mode).
  std::vector<std::string> endpoints;
  // shm:// results: lossless = every result, the daemon waits for the recorder (a lossless pool;
  // a live pool makes every subscriber live); live = newest first, misses counted.
  std::string result_mode = "lossless";          // lossless | live
  std::vector<std::string> topics = {"result/"};  // SUB prefixes ("status" keeps the last Status)
  bool bind = false;
  // Frame source; "" = record no raw frames. shm://<name>: the daemon's ingest pool, read in place
  // beside the daemon (raw_pattern pull: lossless, the producer waits for the recorder too; sub:
  // a live observer that counts what it missed as sequence gaps).
  std::string raw_endpoint;
  std::string raw_pattern = "pull";              // pull | sub
  bool raw_bind = false;
  std::size_t result_count = 0;                  // stop after this many results (0 = no limit)
  std::size_t raw_count = 0;                     // stop after this many raw frames (0 = no limit)
  double duration_s = 0;                         // stop after this long (0 = no limit)
  double idle_timeout_s = 0;                     // stop when nothing arrived for this long after the first message
  std::size_t max_frame_bytes = std::size_t{1} << 30;
  std::string ready_file;                        // touched once the sockets are attached and subscribed
  int receive_high_water_mark = 1000;            // messages queued per socket while the file is written
  tools::CurveClient curve;                      // keys for the daemon's publish socket (security.curve)
};

struct SeriesCount {
  std::size_t messages = 0;
  std::size_t bytes = 0;
  std::uint64_t first_sequence = 0, last_sequence = 0;
  std::size_t sequence_gaps = 0;                 // missing sequence numbers (lost upstream or by a full queue)
  std::size_t out_of_order = 0;
};

struct RecorderReport {
  std::map<std::string, SeriesCount> results;   // by "<pipeline>/<output>"
  std::map<std::uint32_t, SeriesCount> streams;  // raw frames by stream id
  std::map<std::string, std::size_t> rejected;   // by reason
  std::size_t status_messages = 0;
  double duration_s = 0;
  double active_s = 0;                           // from the first message recorded to the last
  std::string stop_reason;                       // "count", "duration", "idle", "signal", "pool removed"
  // shm:// pools: the mode the recorder got ("" = not read from a pool) and what a live reader
  // missed (overwritten before the recorder took it; a missed raw frame is a sequence gap too).
  std::string results_mode, raw_mode;
  std::uint64_t results_missed = 0, frames_missed = 0;
  std::size_t results_written() const;
  std::size_t frames_written() const;
};

// Runs until a stop condition; the file is flushed and closed before it returns. Throws on setup
// errors (cannot create the file, bind or connect).
RecorderReport run_recorder(const RecorderOptions& options);

std::string describe(const RecorderReport& report, const RecorderOptions& options);

}  // namespace sonopipe::record
