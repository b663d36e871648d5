// Deterministic synthetic values for the worker's synthetic model, identical on host and device.
//
// SyntheticGradient(seed, step, rank, index) is a pure function of its four integers: a
// SplitMix64-style integer hash mapped to a float in [-1, 1) on a grid of 2^-23. Only integer
// operations and one exact int -> float conversion are involved, so the CPU and CUDA backends (and
// any rank recomputing another rank's values) get bit-identical results. Not a cryptographic or
// statistically strong generator; it only has to be cheap, well spread and reproducible.
//
// Thread-safe (pure). Compiles under nvcc (no Abseil here).

#ifndef PSYNC_WORKER_COMPUTE_SYNTHETIC_H_
#define PSYNC_WORKER_COMPUTE_SYNTHETIC_H_

#include <cstdint>

#include "worker/compute/host_device.h"

namespace psync {
namespace worker {

// The SplitMix64 finalizer (Steele, Lea, Flood 2014): a bijection on 64-bit integers with good
// avalanche.
PSYNC_HOST_DEVICE inline uint64_t Mix64(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// A key for one (seed, step, rank) stream; hoist it out of per-element loops.
PSYNC_HOST_DEVICE inline uint64_t SyntheticStreamKey(uint64_t seed, int64_t step, int64_t rank) {
  uint64_t key = Mix64(seed + 0x9E3779B97F4A7C15ull);
  key = Mix64(key ^ (static_cast<uint64_t>(step) + 0x632BE59BD9B4E019ull));
  key = Mix64(key ^ (static_cast<uint64_t>(rank) + 0x8CB92BA72F3D8DD7ull));
  return key;
}

// Element `index` of a stream, in [-1, 1): the hash's top 24 bits, centred and scaled by 2^-23
// (exact in fp32).
PSYNC_HOST_DEVICE inline float SyntheticValue(uint64_t stream_key, int64_t index) {
  const uint64_t h = Mix64(stream_key + static_cast<uint64_t>(index) * 0x9E3779B97F4A7C15ull);
  const int32_t centred = static_cast<int32_t>(h >> 40) - (1 << 23);
  return static_cast<float>(centred) * (1.0f / 8388608.0f);
}

// The synthetic gradient of element `index` of `rank`'s shard at `step`, in [-1, 1).
PSYNC_HOST_DEVICE inline float SyntheticGradient(uint64_t seed, int64_t step, int64_t rank,
                                                 int64_t index) {
  return SyntheticValue(SyntheticStreamKey(seed, step, rank), index);
}

}  // namespace worker
}  // namespace psync

#endif  // PSYNC_WORKER_COMPUTE_SYNTHETIC_H_
