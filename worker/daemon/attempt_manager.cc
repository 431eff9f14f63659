#include "worker/daemon/attempt_manager.h"

#include <signal.h>
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "base/timestamps.h"
#include "proto/policy/images.h"
#include "worker/daemon/attempt_folders.h"
#include "worker/daemon/integration_script.h"
#include "worker/daemon/owned_children.h"
#include "worker/daemon/previous_incarnation.h"
#include "worker/daemon/rank_secrets.h"
#include "worker/daemon/worker_metrics.h"

namespace tessera::worker {
AttemptManager::AttemptManager(AttemptManagerOptions options, std::shared_ptr<Clock> clock,
                               std::function<void(const RankOutput&)> on_output,
                               std::function<void(const RankOutput&)> on_rank_done,
                               std::function<void(const RankOutput&)> on_started)
    : options_(std::move(options)),
      clock_(std::move(clock)),
      on_output_(std::move(on_output)),
      on_rank_done_(std::move(on_rank_done)),
      on_started_(std::move(on_started)),
      records_(options_.state_dir),
      memory_folders_(
          std::make_shared<const MemoryCheckpointFolders>(options_.memory_checkpoints, clock_)),
      spec_builder_(RankSpecSettings{.simulated_gpus = options_.simulated_gpus,
                                     .gpu_model = options_.gpu_model,
                                     .rank_env = options_.rank_env,
                                     .shared_dir = options_.shared_dir,
                                     .memory_checkpoints = memory_folders_,
                                     .rank_nice = options_.rank_nice,
                                     .sandbox = options_.sandbox,
                                     .rank_identity = options_.rank_identity,
                                     .per_user_uids = options_.per_user_uids}),
      preparer_(AttemptPreparerOptions{.state_dir = options_.state_dir,
                                       .preflight = options_.preflight,
                                       .images = options_.images,
                                       .clock = clock_}),
      reaper_(options_.node_name, options_.sandbox),
      finish_gate_(options_.output_shipped, options_.finish_waits_for_logs) {}

AttemptManager::~AttemptManager() {
  std::vector<RankProcess*> running;
  std::vector<std::thread> stoppers;
  std::vector<std::pair<std::thread, std::shared_ptr<std::atomic<bool>>>> preparers;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [key, a] : attempts_) {
      for (auto& p : a.procs) running.push_back(p.get());
      a.cancelled = a.cancelled || a.preparing;
    }
    stoppers.swap(stoppers_);
    preparers.swap(preparers_);
  }
  // A pull under way is stopped (its half-unpacked image is deleted) rather than waited for:
  // it can take minutes. Integrations under way end with the sandbox they run in.
  if (options_.images && !preparers.empty()) options_.images->CancelPulls();
  for (auto& [t, done] : preparers) t.join();
  for (auto& t : stoppers) t.join();
  if (!running.empty()) StopAll(running, absl::Seconds(2), *clock_);
  absl::MutexLock lock(&mu_);
  for (auto& [key, a] : attempts_) (void)records_.Remove(key.first, key.second);
}

void AttemptManager::Queue(v1::AttemptUpdate u) {
  *u.mutable_time() = ToProtoTime(clock_->Now());
  pending_.push_back(std::move(u));
}

