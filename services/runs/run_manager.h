#pragma once
// The run manager: people's calls about runs (submit, get, list, describe, stop, delete, update,
// restart, clone, watch, the progress history). What Tessera's components report is
// RunReports' (run_reports.h), what the service does on its own RunUpkeep's (run_upkeep.h); all
// three write through one RunWriter and are made together by MakeRuns (runs.h). The gRPC adapter
// (run_service.h) only authenticates and forwards.

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
#include "services/runs/log_deleter.h"
#include "services/runs/run_admission.h"
#include "services/runs/run_change_watch.h"
#include "services/runs/run_writer.h"
#include "services/store/change_feed.h"
#include "services/store/leader_lock_store.h"
#include "services/store/run_store.h"
#include "tessera/v1/run_metrics.pb.h"
#include "tessera/v1/runs.pb.h"

namespace tessera::runs {

struct RunManagerOptions {
  // The shortest scheduling.hang_timeout a run may ask for: each hang ends the run's attempt and
  // has its node checked by a sweep, so a tiny timeout would be a way to keep nodes busy.
  absl::Duration min_hang_timeout = absl::Seconds(60);
  // A run that ended this long ago is deleted, with its attempts, events and logs
  // (RunUpkeep::ExpireFinishedRuns); zero: kept until someone deletes it.
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
  // run ids and the names' suffixes. `changes`: null, watches poll. `reliability`: the
  // cluster's interruptions and running goodput for describe (null: none). MakeRuns (runs.h)
  // wires it.
  RunManager(std::shared_ptr<store::RunStore> runs, std::shared_ptr<const RunWriter> writer,
             std::shared_ptr<IdempotentCalls> idem, std::shared_ptr<FitChecker> fit,
             std::shared_ptr<Clock> clock, std::shared_ptr<LogDeleter> logs,
             std::shared_ptr<Random> random, RunManagerOptions options,
             std::shared_ptr<store::ChangeFeed> changes,
             std::shared_ptr<store::SecretStore> secrets,
             std::shared_ptr<ClusterReliability> reliability);

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

 private:
  // Creates a run from a validated spec with a unique suffixed name.
  // `idem` is recorded in the run's creating transaction (see IdempotentCalls::RunAtomically).
  // `notes`: what the client read otherwise than written; the spec's own normalization adds to
  // them; each becomes an event.
  absl::StatusOr<v1::Run> CreateFromSpec(const Who& who, const v1::RunSpec& written,
                                         std::vector<std::string> notes, const std::string& message,
                                         const std::optional<store::IdempotentRunWrite>& idem = {});
  std::string RandomSuffix(int length);

  std::shared_ptr<store::RunStore> runs_;
  std::shared_ptr<const RunWriter> writer_;
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
  // The cluster's interruptions and its running runs' goodput, for describe's checkpoint advice
  // and ETTR (null without a usage store: neither).
  std::shared_ptr<ClusterReliability> reliability_;
};

}  // namespace tessera::runs
