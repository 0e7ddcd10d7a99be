// Which device (lane) of a pipeline takes a frame. Stateless pipelines spread frames one by one
// in turn; pipelines with a stateful stage keep every stream on one device (stream affinity), so
// the frames a stage pairs never straddle devices. A new stream goes to the device that holds the
// fewest streams. The affinity table is bounded: past `max_streams` the least recently seen stream
// is forgotten (it is placed afresh if it comes back, and its stateful stage primes again).
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <unordered_map>
#include <vector>

namespace sonopipe {

class Placement {
 public:
  static constexpr std::size_t kDefaultMaxStreams = 4096;

  Placement(std::size_t lanes, bool stream_affinity, std::size_t max_streams = kDefaultMaxStreams);

  // The lane (0 .. lanes-1) for the next frame of `stream_id`. `placed_new_stream` is set when
  // this call gave a stream its lane (for the log).
  std::size_t lane_for(std::uint32_t stream_id, bool* placed_new_stream = nullptr);

  std::size_t lanes() const { return streams_per_lane_.size(); }
  bool stream_affinity() const { return stream_affinity_; }
  std::size_t streams_on(std::size_t lane) const { return streams_per_lane_[lane]; }
  std::size_t streams_forgotten() const { return forgotten_; }

 private:
  struct Entry {
    std::size_t lane;
    std::list<std::uint32_t>::iterator recency;  // position in recent_ (front = most recent)
  };
  bool stream_affinity_;
  std::size_t max_streams_;
  std::size_t next_lane_ = 0;  // stateless: round robin
  std::vector<std::size_t> streams_per_lane_;
  std::unordered_map<std::uint32_t, Entry> affinity_;
  std::list<std::uint32_t> recent_;
  std::size_t forgotten_ = 0;
};

}  // namespace sonopipe