absl::Status AttemptManager::Start(const v1::StartAttempt& start) {
  const Key key{start.run_id(), start.resumption_index()};
  {
    absl::MutexLock lock(&mu_);
    if (attempts_.count(key)) return absl::OkStatus();  // a resent command
  }
  // An older attempt of the same run still running here was given up by the control plane
  // (it placed a newer one): it must not overlap the new one.
  std::vector<RankProcess*> stale;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [k, old] : attempts_) {
      if (k.first != start.run_id() || k.second >= start.resumption_index()) continue;
      for (auto& p : old.procs) {
        if (!p->exit()) stale.push_back(p.get());
      }
    }
  }
  if (!stale.empty()) {
    spdlog::warn("run {}: killing {} rank(s) of an older attempt before starting attempt {}",
                 start.run_id(), stale.size(), start.resumption_index());
    StopAll(stale, absl::ZeroDuration(), *clock_);
  }
  const bool host = IsHostImage(start.image());
  if (!host || HasRunIntegrations(start.integrations()) || options_.preflight) {
    if (!host && (!options_.sandbox || !options_.images)) {
      v1::AttemptUpdate u;
      u.set_detail(absl::StrCat(options_.node_name,
                                " runs ranks without a sandbox (tessera-worker --sandbox off) "
                                "and so cannot run image ",
                                start.image()));
      EndUnlaunched(start, std::move(u));
      return absl::FailedPreconditionError("this node runs no images");
    }
    absl::MutexLock lock(&mu_);
    AttemptState a;
    a.start = start;
    a.paths = PathsFor(options_.state_dir, start.run_id(), start.resumption_index());
    a.preparing = true;
    attempts_[key] = std::move(a);
    // Pulling an image and running integrations take long: the control stream must not wait.
    std::erase_if(preparers_, [](auto& preparer) {
      if (!preparer.second->load()) return false;  // still preparing
      preparer.first.join();
      return true;
    });
    auto done = std::make_shared<std::atomic<bool>>(false);
    preparers_.emplace_back(std::thread([this, start, done] {
                              Prepare(start);
                              done->store(true);
                            }),
                            done);
    return absl::OkStatus();
  }
  return Launch(start, RankRoot{}, "", false);
}

absl::Status AttemptManager::Launch(const v1::StartAttempt& start, const RankRoot& root,
                                    const std::string& digest, bool release_on_error) {
  const Key key{start.run_id(), start.resumption_index()};
  AttemptState a;
  a.start = start;
  a.paths = PathsFor(options_.state_dir, start.run_id(), start.resumption_index());
  bool setup_failure = false;  // the run's own doing (an integration failed), not the node's
  auto fail = [&](const absl::Status& st) {
    v1::AttemptUpdate u =
        UpdateFor(start, v1::ATTEMPT_PHASE_START_FAILED, std::string(st.message()));
    u.set_setup_failure(setup_failure);
    a.ended_at = clock_->Now();
    a.procs.clear();  // kills whatever did start
    RemoveSecretFiles(a.paths);
    ReleaseRendezvous(a);
    {
      absl::MutexLock lock(&mu_);
      Queue(std::move(u));
      attempts_[key] = std::move(a);
    }
    if (release_on_error) options_.images->Release(digest);
    return st;
  };
  const std::optional<RankIdentity> identity = spec_builder_.IdentityFor(start);
  auto specs = spec_builder_.Build(start, a.paths, root, identity);
  if (!specs.ok()) return fail(specs.status());
  a.image_digest = digest;
  WallRendezvous(identity, a);
  if (HasRunIntegrations(start.integrations())) {
    const int first = specs->front().rank;
    auto st = preparer_.RunIntegrations(start, a.paths, specs->front(),
                                        [this, &key] { return Cancelled(key); },
                                        {.begins = [&] { on_output_(OutputOf(a, first)); },
                                         .ends = [&] { on_rank_done_(OutputOf(a, first)); }});
    if (!st.ok()) {
      setup_failure = !absl::IsCancelled(st) && !absl::IsInternal(st);
      return fail(st);
    }
  }
  AttemptRecord record{start.run_id(),    start.run_name(), start.resumption_index(),
                       start.node_rank(), a.paths.dir,      {}};
  for (const auto& spec : *specs) {
    // The shipper learns of the files before the rank can write its first line.
    on_output_(OutputOf(a, spec.rank));
    auto proc = RankProcess::Start(spec);
    if (!proc.ok()) {
      // A command the kernel will not take is what the run says, not the node's fault.
      setup_failure = absl::IsInvalidArgument(proc.status());
      return fail(absl::Status(proc.status().code(),
                               absl::StrCat("rank ", spec.rank, ": ", proc.status().message())));
    }
    record.ranks.push_back(
        {spec.rank, (*proc)->pid(), ProcessStartTicks((*proc)->pid()).value_or(0)});
    a.procs.push_back(std::move(*proc));
    WorkerEventMetrics::Default().RankStarted();
    if (on_started_) {
      for (const int rank : RanksOf(a, spec.rank)) on_started_(OutputOf(a, rank));
    }
  }
  // Written before reporting STARTED: from here on a crash of this worker is followed by a
  // clean-up of these ranks, never by orphans.
  if (auto st = records_.Save(record); !st.ok()) return fail(st);
  spdlog::info("run {} ({}) attempt {}: started ranks {}..{} on node rank {} ({})",
               start.run_name(), start.run_id(), start.resumption_index(), start.first_rank(),
               start.first_rank() + start.local_world_size() - 1, start.node_rank(),
               LaunchesPerNode(start) ? "one launcher for the node" : "one process per rank");
  v1::AttemptUpdate u = UpdateFor(start, v1::ATTEMPT_PHASE_STARTED, "");
  u.set_image_digest(digest);
  std::vector<RankProcess*> late_stop;
  {
    absl::MutexLock lock(&mu_);
    auto it = attempts_.find(key);
    const bool cancelled = it != attempts_.end() && it->second.cancelled;
    if (!cancelled) {
      Queue(std::move(u));
      attempts_[key] = std::move(a);
      return absl::OkStatus();
    }
    // Stopped while its image was unpacked: its FINISHED went out; nothing may run.
    for (auto& p : a.procs) late_stop.push_back(p.get());
    StopAll(late_stop, absl::ZeroDuration(), *clock_);
    (void)records_.Remove(start.run_id(), start.resumption_index());
  }
  ReleaseRendezvous(a);
  if (release_on_error) options_.images->Release(digest);
  return absl::OkStatus();
}

