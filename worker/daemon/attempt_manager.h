// The worker's ranks: starts an attempt's local ranks, watches them exit (reaped by an
// AttemptReaper, attempt_reaper.h), stops them on command or when the worker fences itself, and
// reports as lost what a previous incarnation of the worker left behind (previous_incarnation.h).
// An attempt with an image, integrations or pre-flight checks is first made ready by an
// AttemptPreparer (attempt_preparer.h) on a thread of its own. The control session
// (control_session.h) turns what happens here into AttemptUpdates and heartbeats; the log shipper
// is told about every rank's output files.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "tessera/v1/worker.pb.h"
#include "worker/common/rank_output.h"
#include "worker/daemon/attempt_preparer.h"
#include "worker/daemon/attempt_reaper.h"
#include "worker/daemon/attempt_record.h"
#include "worker/daemon/attempt_state.h"
#include "worker/daemon/finish_gate.h"
#include "worker/daemon/network_walls.h"
#include "worker/daemon/rank_environment.h"
#include "worker/daemon/rank_launcher.h"
#include "worker/daemon/rank_sandbox.h"
#include "worker/daemon/rank_spec_builder.h"
#include "worker/image/image_cache.h"

namespace tessera::worker {

struct AttemptManagerOptions {
  std::string state_dir;
  std::string node_name;
  bool simulated_gpus = false;
  // The model NVML reports for this node's GPUs (empty for simulated or no GPUs).
  std::string gpu_model;
  // The node's environment for every rank (worker --rank-env); a run's own variables win.
  std::map<std::string, std::string> rank_env;
  // Who the ranks run as (worker --rank-user); nullopt: the worker's own user.
  std::optional<RankIdentity> rank_identity;
  // How long an ended attempt stays in heartbeats, so a control plane that missed its FINISHED
  // (it restarted, or a standby took over) still learns how it ended.
  absl::Duration keep_ended = absl::Seconds(60);
  // Ranks run in this sandbox; null: directly on the node (tessera-worker --sandbox off), which
  // then runs no images.
  std::shared_ptr<const RankSandbox> sandbox;
  // Pulls and unpacks the runs' images; null: this node runs only `image: host` runs.
  std::shared_ptr<image::ImageCache> images;
  // The node's network walls (network_walls.h); null: none.
  std::shared_ptr<NetworkWalls> walls;
  // Run each user's ranks as the uid the control plane gave that user (a root worker without
  // --rank-user); rank_identity is then for runs that came without one.
  bool per_user_uids = false;
  // The cluster's shared folder (--shared-dir): each user gets PATH/<user>, theirs alone,
  // bound into their ranks' sandboxes and named by TESSERA_SHARED_DIR.
  std::string shared_dir;
  // The node's memory for the runs' in-memory checkpoints (--memory-checkpoint-dir and -bytes).
  MemoryCheckpointSettings memory_checkpoints;
  // The node's pre-flight checks (preflight.h), run before each attempt's ranks start, off the
  // control stream's thread; an attempt whose checks fail does not start and reports them all.
  // Null: none.
  std::function<std::vector<v1::PreflightCheck>(const v1::StartAttempt&)> preflight;
  // Whether all of a rank's output is in the log service (LogShipper::Shipped). An attempt's
  // FINISHED waits for it, so that when the control plane learns the attempt ended (and
  // `mcli logs -f` stops following) its logs are complete. Null: FINISHED goes at once.
  std::function<bool(const RankOutput&)> output_shipped;
  // The nice value of every rank (tessera-worker --rank-nice): where the CPUs are all busy, the
  // worker (heartbeats, log shipping, probes) runs before the ranks.
  int rank_nice = 0;
  // How long FINISHED waits for the output at most: the log service may be away, and the
  // attempt's end (a resumption, the run's status) must not wait on it for longer.
  absl::Duration finish_waits_for_logs = absl::Seconds(5);
};

class AttemptManager {
 public:
  // `on_output` is called for each rank started (and for each found at start-up), with the
  // files to ship; `on_rank_done` once a rank has exited and its files are complete.
  // `on_started` (optional) once the rank's process runs, with its pid.
  AttemptManager(AttemptManagerOptions options, std::shared_ptr<Clock> clock,
                 std::function<void(const RankOutput&)> on_output,
                 std::function<void(const RankOutput&)> on_rank_done,
                 std::function<void(const RankOutput&)> on_started = nullptr);
  // Stops every rank still running (SIGTERM, a short grace, SIGKILL).
  ~AttemptManager();

