#include "services/common/history_retention.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace tessera {

HistoryRetention::HistoryRetention(std::string what, absl::Duration period,
                                   std::shared_ptr<Clock> clock, DeleteBefore delete_before,
                                   int batch, int max_batches)
    : what_(std::move(what)),
      period_(period),
      clock_(std::move(clock)),
      delete_before_(std::move(delete_before)),
      batch_(std::max(batch, 1)),
      max_batches_(std::max(max_batches, 1)) {}

absl::StatusOr<int64_t> HistoryRetention::Apply() {
  if (period_ <= absl::ZeroDuration()) return 0;
  // One cutoff for the whole pass: what becomes old while it runs waits for the next.
  const absl::Time before = clock_->Now() - period_;
  int64_t total = 0;
  for (int i = 0; i < max_batches_; ++i) {
    auto deleted = delete_before_(before, batch_);
    if (!deleted.ok()) return deleted.status();
    total += *deleted;
    if (*deleted < batch_) break;
  }
  if (total > 0) {
    spdlog::info("retention: removed {} {} older than {}", total, what_,
                 absl::FormatDuration(period_));
  }
  return total;
}

}  // namespace tessera