int AttemptManager::CleanUpPreviousIncarnation() {
  int killed = 0;
  for (LostAttempt& lost :
       KillPreviousIncarnation(records_, options_.state_dir, options_.node_name, clock_->Now())) {
    killed += lost.killed;
    // Whatever they printed is still shipped.
    for (const auto& exit : lost.attempt.exits) {
      on_output_(OutputOf(lost.attempt, exit.rank()));
      on_rank_done_(OutputOf(lost.attempt, exit.rank()));
    }
    const Key key{lost.attempt.start.run_id(), lost.attempt.start.resumption_index()};
    absl::MutexLock lock(&mu_);
    Queue(std::move(lost.update));
    attempts_[key] = std::move(lost.attempt);
  }
  return killed;
}

void AttemptManager::Prepare(const v1::StartAttempt& start) {
  const Key key{start.run_id(), start.resumption_index()};
  Preparation p = preparer_.Prepare(
      start, [this, &key] { return Cancelled(key); },
      [&](const std::string& text) {
        absl::MutexLock lock(&mu_);
        Queue(UpdateFor(start, v1::ATTEMPT_PHASE_PREPARING, text));
      });
  switch (p.outcome) {
    case Preparation::Outcome::kCancelled:
      return;
    case Preparation::Outcome::kFailed:
      EndUnlaunched(start, std::move(p.failure));
      return;
    case Preparation::Outcome::kReady:
      (void)Launch(start, p.root, p.digest, !IsHostImage(start.image()));
      return;
  }
}

bool AttemptManager::Cancelled(const Key& key) {
  absl::MutexLock lock(&mu_);
  auto it = attempts_.find(key);
  return it == attempts_.end() || it->second.cancelled;
}

void AttemptManager::WallRendezvous(const std::optional<RankIdentity>& identity,
                                    AttemptState& a) const {
  const v1::StartAttempt& start = a.start;
  if (!options_.walls || start.node_rank() != 0 || start.master_port() <= 0 || !identity) return;
  if (auto st = options_.walls->GuardPort(start.master_port(), identity->uid); !st.ok()) {
    spdlog::warn("run {}: its rendezvous port {} is not walled: {}", start.run_id(),
                 start.master_port(), std::string(st.message()));
    return;
  }
  a.rendezvous_owner = identity->uid;
}

void AttemptManager::ReleaseRendezvous(const AttemptState& a) const {
  if (options_.walls && a.rendezvous_owner) {
    options_.walls->ReleasePort(a.start.master_port(), *a.rendezvous_owner);
  }
}

void AttemptManager::EndUnlaunched(const v1::StartAttempt& start, v1::AttemptUpdate u) {
  u.set_run_id(start.run_id());
  u.set_resumption_index(start.resumption_index());
  u.set_phase(v1::ATTEMPT_PHASE_START_FAILED);
  absl::MutexLock lock(&mu_);
  AttemptState& a = attempts_[{start.run_id(), start.resumption_index()}];
  a.start = start;
  a.preparing = false;
  a.ended_at = clock_->Now();
  Queue(std::move(u));
}

void AttemptManager::CancelPreparing(AttemptState& a) {
  a.cancelled = true;
  a.preparing = false;
  a.ended_at = clock_->Now();
  Queue(UpdateFor(a.start, v1::ATTEMPT_PHASE_FINISHED,
                  "stopped before its ranks started (while checked and prepared)"));
}

void AttemptManager::Stop(const std::string& run_id, int resumption_index, absl::Duration grace) {
  absl::MutexLock lock(&mu_);
  auto it = attempts_.find({run_id, resumption_index});
  if (it == attempts_.end()) return;
  if (it->second.preparing) {
    CancelPreparing(it->second);
    return;
  }
  it->second.stopped = true;
  std::vector<RankProcess*> procs;
  for (auto& p : it->second.procs) procs.push_back(p.get());
  spdlog::info("run {} attempt {}: stopping {} rank(s), grace {}", run_id, resumption_index,
               procs.size(), absl::FormatDuration(grace));
  auto clock = clock_;
  stoppers_.emplace_back([procs, grace, clock] { StopAll(procs, grace, *clock); });
}

int AttemptManager::KillAll() {
  std::vector<RankProcess*> procs;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [key, a] : attempts_) {
      if (a.preparing) CancelPreparing(a);
      for (auto& p : a.procs) {
        if (p->exit()) continue;
        procs.push_back(p.get());
        a.fenced = true;
      }
    }
  }
  if (!procs.empty()) StopAll(procs, absl::ZeroDuration(), *clock_);
  return static_cast<int>(procs.size());
}

void AttemptManager::Poll() {
  std::vector<RankOutput> done;
  AttemptReaper::Leftovers leftovers;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = clock_->Now();
    for (auto& finished : finish_gate_.Release(now)) Queue(std::move(finished));
    for (auto it = attempts_.begin(); it != attempts_.end();) {
      AttemptState& a = it->second;
      if (a.ended_at) {
        if (!finish_gate_.Holds(it->first.first, it->first.second) &&
            now - *a.ended_at > options_.keep_ended) {
          it = attempts_.erase(it);
          continue;
        }
        ++it;
        continue;
      }
      if (a.preparing) {
        ++it;
        continue;
      }
      AttemptReaper::Reaped reaped = reaper_.Reap(a);
      done.insert(done.end(), reaped.done.begin(), reaped.done.end());
      if (reaped.update) {
        // The ranks' last lines are still on their way (on_rank_done_ below marks their files
        // complete): FINISHED waits for them in the next polls.
        if (reaped.ended && finish_gate_.holds_updates()) {
          finish_gate_.Hold(*std::move(reaped.update), std::move(reaped.outputs), now);
        } else {
          Queue(*std::move(reaped.update));
        }
      }
      if (reaped.ended) {
        a.ended_at = now;
        (void)records_.Remove(it->first.first, it->first.second);
        RemoveSecretFiles(a.paths);
        reaper_.Gather(a, leftovers);
      }
      ++it;
    }
    // Orphaned descendants of ranks, re-parented to this subreaper, are reaped now and then;
    // never a rank leader, whose status its RankProcess collects.
    if (++polls_ % 50 == 0) ReapUnownedZombies();
  }
  for (const auto& d : done) on_rank_done_(d);
  // Outside mu_: the cache takes its own lock, and calls back (progress) under it.
  for (const auto& digest : leftovers.image_digests) {
    if (options_.images) options_.images->Release(digest);
  }
  for (const auto& name : leftovers.cgroups) {
    if (options_.sandbox) options_.sandbox->cgroups().Remove(name);
  }
  for (const auto& run_id : leftovers.trained_runs) memory_folders_->Release(run_id);
  // Outside mu_: iptables takes a while.
  for (const auto& [port, owner] : leftovers.rendezvous_walls) {
    options_.walls->ReleasePort(port, owner);
  }
}

