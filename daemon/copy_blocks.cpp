#include "daemon/copy_blocks.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <new>

namespace sonopipe {
namespace {

constexpr std::size_t kPage = 4096;
constexpr std::size_t kHugePage = std::size_t(2) << 20;

// `capacity` bytes (whole pages), page-aligned, mapped with the alignment to spare and the ends
// unmapped. With `huge_pages`, from 2 MiB up: 2 MiB-aligned, transparent huge pages asked for. That
// is an experiment (SONOPIPE_COPY_HUGE_PAGES=1), not the default: one thread's copy of a 2 MB result
// into a socket cost no less from 2 MiB pages (H100 host, docs/host-path.md), and where THP defrag
// is `madvise` a fault in such memory may compact memory first.
void* map_block(std::size_t capacity, bool huge_pages) {
  const bool huge = huge_pages && capacity >= kHugePage;
  const std::size_t alignment = huge ? kHugePage : kPage;
  const std::size_t spare = alignment - kPage;
  void* raw = mmap(nullptr, capacity + spare, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  auto* base = static_cast<std::byte*>(raw);
  const auto offset = reinterpret_cast<std::uintptr_t>(base) % alignment;
  std::byte* aligned = offset ? base + (alignment - offset) : base;
  if (aligned > base) munmap(base, static_cast<std::size_t>(aligned - base));
  if (std::byte* end = aligned + capacity; end < base + capacity + spare)
    munmap(end, static_cast<std::size_t>(base + capacity + spare - end));
  if (huge) madvise(aligned, capacity, MADV_HUGEPAGE);  // a request: the kernel decides
  std::memset(aligned, 0, capacity);  // mapped now, not page by page in the first copy
  return aligned;
}

}  // namespace

CopyBlocks::~CopyBlocks() { drop_kept(); }

CopyBlocks::Block CopyBlocks::take(std::size_t bytes) {
  {
    std::lock_guard lock(mutex_);
    ++taken_;
    if (Block kept = kept_.take(bytes); kept.data) return kept;
  }
  const std::size_t capacity = (std::max<std::size_t>(bytes, 1) + kPage - 1) / kPage * kPage;
  Block block{map_block(capacity, huge_pages_), capacity};
  std::lock_guard lock(mutex_);
  ++mapped_;
  return block;
}

void CopyBlocks::give_back(Block block) {
  if (!block.data) return;
  {
    std::lock_guard lock(mutex_);
    if (kept_.keep(block)) return;
  }
  munmap(block.data, block.capacity);
}

void CopyBlocks::drop_kept() {
  std::multimap<std::size_t, void*> blocks;
  {
    std::lock_guard lock(mutex_);
    blocks = kept_.take_all();
  }
  for (const auto& [capacity, data] : blocks) munmap(data, capacity);
}

std::size_t CopyBlocks::kept_bytes() const {
  std::lock_guard lock(mutex_);
  return kept_.kept_bytes();
}

std::uint64_t CopyBlocks::blocks_taken() const {
  std::lock_guard lock(mutex_);
  return taken_;
}

std::uint64_t CopyBlocks::blocks_mapped() const {
  std::lock_guard lock(mutex_);
  return mapped_;
}

}  // namespace sonopipe
