#pragma once
// Which GPUs of a node a run gets. A run of g GPUs goes into an aligned block of the next power
// of two (GPUs 0-3 or 4-7 for 3 or 4 GPUs on an 8-GPU node), which on common servers shares a
// PCIe switch / NVLink domain; among such blocks, the one with the fewest free GPUs that holds
// it, ties broken by the fullest enclosing block (buddy-style best fit: whole blocks stay free
// for larger runs). When no aligned block holds it, the lowest free indices.

#include <cstdint>
#include <vector>

namespace tessera::scheduler {

// A mask of `count` bits of `free_mask` (count <= popcount(free_mask), capacity <= 64).
uint64_t PickUnits(uint64_t free_mask, int capacity, int count);

// The indices of the set bits, ascending.
std::vector<int> MaskToIndices(uint64_t mask);

}  // namespace tessera::scheduler
