#pragma once
// Randomness is injected, like time (clock.h), so that tests are exact: code draws from the Random
// it was given. Production passes SystemRandom::Shared(); a test passes a SeededRandom, or its own
// Random returning the numbers it needs.
//
// Not for secrets: API key secrets need a cryptographic source, not this.

#include <cstdint>
#include <memory>
#include <random>

#include "absl/base/thread_annotations.h"
#include "absl/random/random.h"
#include "absl/synchronization/mutex.h"

namespace tessera {

class Random {
 public:
  virtual ~Random() = default;
  // 64 uniformly distributed bits. Implementations are thread-safe.
  virtual uint64_t Next() = 0;

  // Uniform in [0, n), n > 0. By remainder: the bias, under n / 2^64, is nothing for ids,
  // ports and jitter, and a test's scripted Next() maps to a result it can predict.
  uint64_t Uniform(uint64_t n) { return Next() % n; }
  // Uniform in [0, 1).
  double Uniform01() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
};

// Abseil's generator, seeded from the operating system.
class SystemRandom final : public Random {
 public:
  uint64_t Next() override {
    absl::MutexLock lock(&mu_);
    return absl::Uniform<uint64_t>(gen_);
  }
  // A process-wide instance for production wiring.
  static std::shared_ptr<Random> Shared();

 private:
  absl::Mutex mu_;
  absl::BitGen gen_ ABSL_GUARDED_BY(mu_);
};

// The same numbers for the same seed, on every platform and library version (mt19937_64 is
// specified exactly), for tests.
class SeededRandom final : public Random {
 public:
  explicit SeededRandom(uint64_t seed) : gen_(seed) {}
  uint64_t Next() override {
    absl::MutexLock lock(&mu_);
    return gen_();
  }

 private:
  absl::Mutex mu_;
  std::mt19937_64 gen_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera
