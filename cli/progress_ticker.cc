#include "cli/progress_ticker.h"

#include "absl/time/clock.h"
#include "base/timestamps.h"
#include "cli/time_format.h"

namespace tessera::cli {

ProgressTicker::ProgressTicker(StatusLine& line, Source source, int width, absl::Duration poll,
                               absl::Duration plain_every)
    : line_(line),
      source_(std::move(source)),
      width_(width),
      poll_(poll),
      plain_every_(plain_every),
      thread_([this] { Loop(); }) {}

ProgressTicker::~ProgressTicker() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
  line_.Clear();
}

void ProgressTicker::Loop() {
  while (true) {
    if (auto progress = source_()) Show(*progress);
    absl::MutexLock lock(&mu_);
    if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), poll_)) return;
  }
}

void ProgressTicker::Show(const tessera::v1::RunProgress& progress) {
  if (!progress.has_reported_at()) return;  // nothing reported yet
  const absl::Time reported = FromProtoTime(progress.reported_at());
  if (last_reported_ && reported <= *last_reported_) return;  // no new report
  last_reported_ = reported;
  if (!origin_ || progress.step() < origin_->step)
    origin_ = ProgressOrigin{progress.step(), reported};
  const std::optional<absl::Duration> remaining = EstimateRemaining(progress, *origin_);
  if (line_.terminal()) {
    line_.Show(FormatProgressBar(progress, remaining, width_));
    return;
  }
  const absl::Time now = absl::Now();
  if (progress.step() == last_plain_step_) return;
  if (last_plain_ && now - *last_plain_ < plain_every_) return;
  last_plain_ = now;
  last_plain_step_ = progress.step();
  line_.Show(FormatTimestamp(ToProtoTime(now)) + "  PROGRESS  " +
             FormatProgressLine(progress, remaining));
}

}  // namespace tessera::cli
