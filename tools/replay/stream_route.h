// How sonopipe-replay --route spreads one acquisition over several receivers (one PUSH or PUB per
// daemon): every frame of stream s goes to endpoint s mod N, N endpoints in the order of the --to
// options. A stream therefore always meets the same daemon, so stateful stages (ncc_track pairs,
// motion filters) see all of its frames, in order; streams are the unit of scale.
#pragma once

#include <cstddef>
#include <cstdint>

namespace sonopipe::replay {

inline std::size_t route_of(std::uint32_t stream_id, std::size_t endpoints) {
  return static_cast<std::size_t>(stream_id) % endpoints;
}

}  // namespace sonopipe::replay
