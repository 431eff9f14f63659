#pragma once
// A random generator whose sequence is fixed by its seed on every platform and compiler, for
// the dataset's shuffle: the standard library's distributions are implementation-defined, so a
// shuffle built on them could change order between machines and break exact resumption.

#include <cstdint>
#include <utility>
#include <vector>

namespace tessera::engine {

// xoshiro256** seeded through SplitMix64.
class DeterministicRandom {
 public:
  explicit DeterministicRandom(uint64_t seed) {
    for (auto& s : state_) s = SplitMix(seed);
  }

  uint64_t Next() {
    const uint64_t result = Rotl(state_[1] * 5, 7) * 9;
    const uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = Rotl(state_[3], 45);
    return result;
  }

  // Uniform in [0, bound), without modulo bias (Lemire's method). `bound` must be positive.
  uint64_t Below(uint64_t bound) {
    __uint128_t m = static_cast<__uint128_t>(Next()) * bound;
    uint64_t low = static_cast<uint64_t>(m);
    if (low < bound) {
      const uint64_t threshold = -bound % bound;
      while (low < threshold) {
        m = static_cast<__uint128_t>(Next()) * bound;
        low = static_cast<uint64_t>(m);
      }
    }
    return static_cast<uint64_t>(m >> 64);
  }

  // Fisher-Yates over [first, last).
  template <typename It>
  void Shuffle(It first, It last) {
    const auto n = last - first;
    for (decltype(last - first) i = n - 1; i > 0; --i) {
      std::swap(first[i], first[static_cast<decltype(i)>(Below(static_cast<uint64_t>(i) + 1))]);
    }
  }

  // A seed derived from this one and `salt`, for independent sub-streams (epoch, span ...).
  static uint64_t Mix(uint64_t seed, uint64_t salt) {
    uint64_t x = seed ^ (salt * 0x9E3779B97F4A7C15ull);
    return SplitMix(x);
  }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  static uint64_t SplitMix(uint64_t& x) {
    uint64_t z = (x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint64_t state_[4];
};

}  // namespace tessera::engine
