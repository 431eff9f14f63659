#pragma once
// The run manager: accepts, tracks and changes runs. Every dependency comes through the
// constructor; the gRPC adapter (run_service.h) only authenticates and forwards.

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "base/clock.h"
#include "base/random.h"
#include "services/common/auth/principal.h"
#include "services/common/idempotency.h"
#include "services/runs/cluster_reliability.h"
#include "services/runs/fit_checker.h"
#include "services/runs/lifecycle.h"
#include "services/runs/lifecycle_metrics.h"
#include "services/runs/log_deleter.h"
#include "services/runs/run_admission.h"
#include "services/runs/run_change_watch.h"
#include "services/store/change_feed.h"
#include "services/store/leader_lock_store.h"
#include "services/store/run_store.h"
#include "services/store/usage_store.h"
#include "tessera/v1/run_metrics.grpc.pb.h"
#include "tessera/v1/runs.grpc.pb.h"

namespace tessera::runs {

struct RunManagerOptions {
  // The shortest scheduling.hang_timeout a run may ask for: each hang ends the run's attempt and
  // has its node checked by a sweep, so a tiny timeout would be a way to keep nodes busy.
  absl::Duration min_hang_timeout = absl::Seconds(60);
  // A run that ended this long ago is deleted, with its attempts, events and logs
  // (ExpireFinishedRuns); zero: kept until someone deletes it.
  absl::Duration run_retention = absl::ZeroDuration();
  // Whether runs may name no image (or `image: host`) and run on the nodes' own root file
  // system (tessera-server --allow-host-image): for development clusters and the quick start.
  bool allow_host_image = false;
  // Waiting runs per user, who may use priority high (run_admission.h).
  AdmissionPolicy admission = {};
  // The most bytes of runs one ListRuns reply carries: a page ends early at this size (with a
  // next_page_token), far below gRPC's 64 MiB limit whatever the runs hold.
  size_t max_list_reply_bytes = 4 << 20;
};

inline constexpr size_t kMaxSpecNotes = 32;
inline constexpr size_t kMaxSpecNoteBytes = 512;

class RunManager {
 public:
  // `logs` deletes a deleted run's logs; null when there is no log service. `random` draws the
  // run ids and the names' suffixes. `registry`: where the lifecycle's metrics go (null: none).
  RunManager(std::shared_ptr<store::RunStore> runs, std::shared_ptr<IdempotentCalls> idem,
             std::shared_ptr<FitChecker> fit, std::shared_ptr<Clock> clock,
             std::shared_ptr<LogDeleter> logs = nullptr,
             std::shared_ptr<Random> random = SystemRandom::Shared(),
             RunManagerOptions options = {}, std::shared_ptr<store::ChangeFeed> changes = nullptr,
             metrics::Registry* registry = nullptr,
             std::shared_ptr<store::SecretStore> secrets = nullptr,
             std::shared_ptr<store::UsageStore> usage = nullptr);

  using Who = auth::Principal;
  absl::Status SubmitRun(const Who& who, const v1::SubmitRunRequest& req,
                         v1::SubmitRunResponse* resp);
  absl::Status GetRun(const Who& who, const v1::GetRunRequest& req, v1::GetRunResponse* resp);
  absl::Status ListRuns(const Who& who, const v1::ListRunsRequest& req, v1::ListRunsResponse* resp);
  absl::Status DescribeRun(const Who& who, const v1::DescribeRunRequest& req,
                           v1::DescribeRunResponse* resp);
  absl::Status StopRun(const Who& who, const v1::StopRunRequest& req, v1::StopRunResponse* resp);
  // Deletes an ended run and asks the log service to delete its logs. A log service that
  // cannot be reached does not stop the delete: the run is deleted and a warning names the run
  // whose logs remain (DeleteRunLogs removes them later).
  absl::Status DeleteRun(const Who& who, const v1::DeleteRunRequest& req,
                         v1::DeleteRunResponse* resp);
  absl::Status UpdateRun(const Who& who, const v1::UpdateRunRequest& req,
                         v1::UpdateRunResponse* resp);
  absl::Status RestartRun(const Who& who, const v1::RestartRunRequest& req,
                          v1::RestartRunResponse* resp);
  absl::Status CloneRun(const Who& who, const v1::CloneRunRequest& req, v1::CloneRunResponse* resp);
  absl::Status RecordAttempt(const Who& who, const v1::RecordAttemptRequest& req,
                             v1::RecordAttemptResponse* resp);
  absl::Status ReportProgress(const Who& who, const v1::ReportProgressRequest& req,
                              v1::ReportProgressResponse* resp);
  // The run's progress history with its attempts (run_metrics.cc).
  absl::Status GetRunMetrics(const Who& who, const v1::GetRunMetricsRequest& req,
                             v1::GetRunMetricsResponse* resp);

