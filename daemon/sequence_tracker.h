// Per-stream sequence numbers at the door: how many frames of a stream went missing before this one.
// At most `capacity` streams are remembered; a new stream beyond that makes the tracker forget the
// least recently seen one (whose next frame then starts afresh, no gap counted), so a sender that
// invents stream ids cannot grow the daemon's memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>

namespace sonopipe {

class SequenceTracker {
 public:
  explicit SequenceTracker(std::size_t capacity) : capacity_(capacity) {}

  // Frames missing between the last frame of `stream` and `sequence` (0 for a new or forgotten stream).
  // `forgot` is set when remembering this stream made the tracker forget another one.
  std::uint64_t arrive(std::uint32_t stream, std::uint64_t sequence, bool& forgot) {
    forgot = false;
    ++clock_;
    auto it = streams_.find(stream);
    if (it == streams_.end()) {
      if (streams_.size() >= capacity_) {
        auto oldest = streams_.begin();
        for (auto s = streams_.begin(); s != streams_.end(); ++s)
          if (s->second.last_seen < oldest->second.last_seen) oldest = s;
        streams_.erase(oldest);
        forgot = true;
      }
      streams_.emplace(stream, Entry{sequence + 1, clock_});
      return 0;
    }
    const std::uint64_t lost = sequence > it->second.next ? sequence - it->second.next : 0;
    it->second = Entry{sequence + 1, clock_};
    return lost;
  }

  std::size_t size() const { return streams_.size(); }

 private:
  struct Entry {
    std::uint64_t next;       // the sequence number expected next
    std::uint64_t last_seen;  // arrival count when the stream last sent
  };
  std::size_t capacity_;
  std::uint64_t clock_ = 0;
  std::unordered_map<std::uint32_t, Entry> streams_;
};

}  // namespace sonopipe
