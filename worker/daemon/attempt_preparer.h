// Gets an attempt ready for its ranks, off the control stream's thread: the node's pre-flight
// checks and the run's image (pulled with its owner's registry credentials) before the ranks'
// specs are built, then the run's integrations in the first rank's sandbox before any rank
// starts. It keeps no state of its own: whether the attempt was stopped meanwhile is asked of
// AttemptManager, which owns the attempts, launches the ranks and reports what happened.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "base/clock.h"
#include "tessera/v1/worker.pb.h"
#include "worker/daemon/rank_environment.h"
#include "worker/daemon/rank_launcher.h"
#include "worker/daemon/rank_spec_builder.h"
#include "worker/image/image_cache.h"

namespace tessera::worker {

struct AttemptPreparerOptions {
  std::string state_dir;
  // The node's pre-flight checks (preflight.h); null: none.
  std::function<std::vector<v1::PreflightCheck>(const v1::StartAttempt&)> preflight;
  // Pulls and unpacks the runs' images; null: only `image: host` runs.
  std::shared_ptr<image::ImageCache> images;
  std::shared_ptr<Clock> clock;
};

// What Prepare found.
struct Preparation {
  enum class Outcome {
    kReady,      // launch the ranks in `root`
    kFailed,     // end the attempt START_FAILED with `failure`
    kCancelled,  // stopped meanwhile: its stop was reported, nothing is left to do
  };
  Outcome outcome = Outcome::kCancelled;
  RankRoot root;       // the host's for `image: host`
  std::string digest;  // the image's, held in the cache until released; empty for the host
  // The failed pre-flight checks, or an image that could not be had (setup_failure: the run's
  // own doing), and the detail that says so.
  v1::AttemptUpdate failure;
};

// Where the integrations' output goes: the first rank's log. `begins` before the script starts;
// `ends` once a failed script has exited (a script that succeeded is followed by the rank).
struct IntegrationOutput {
  std::function<void()> begins;
  std::function<void()> ends;
};

class AttemptPreparer {
 public:
  using Cancelled = std::function<bool()>;

  explicit AttemptPreparer(AttemptPreparerOptions options);

  // Runs the pre-flight checks, then acquires the image. `progress` is told what the pull does
  // (PREPARING updates); `cancelled` is asked after each step.
  Preparation Prepare(const v1::StartAttempt& start, const Cancelled& cancelled,
                      const std::function<void(const std::string&)>& progress) const;

  // Runs the run's integrations as `first` (the first rank's spec: its sandbox, user and
  // working folder) in the attempt's work folder. Errors: FAILED_PRECONDITION names the
  // integration that failed (the run's doing), INTERNAL when the script could not start,
  // CANCELLED when the attempt was stopped meanwhile (the script is stopped too).
  absl::Status RunIntegrations(const v1::StartAttempt& start, const AttemptPaths& paths,
                               const RankSpec& first, const Cancelled& cancelled,
                               const IntegrationOutput& output) const;

 private:
  // The image, pulled with the owner's registry credentials if they gave some.
  absl::StatusOr<image::PreparedImage> AcquireImage(
      const v1::StartAttempt& start, const std::function<void(const std::string&)>& progress) const;

  const AttemptPreparerOptions options_;
};

}  // namespace tessera::worker
