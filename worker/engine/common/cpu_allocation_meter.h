#pragma once
// Bytes of CPU tensor memory live now and at most since a mark, counted at LibTorch's CPU
// allocator: what activation checkpointing and parameter sharding save is measured exactly,
// not guessed from the process's resident size (which the C library's allocator blurs).

#include <cstdint>

namespace tessera::engine {

class CpuAllocationMeter {
 public:
  // Puts the counting allocator in front of LibTorch's CPU allocator, once per process (later
  // calls return the same meter). Tensors allocated before are not counted.
  static CpuAllocationMeter& Install();

  int64_t live_bytes() const;
  int64_t peak_bytes() const;
  // The peak starts again from what is live now.
  void ResetPeak();

 private:
  CpuAllocationMeter() = default;
};

}  // namespace tessera::engine