  // Kills the ranks a previous incarnation of this worker started (found in the state
  // folder), and keeps their attempts as lost, to be reported. Returns how many ranks it killed.
  int CleanUpPreviousIncarnation();

  // Starts the attempt's local ranks. A repeat of a known attempt is a no-op. A failure to
  // start leaves nothing running and queues a START_FAILED update.
  absl::Status Start(const v1::StartAttempt& start);
  // Stops the attempt's ranks in the background (SIGTERM, grace, SIGKILL to each group).
  void Stop(const std::string& run_id, int resumption_index, absl::Duration grace);
  // Fencing: SIGKILL every rank at once and wait until they are gone.
  int KillAll();

  // Reaps exited ranks and queues their updates; forgets attempts ended long ago.
  void Poll();
  // Updates not yet delivered, oldest first. Put back with Requeue when they could not be sent.
  std::vector<v1::AttemptUpdate> TakeUpdates();
  void Requeue(std::vector<v1::AttemptUpdate> updates);
  // Every attempt this node knows: running ranks, exited ranks, lost.
  std::vector<v1::LocalAttempt> LocalAttempts();
  // Whether any attempt is known here (preparing, running, or ended and not yet forgotten).
  bool HasAttempts();
  int running_ranks();
  // Attempts still preparing (pulling their image).
  int preparing();
  // The sandbox (its outermost process) of the attempt's first running rank or launcher here,
  // for mcli connect. FAILED_PRECONDITION without a sandbox; NOT_FOUND when nothing of it runs.
  absl::StatusOr<pid_t> SandboxOf(const std::string& run_id, int resumption);
  // The process groups of every running rank (for fault injection's throttle).
  std::vector<pid_t> RankProcessGroups();

 private:
  using Key = std::pair<std::string, int>;

  void Queue(v1::AttemptUpdate u) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Has the attempt made ready (on a thread of its own), then launches it.
  void Prepare(const v1::StartAttempt& start);
  // Whether the attempt was stopped (or fenced) while it was prepared, or is forgotten.
  bool Cancelled(const Key& key) ABSL_LOCKS_EXCLUDED(mu_);
  // Starts the ranks in `root` (the host's or an image's).
  absl::Status Launch(const v1::StartAttempt& start, const RankRoot& root,
                      const std::string& digest, bool release_on_error);
  // On the run's first node, walls its rendezvous port (MASTER_PORT) off from the ranks of
  // other users (network_walls.h); Release takes it down once the attempt ends.
  void WallRendezvous(const std::optional<RankIdentity>& identity, AttemptState& a) const;
  void ReleaseRendezvous(const AttemptState& a) const;
  // Ends a preparing attempt without ranks: FINISHED, so a stop completes.
  void CancelPreparing(AttemptState& a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends an attempt that never launched (its node failed its pre-flight checks, its image could
  // not be had, or it runs no images) with START_FAILED and what `u` says.
  void EndUnlaunched(const v1::StartAttempt& start, v1::AttemptUpdate u) ABSL_LOCKS_EXCLUDED(mu_);

  const AttemptManagerOptions options_;
  const std::shared_ptr<Clock> clock_;
  const std::function<void(const RankOutput&)> on_output_, on_rank_done_, on_started_;
  AttemptRecords records_;
  // Before the spec builder, which prepares the runs' folders in it.
  const std::shared_ptr<const MemoryCheckpointFolders> memory_folders_;
  const RankSpecBuilder spec_builder_;
  const AttemptPreparer preparer_;
  const AttemptReaper reaper_;
  absl::Mutex mu_;
  std::map<Key, AttemptState> attempts_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::AttemptUpdate> pending_ ABSL_GUARDED_BY(mu_);
  // Ended attempts' FINISHED, held until their ranks' output is shipped.
  FinishGate finish_gate_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> stoppers_ ABSL_GUARDED_BY(mu_);
  // Threads preparing attempts, and whether each is done (then joined at the next Start).
  std::vector<std::pair<std::thread, std::shared_ptr<std::atomic<bool>>>> preparers_
      ABSL_GUARDED_BY(mu_);
  int64_t polls_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace tessera::worker
