#pragma once
// A set of small integers [0, capacity) kept as a hierarchy of 64-bit words: insert, erase and
// "smallest element >= i" cost O(log64 capacity), and iteration is in increasing order, which
// keeps placement deterministic. The capacity index uses one per free-GPU bucket.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tessera::scheduler {

class IndexSet {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;

  explicit IndexSet(uint32_t capacity = 0);

  uint32_t capacity() const { return capacity_; }
  uint32_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  bool Contains(uint32_t i) const { return (levels_[0][i >> 6] >> (i & 63)) & 1; }
  // Both return whether the set changed.
  bool Insert(uint32_t i);
  bool Erase(uint32_t i);

  // The smallest element >= from, or kNone.
  uint32_t Next(uint32_t from) const;
  uint32_t First() const { return Next(0); }

 private:
  uint32_t NextAt(size_t level, uint32_t from) const;

  uint32_t capacity_ = 0;
  uint32_t size_ = 0;
  // levels_[0] holds one bit per element; bit j of levels_[k + 1] is set when word j of
  // levels_[k] is not zero. The last level is a single word.
  std::vector<std::vector<uint64_t>> levels_;
};

}  // namespace tessera::scheduler