  // Streams every change of a run visible to `who` matching the filter, starting with changes
  // after the call; returns when `send` returns false (the client went away) or `done()`.
  // `started` (if set) is called once where the watch starts is fixed: a client that waits for
  // it and then reads a run's state misses no change after that state.
  // On the caller's thread, between the steps of OpenWatch.
  absl::Status WatchRuns(const Who& who, const v1::WatchRunsRequest& req,
                         const std::function<bool(const v1::RunChange&)>& send,
                         const std::function<bool()>& done, absl::Duration poll_interval,
                         const std::function<void()>& started = nullptr);
  // The same watch as steps (run_change_watch.h), for a caller that waits in a StreamPump
  // (RunChangeWatch::UseTailWakes). INVALID_ARGUMENT naming the field for a bad filter.
  absl::StatusOr<std::unique_ptr<RunChangeWatch>> OpenWatch(const Who& who,
                                                            const v1::WatchRunsRequest& req,
                                                            absl::Duration poll_interval);
  const std::shared_ptr<store::ChangeFeed>& change_feed() const { return changes_; }
  const std::shared_ptr<Clock>& clock() const { return clock_; }
  // What every watch reads its events from.
  const RunEventTail& event_tail() const { return *event_tail_; }

  // Asks every RUNNING run past its max_duration to stop. Called periodically; returns how
  // many runs it stopped.
  absl::StatusOr<int> EnforceMaxDuration();
  // Computes every running run's series (tessera_run_goodput_ratio, tessera_run_resumptions)
  // and the cluster's running goodput that describe shows; returns how many runs it covered (0
  // with neither metrics nor a usage store).
  absl::StatusOr<int> RefreshRunningRunMetrics();

  // Deletes the runs that ended more than the run retention ago, with their attempts, events
  // and logs (run_retention.cc). A run whose logs cannot be deleted now (the log service is
  // away) is kept until they can, so that no logs outlive their run. Called periodically;
  // returns how many runs it deleted.
  absl::StatusOr<int> ExpireFinishedRuns();

 private:
  // Reads the run by name as `who` may see it: NOT_FOUND for other users' runs.
  absl::StatusOr<v1::Run> ReadVisible(const Who& who, const std::string& name);
  // ReadVisible, and PERMISSION_DENIED when `who` may see the run but not change it.
  absl::StatusOr<v1::Run> ReadChangeable(const Who& who, const std::string& name);
  // Creates a run from a validated spec with a unique suffixed name.
  // `idem` is recorded in the run's creating transaction (see IdempotentCalls::RunAtomically).
  // `notes`: what the client read otherwise than written; the spec's own normalization adds to
  // them; each becomes an event.
  absl::StatusOr<v1::Run> CreateFromSpec(const Who& who, const v1::RunSpec& written,
                                         std::vector<std::string> notes, const std::string& message,
                                         const std::optional<store::IdempotentRunWrite>& idem = {});
  // Applies `change` to the freshest copy of the run, retrying when another writer wins. A
  // `fence` makes the write one of a leader's term (refused once that term ended); `idem` is
  // recorded with the write (a change that changes nothing writes and records nothing).
  absl::Status RecordNote(const v1::RecordAttemptRequest& req, v1::RecordAttemptResponse* resp);
  absl::StatusOr<v1::Run> Mutate(const std::string& run_id,
                                 const std::function<absl::StatusOr<Transition>(
                                     const v1::Run&, const std::vector<v1::Attempt>&)>& change,
                                 const std::optional<store::WriteFence>& fence = {},
                                 const std::optional<store::IdempotentRunWrite>& idem = {});
  std::string RandomSuffix(int length);
  // Keeps the report as a point of the attempt's history, thinned to a bounded number
  // (progress_history.h). `previous_step` is the attempt's last step before this report.
  absl::Status KeepProgressPoint(const v1::Run& run, const v1::ReportProgressRequest& req,
                                 int64_t previous_step);

  std::shared_ptr<store::RunStore> runs_;
  std::shared_ptr<IdempotentCalls> idem_;
  std::shared_ptr<FitChecker> fit_;
  std::shared_ptr<Clock> clock_;
  std::shared_ptr<LogDeleter> logs_;
  std::shared_ptr<Random> random_;
  RunManagerOptions options_;
  RunAdmission admission_;  // submit rate and waiting runs per user, priority high, preemptible off
  // Wakes WatchRuns when runs' events commit (null at construction: polling only).
  std::shared_ptr<store::ChangeFeed> changes_;
  // The newest events with their runs, read once for every open watch.
  std::shared_ptr<RunEventTail> event_tail_;
  std::unique_ptr<LifecycleMetrics> metrics_;  // null: no metrics
  // The cluster's interruptions and its running runs' goodput, for describe's checkpoint advice
  // and ETTR (null without a usage store: neither).
  std::shared_ptr<ClusterReliability> reliability_;
  // The running runs' progress histories as RefreshRunningRunMetrics last read them, by run id:
  // read again every 5 minutes or when the run resumes, with its newest report added meanwhile
  // (a refresh every 15 s must not read every running run's whole history).
  struct KnownProgress {
    int resumption_index = 0;
    absl::Time read_at;
    std::vector<store::ProgressPoint> points;
  };
  absl::Mutex known_progress_mu_;
  std::map<std::string, KnownProgress> known_progress_ ABSL_GUARDED_BY(known_progress_mu_);
};

}  // namespace tessera::runs
