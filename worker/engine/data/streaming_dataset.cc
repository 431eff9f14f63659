#include "worker/engine/data/streaming_dataset.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace tessera::engine {

absl::StatusOr<std::unique_ptr<StreamingDataset>> StreamingDataset::Create(
    std::unique_ptr<TokenShardReader> reader, ShuffleOptions shuffle, int64_t global_batch) {
  if (global_batch <= 0) {
    return absl::InvalidArgumentError("global batch size: must be positive");
  }
  if (reader->index().total_samples < global_batch) {
    return absl::InvalidArgumentError(
        absl::StrCat("the dataset in ", reader->folder(), " has ", reader->index().total_samples,
                     " samples, fewer than one global batch of ", global_batch));
  }
  return std::unique_ptr<StreamingDataset>(
      new StreamingDataset(std::move(reader), shuffle, global_batch));
}

const std::vector<int64_t>& StreamingDataset::OrderOf(int64_t epoch) {
  if (epoch != order_epoch_) {
    order_ = EpochSampleOrder(reader_->ShardSampleCounts(), shuffle_, epoch);
    order_epoch_ = epoch;
  }
  return order_;
}

absl::StatusOr<std::vector<int64_t>> StreamingDataset::BatchSliceIds(const DataState& state,
                                                                     int64_t first, int64_t count) {
  if (state.sample_in_epoch < 0 || state.sample_in_epoch + global_batch_ > samples() || first < 0 ||
      count < 0 || first + count > global_batch_) {
    return absl::OutOfRangeError(absl::StrCat(
        "samples [", first, ", ", first + count, ") of the batch at epoch ", state.epoch,
        ", sample ", state.sample_in_epoch, " are outside the epoch's ", samples(), " samples"));
  }
  const auto& order = OrderOf(state.epoch);
  std::vector<int64_t> ids;
  ids.reserve(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    ids.push_back(order[static_cast<size_t>(state.sample_in_epoch + first + i)]);
  }
  return ids;
}

absl::Status StreamingDataset::ReadBatchSlice(const DataState& state, int64_t first, int64_t count,
                                              int64_t* out) {
  TESSERA_ASSIGN_OR_RETURN(const auto ids, BatchSliceIds(state, first, count));
  for (size_t i = 0; i < ids.size(); ++i) {
    TESSERA_RETURN_IF_ERROR(
        reader_->ReadSample(ids[i], out + static_cast<int64_t>(i) * sample_tokens()));
  }
  return absl::OkStatus();
}

DataState StreamingDataset::Advance(const DataState& state) const {
  DataState next = state;
  next.sample_in_epoch += global_batch_;
  if (next.sample_in_epoch + global_batch_ > samples()) {
    ++next.epoch;
    next.sample_in_epoch = 0;
  }
  return next;
}

DataState StreamingDataset::StateAfter(int64_t steps) const {
  const int64_t per_epoch = batches_per_epoch();
  return DataState{steps / per_epoch, (steps % per_epoch) * global_batch_};
}

}  // namespace tessera::engine
