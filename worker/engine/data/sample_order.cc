#include "worker/engine/data/sample_order.h"

#include <algorithm>
#include <numeric>

#include "worker/engine/data/deterministic_random.h"

namespace tessera::engine {

std::vector<int64_t> EpochSampleOrder(const std::vector<int64_t>& shard_samples,
                                      const ShuffleOptions& options, int64_t epoch) {
  std::vector<int64_t> first(shard_samples.size());
  int64_t total = 0;
  for (size_t s = 0; s < shard_samples.size(); ++s) {
    first[s] = total;
    total += shard_samples[s];
  }
  std::vector<int64_t> order;
  order.reserve(static_cast<size_t>(total));
  if (!options.shuffle) {
    order.resize(static_cast<size_t>(total));
    std::iota(order.begin(), order.end(), 0);
    return order;
  }
  const uint64_t epoch_seed = DeterministicRandom::Mix(options.seed, static_cast<uint64_t>(epoch));
  DeterministicRandom rng(epoch_seed);
  std::vector<size_t> shards(shard_samples.size());
  std::iota(shards.begin(), shards.end(), 0);
  rng.Shuffle(shards.begin(), shards.end());
  std::vector<int64_t> sequence;
  sequence.reserve(static_cast<size_t>(total));
  for (size_t s : shards) {
    for (int64_t i = 0; i < shard_samples[s]; ++i) sequence.push_back(first[s] + i);
  }

  const int64_t spans =
      std::clamp<int64_t>(options.num_canonical_nodes, 1, std::max<int64_t>(1, total));
  const int64_t block = std::max<int64_t>(1, options.shuffle_block_size);
  std::vector<std::pair<int64_t, int64_t>> bounds;  // [begin, end) of each span
  for (int64_t k = 0; k < spans; ++k) {
    const int64_t begin = total * k / spans, end = total * (k + 1) / spans;
    bounds.emplace_back(begin, end);
    DeterministicRandom span_rng(
        DeterministicRandom::Mix(epoch_seed, static_cast<uint64_t>(k) + 1));
    for (int64_t b = begin; b < end; b += block) {
      span_rng.Shuffle(sequence.begin() + b, sequence.begin() + std::min(end, b + block));
    }
  }
  // One from each span in turn; spans differ in length by at most one sample.
  for (int64_t i = 0;; ++i) {
    bool any = false;
    for (const auto& [begin, end] : bounds) {
      if (begin + i < end) {
        order.push_back(sequence[static_cast<size_t>(begin + i)]);
        any = true;
      }
    }
    if (!any) break;
  }
  return order;
}

}  // namespace tessera::engine
