#pragma once
// The order in which an epoch visits a dataset's samples. It depends only on the shards' sizes,
// the seed, the epoch and the number of canonical nodes — never on how many ranks read it — so
// a run resumed on a different number of ranks sees the same global sequence of samples.
//
// Like MosaicML Streaming: the shard order is shuffled; the resulting sequence is split into
// `num_canonical_nodes` contiguous spans (each canonical node reads its own shards); each span is
// shuffled in blocks of `shuffle_block_size` samples (so a reader touches few shards at a time);
// and the global order takes one sample from each span in turn.

#include <cstdint>
#include <vector>

namespace tessera::engine {

struct ShuffleOptions {
  bool shuffle = true;
  uint64_t seed = 9176;
  int64_t num_canonical_nodes = 1;
  int64_t shuffle_block_size = 1 << 18;
};

// The global sample ids of `epoch` in order (a permutation of 0..sum(shard_samples)-1).
std::vector<int64_t> EpochSampleOrder(const std::vector<int64_t>& shard_samples,
                                      const ShuffleOptions& options, int64_t epoch);

}  // namespace tessera::engine