std::vector<v1::AttemptUpdate> AttemptManager::TakeUpdates() {
  absl::MutexLock lock(&mu_);
  std::vector<v1::AttemptUpdate> out;
  out.swap(pending_);
  return out;
}

void AttemptManager::Requeue(std::vector<v1::AttemptUpdate> updates) {
  absl::MutexLock lock(&mu_);
  updates.insert(updates.end(), pending_.begin(), pending_.end());
  pending_ = std::move(updates);
}

bool AttemptManager::HasAttempts() {
  absl::MutexLock lock(&mu_);
  return !attempts_.empty();
}

std::vector<v1::LocalAttempt> AttemptManager::LocalAttempts() {
  absl::MutexLock lock(&mu_);
  std::vector<v1::LocalAttempt> out;
  for (const auto& [key, a] : attempts_) {
    v1::LocalAttempt l;
    l.set_run_id(key.first);
    l.set_resumption_index(key.second);
    l.set_lost(a.lost);
    l.set_preparing(a.preparing);
    l.set_logs_pending(finish_gate_.Holds(key.first, key.second));
    for (const auto& p : a.procs) {
      if (!p->exit()) l.add_running_ranks(p->rank());
    }
    for (const auto& e : a.exits) *l.add_exited_ranks() = e;
    out.push_back(std::move(l));
  }
  return out;
}

absl::StatusOr<pid_t> AttemptManager::SandboxOf(const std::string& run_id, int resumption) {
  if (!options_.sandbox) {
    return absl::FailedPreconditionError(
        "this node runs ranks without a sandbox (--sandbox off): there is no container to open "
        "a shell in");
  }
  absl::MutexLock lock(&mu_);
  auto it = attempts_.find({run_id, resumption});
  if (it != attempts_.end() && !it->second.ended_at) {
    for (auto& p : it->second.procs) {
      if (!p->exit()) return p->pid();
    }
  }
  return absl::NotFoundError(
      absl::StrCat("attempt ", resumption, " of run ", run_id, " runs nothing on this node now"));
}

std::vector<pid_t> AttemptManager::RankProcessGroups() {
  absl::MutexLock lock(&mu_);
  std::vector<pid_t> groups;
  for (auto& [key, a] : attempts_) {
    for (auto& p : a.procs) {
      if (!p->exit()) groups.push_back(p->pid());
    }
  }
  return groups;
}

int AttemptManager::preparing() {
  absl::MutexLock lock(&mu_);
  int n = 0;
  for (const auto& [key, a] : attempts_) n += a.preparing ? 1 : 0;
  return n;
}

int AttemptManager::running_ranks() {
  absl::MutexLock lock(&mu_);
  int n = 0;
  for (const auto& [key, a] : attempts_) {
    for (const auto& p : a.procs) n += p->exit() ? 0 : 1;
  }
  return n;
}

}  // namespace tessera::worker
