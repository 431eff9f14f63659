#pragma once
// A resumable stream of global batches over a tessera-data folder. Each step consumes one global
// batch (the next `global_batch` samples of the epoch's order); a rank reads its slice of it. The
// state (epoch, sample in epoch) goes into every checkpoint, so a resumed run continues at the
// exact sample, whatever its number of ranks. An epoch's last partial batch is skipped.

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/engine/data/sample_order.h"
#include "worker/engine/data/token_shards.h"

namespace tessera::engine {

struct DataState {
  int64_t epoch = 0;
  int64_t sample_in_epoch = 0;
  bool operator==(const DataState&) const = default;
};

class StreamingDataset {
 public:
  // Fails when the dataset has fewer samples than one global batch.
  static absl::StatusOr<std::unique_ptr<StreamingDataset>> Create(
      std::unique_ptr<TokenShardReader> reader, ShuffleOptions shuffle, int64_t global_batch);

  int64_t sample_tokens() const { return reader_->index().sample_tokens; }
  int64_t samples() const { return reader_->index().total_samples; }
  int64_t batches_per_epoch() const { return samples() / global_batch_; }
  int64_t global_batch() const { return global_batch_; }
  const TokenShardReader& reader() const { return *reader_; }

  // Reads samples [first, first + count) of the global batch that starts at `state` into `out`
  // (count * sample_tokens() values), row by row.
  absl::Status ReadBatchSlice(const DataState& state, int64_t first, int64_t count, int64_t* out);
  // The global sample ids of that slice (for tests and diagnostics).
  absl::StatusOr<std::vector<int64_t>> BatchSliceIds(const DataState& state, int64_t first,
                                                     int64_t count);

  // The state after one more global batch.
  DataState Advance(const DataState& state) const;
  // The state after `steps` global batches from the start.
  DataState StateAfter(int64_t steps) const;

 private:
  StreamingDataset(std::unique_ptr<TokenShardReader> reader, ShuffleOptions shuffle,
                   int64_t global_batch)
      : reader_(std::move(reader)), shuffle_(shuffle), global_batch_(global_batch) {}
  const std::vector<int64_t>& OrderOf(int64_t epoch);

  std::unique_ptr<TokenShardReader> reader_;
  ShuffleOptions shuffle_;
  int64_t global_batch_;
  int64_t order_epoch_ = -1;
  std::vector<int64_t> order_;
};

}  // namespace tessera::engine
