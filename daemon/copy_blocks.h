// Heap memory the publisher copies a result into when it cannot send the result's own buffer: the
// lane's spare result buffers are all held by ZeroMQ's queues (a subscriber behind, or results
// published faster than the publisher's I/O thread writes them), a shared-memory slot while a
// subscriber lags, a result without an owner.
//
// Blocks are reused, not allocated per result. A fresh 2 MB `std::vector` per result (before
// 2026-11-26) was freed by ZeroMQ's I/O thread once every subscriber had it, so that thread, the
// one that bounds the convert rows of issue 23, also paid the allocator's trims or munmaps, and the
// completion thread a page fault per 4 KiB when it wrote the next copy.
//
// A block is anonymous memory in whole 4 KiB pages, written once when it is mapped (huge pages
// only as an experiment, below). Blocks given back are kept for reuse up to `keep_bytes` (a block
// is reused for a request it holds without wasting more than the request again: KeptBlocks' rule);
// past that they are unmapped. The owner drops the kept ones when copies stop (drop_kept).
// Thread-safe: blocks are taken on completion threads and given back from ZeroMQ's I/O thread (or
// whichever thread closes a message ZeroMQ dropped).
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>

#include "runtime/gpu_resources.h"

namespace sonopipe {

class CopyBlocks {
 public:
  // `huge_pages`: blocks of 2 MiB or more start on a 2 MiB boundary, with transparent huge pages
  // asked for (SONOPIPE_COPY_HUGE_PAGES=1, an experiment; copy_blocks.cpp says why not by default).
  explicit CopyBlocks(std::size_t keep_bytes, bool huge_pages = false) : kept_(keep_bytes), huge_pages_(huge_pages) {}
  ~CopyBlocks();
  CopyBlocks(const CopyBlocks&) = delete;
  CopyBlocks& operator=(const CopyBlocks&) = delete;

  using Block = KeptBlocks::Block;
  // A block of at least `bytes` (capacity: whole pages): a kept one, or newly mapped.
  // Throws std::bad_alloc when no memory can be mapped.
  Block take(std::size_t bytes);
  // Keeps `block` for reuse, or unmaps it past keep_bytes.
  void give_back(Block block);
  // Unmaps every kept block (the heartbeat's memory return after a subscriber left).
  void drop_kept();

  std::size_t kept_bytes() const;
  std::uint64_t blocks_mapped() const;  // blocks mapped so far, reuse not counted
  std::uint64_t blocks_taken() const;   // take() calls so far

 private:
  mutable std::mutex mutex_;
  KeptBlocks kept_;
  const bool huge_pages_;
  std::uint64_t mapped_ = 0, taken_ = 0;
};

}  // namespace sonopipe
