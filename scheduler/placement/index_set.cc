#include "scheduler/placement/index_set.h"

#include <bit>

namespace tessera::scheduler {

IndexSet::IndexSet(uint32_t capacity) : capacity_(capacity) {
  size_t words = (static_cast<size_t>(capacity) + 63) / 64;
  if (words == 0) words = 1;
  levels_.emplace_back(words, 0);
  while (words > 1) {
    words = (words + 63) / 64;
    levels_.emplace_back(words, 0);
  }
}

bool IndexSet::Insert(uint32_t i) {
  uint64_t& word = levels_[0][i >> 6];
  const uint64_t bit = uint64_t{1} << (i & 63);
  if (word & bit) return false;
  const bool was_empty = word == 0;
  word |= bit;
  ++size_;
  if (was_empty) {
    uint32_t index = i >> 6;
    for (size_t level = 1; level < levels_.size(); ++level) {
      uint64_t& parent = levels_[level][index >> 6];
      const bool parent_was_empty = parent == 0;
      parent |= uint64_t{1} << (index & 63);
      if (!parent_was_empty) break;
      index >>= 6;
    }
  }
  return true;
}

bool IndexSet::Erase(uint32_t i) {
  uint64_t& word = levels_[0][i >> 6];
  const uint64_t bit = uint64_t{1} << (i & 63);
  if (!(word & bit)) return false;
  word &= ~bit;
  --size_;
  if (word == 0) {
    uint32_t index = i >> 6;
    for (size_t level = 1; level < levels_.size(); ++level) {
      uint64_t& parent = levels_[level][index >> 6];
      parent &= ~(uint64_t{1} << (index & 63));
      if (parent != 0) break;
      index >>= 6;
    }
  }
  return true;
}

uint32_t IndexSet::Next(uint32_t from) const {
  if (from >= capacity_ || size_ == 0) return kNone;
  return NextAt(0, from);
}

uint32_t IndexSet::NextAt(size_t level, uint32_t from) const {
  const std::vector<uint64_t>& words = levels_[level];
  const uint32_t w = from >> 6;
  if (w >= words.size()) return kNone;
  const uint64_t bits = words[w] & (~uint64_t{0} << (from & 63));
  if (bits != 0) return (w << 6) + static_cast<uint32_t>(std::countr_zero(bits));
  if (level + 1 == levels_.size()) return kNone;
  const uint32_t next_word = NextAt(level + 1, w + 1);
  if (next_word == kNone) return kNone;
  return (next_word << 6) + static_cast<uint32_t>(std::countr_zero(words[next_word]));
}

}  // namespace tessera::scheduler
