#pragma once
// While mcli follows a running attempt, shows the run's progress on a StatusLine: on a terminal
// a bar redrawn at each new report; elsewhere a plain line when the step moved, at most every
// `plain_every`. The time left is estimated from the first report it saw.

#include <functional>
#include <optional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cli/progress_view.h"
#include "cli/status_line.h"
#include "tessera/v1/runs.pb.h"

namespace tessera::cli {

class ProgressTicker {
 public:
  // The run's latest progress; empty when it cannot be read now (the next poll tries again).
  using Source = std::function<std::optional<tessera::v1::RunProgress>()>;

  ProgressTicker(StatusLine& line, Source source, int width, absl::Duration poll,
                 absl::Duration plain_every);
  // Stops polling and clears the bar.
  ~ProgressTicker();
  ProgressTicker(const ProgressTicker&) = delete;
  ProgressTicker& operator=(const ProgressTicker&) = delete;

 private:
  void Loop();
  void Show(const tessera::v1::RunProgress& progress);

  StatusLine& line_;
  Source source_;
  const int width_;
  const absl::Duration poll_;
  const absl::Duration plain_every_;
  std::optional<ProgressOrigin> origin_;
  std::optional<absl::Time> last_reported_;  // of the report shown last
  std::optional<absl::Time> last_plain_;     // when the last plain line was printed
  int64_t last_plain_step_ = -1;

  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace tessera::cli
