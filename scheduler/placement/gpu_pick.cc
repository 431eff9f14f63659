#include "scheduler/placement/gpu_pick.h"

#include <array>
#include <bit>
#include <cstddef>

namespace tessera::scheduler {
namespace {

uint64_t LowestBits(uint64_t mask, int count) {
  uint64_t taken = 0;
  for (int i = 0; i < count && mask != 0; ++i) {
    const uint64_t bit = mask & (~mask + 1);
    taken |= bit;
    mask ^= bit;
  }
  return taken;
}

uint64_t Ones(int count) { return count >= 64 ? ~uint64_t{0} : (uint64_t{1} << count) - 1; }

}  // namespace

uint64_t PickUnits(uint64_t free_mask, int capacity, int count) {
  if (count <= 0) return 0;
  const int block = static_cast<int>(std::bit_ceil(static_cast<unsigned>(count)));
  if (block < capacity && capacity % block == 0) {
    // Buddy-style best fit: the aligned block with the fewest free GPUs that holds the run;
    // ties go to the block whose enclosing blocks (twice, four times as large ...) are fullest.
    int best_offset = -1;
    std::array<int, 8> best_score{};
    for (int offset = 0; offset < capacity; offset += block) {
      std::array<int, 8> score{};
      size_t level = 0;
      for (int size = block; size <= capacity && capacity % size == 0 && level < score.size();
           size *= 2, ++level) {
        const int start = offset / size * size;
        score[level] = std::popcount(free_mask & (Ones(size) << start));
      }
      if (score[0] < count) continue;
      if (best_offset < 0 || score < best_score) {
        best_offset = offset;
        best_score = score;
      }
    }
    if (best_offset >= 0) return LowestBits(free_mask & (Ones(block) << best_offset), count);
  }
  return LowestBits(free_mask, count);
}

std::vector<int> MaskToIndices(uint64_t mask) {
  std::vector<int> indices;
  indices.reserve(static_cast<size_t>(std::popcount(mask)));
  while (mask != 0) {
    indices.push_back(std::countr_zero(mask));
    mask &= mask - 1;
  }
  return indices;
}

}  // namespace tessera::scheduler
