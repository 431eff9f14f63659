#include "worker/daemon/attempt_manager.h"

#include <signal.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "base/timestamps.h"
#include "worker/daemon/owned_children.h"

namespace tessera::worker {
namespace fs = std::filesystem;

namespace {

absl::Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("writing ", path));
  return absl::OkStatus();
}

}  // namespace

AttemptManager::AttemptManager(AttemptManagerOptions options, std::shared_ptr<Clock> clock,
                               std::function<void(const RankOutput&)> on_output,
                               std::function<void(const RankOutput&)> on_rank_done,
                               std::function<void(const RankOutput&)> on_started)
    : options_(std::move(options)),
      clock_(std::move(clock)),
      on_output_(std::move(on_output)),
      on_rank_done_(std::move(on_rank_done)),
      on_started_(std::move(on_started)),
      records_(options_.state_dir) {}

AttemptManager::~AttemptManager() {
  std::vector<RankProcess*> running;
  std::vector<std::thread> stoppers;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [key, a] : attempts_) {
      for (auto& p : a.procs) running.push_back(p.get());
    }
    stoppers.swap(stoppers_);
  }
  for (auto& t : stoppers) t.join();
  if (!running.empty()) StopAll(running, absl::Seconds(2), *clock_);
  absl::MutexLock lock(&mu_);
  for (auto& [key, a] : attempts_) (void)records_.Remove(key.first, key.second);
}

v1::RankExit AttemptManager::ExitOf(const Attempt& a, int rank, const ExitInfo& info) const {
  v1::RankExit e;
  e.set_rank(rank);
  e.set_node_rank(a.start.node_rank());
  e.set_node_name(options_.node_name);
  e.set_exit_code(info.signaled() ? 128 + info.signal : info.exit_code);
  e.set_signal(info.signal);
  // Killed by the fence, or ended in a way the worker could not learn: Tessera's doing.
  e.set_control_plane_fault(info.status_lost || (a.fenced && info.signaled()));
  return e;
}

RankOutput AttemptManager::OutputOf(const Attempt& a, int rank) const {
  pid_t pid = 0;
  for (const auto& p : a.procs) {
    if (p->rank() == rank) pid = p->pid();
  }
  return RankOutput{a.start.run_id(),
                    a.start.resumption_index(),
                    a.start.node_rank(),
                    rank,
                    RankLogPath(a.paths, rank, "stdout"),
                    RankLogPath(a.paths, rank, "stderr"),
                    RankProgressPath(a.paths, rank),
                    absl::Seconds(a.start.hang_timeout_seconds()),
                    pid};
}

void AttemptManager::Queue(v1::AttemptUpdate u) {
  *u.mutable_time() = ToProtoTime(clock_->Now());
  pending_.push_back(std::move(u));
}

int AttemptManager::CleanUpPreviousIncarnation() {
  std::vector<std::string> problems;
  auto found = records_.LoadAll(&problems);
  for (const auto& p : problems) spdlog::warn("unreadable attempt record {}", p);
  int killed_total = 0;
  for (const auto& record : found) {
    auto killed = KillRecordedRanks(record);
    killed_total += static_cast<int>(killed.size());
    spdlog::warn("run {} attempt {}: killed {} rank(s) left by the previous worker", record.run_id,
                 record.resumption_index, killed.size());
    Attempt a;
    a.start.set_run_id(record.run_id);
    a.start.set_run_name(record.run_name);
    a.start.set_resumption_index(record.resumption_index);
    a.start.set_node_rank(record.node_rank);
    a.paths = PathsFor(options_.state_dir, record.run_id, record.resumption_index);
    a.lost = true;
    a.ended_at = clock_->Now();
    v1::AttemptUpdate u;
    u.set_run_id(record.run_id);
    u.set_resumption_index(record.resumption_index);
    u.set_phase(v1::ATTEMPT_PHASE_LOST);
    u.set_detail(absl::StrCat("the worker on ", options_.node_name, " restarted and killed ",
                              killed.size(), " rank(s) of its previous incarnation"));
    for (const auto& rank : record.ranks) {
      const bool was_running = std::find(killed.begin(), killed.end(), rank.rank) != killed.end();
      ExitInfo info;
      if (was_running) info.signal = SIGKILL;
      *u.add_rank_exits() = ExitOf(a, rank.rank, info);
      a.exits.push_back(u.rank_exits(u.rank_exits_size() - 1));
      a.reported[rank.rank] = true;
      // Whatever they printed is still shipped.
      on_output_(OutputOf(a, rank.rank));
      on_rank_done_(OutputOf(a, rank.rank));
    }
    (void)records_.Remove(record.run_id, record.resumption_index);
    absl::MutexLock lock(&mu_);
    Queue(std::move(u));
    attempts_[{record.run_id, record.resumption_index}] = std::move(a);
  }
  return killed_total;
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
  Attempt a;
  a.start = start;
  a.paths = PathsFor(options_.state_dir, start.run_id(), start.resumption_index());
  auto fail = [&](const absl::Status& st) {
    v1::AttemptUpdate u;
    u.set_run_id(start.run_id());
    u.set_resumption_index(start.resumption_index());
    u.set_phase(v1::ATTEMPT_PHASE_START_FAILED);
    u.set_detail(std::string(st.message()));
    a.ended_at = clock_->Now();
    a.procs.clear();  // kills whatever did start
    absl::MutexLock lock(&mu_);
    Queue(std::move(u));
    attempts_[key] = std::move(a);
    return st;
  };
  auto specs = BuildRankSpecs(start, a.paths, options_.simulated_gpus);
  if (!specs.ok()) return fail(specs.status());
  for (auto& spec : *specs) {
    for (const auto& [k, v] : options_.rank_env) spec.env.emplace(k, v);
  }
  // The GPU's model, for engines that compute MFU from the device's peak.
  if (!options_.gpu_model.empty() && start.gpu_indices_size() > 0) {
    for (auto& spec : *specs) spec.env.emplace("TESSERA_GPU_NAME", options_.gpu_model);
  }
  const auto& identity = options_.rank_identity;
  for (auto& spec : *specs) {
    spec.identity = identity;
    if (identity) {
      spec.env.emplace("HOME", a.paths.work_dir);
      spec.env.emplace("USER", identity->name);
      spec.env.emplace("LOGNAME", identity->name);
    }
  }
  std::error_code ec;
  for (const auto& dir : {a.paths.work_dir, a.paths.logs_dir, a.paths.progress_dir}) {
    fs::create_directories(dir, ec);
    if (ec) return fail(absl::InternalError(absl::StrCat("creating ", dir, ": ", ec.message())));
  }
  if (identity) {
    // The rank reaches its folders through the worker's (which it may enter, not list; the
    // state folder and runs/ were opened so at start) and writes only its work and progress
    // folders; the spooled output stays the worker's.
    for (const auto& dir : {fs::path(a.paths.dir).parent_path().string(), a.paths.dir}) {
      if (auto st = LetRankPass(dir); !st.ok()) return fail(st);
    }
    fs::permissions(a.paths.logs_dir, fs::perms::owner_all, ec);
    if (ec) {
      return fail(
          absl::InternalError(absl::StrCat("chmod ", a.paths.logs_dir, ": ", ec.message())));
    }
    for (const auto& dir : {a.paths.work_dir, a.paths.progress_dir}) {
      if (auto st = GiveToRank(dir, identity); !st.ok()) return fail(st);
    }
  }
  // For a restarted worker's log shipper, which finds spool files by walking the folders.
  if (auto st = WriteFile(a.paths.dir + "/node_rank", std::to_string(start.node_rank()));
      !st.ok()) {
    return fail(st);
  }
  if (auto st = WriteFile(a.paths.parameters_path,
                          start.parameters_json().empty() ? "{}" : start.parameters_json());
      !st.ok()) {
    return fail(st);
  }
  AttemptRecord record{start.run_id(),    start.run_name(), start.resumption_index(),
                       start.node_rank(), a.paths.dir,      {}};
  for (const auto& spec : *specs) {
    // The shipper learns of the files before the rank can write its first line.
    on_output_(OutputOf(a, spec.rank));
    auto proc = RankProcess::Start(spec);
    if (!proc.ok()) {
      return fail(absl::Status(proc.status().code(),
                               absl::StrCat("rank ", spec.rank, ": ", proc.status().message())));
    }
    record.ranks.push_back(
        {spec.rank, (*proc)->pid(), ProcessStartTicks((*proc)->pid()).value_or(0)});
    a.procs.push_back(std::move(*proc));
    if (on_started_) on_started_(OutputOf(a, spec.rank));
  }
  // Written before reporting STARTED: from here on a crash of this worker is followed by a
  // clean-up of these ranks, never by orphans.
  if (auto st = records_.Save(record); !st.ok()) return fail(st);
  spdlog::info("run {} ({}) attempt {}: started ranks {}..{} on node rank {}", start.run_name(),
               start.run_id(), start.resumption_index(), start.first_rank(),
               start.first_rank() + start.local_world_size() - 1, start.node_rank());
  v1::AttemptUpdate u;
  u.set_run_id(start.run_id());
  u.set_resumption_index(start.resumption_index());
  u.set_phase(v1::ATTEMPT_PHASE_STARTED);
  absl::MutexLock lock(&mu_);
  Queue(std::move(u));
  attempts_[key] = std::move(a);
  return absl::OkStatus();
}

void AttemptManager::Stop(const std::string& run_id, int resumption_index, absl::Duration grace) {
  absl::MutexLock lock(&mu_);
  auto it = attempts_.find({run_id, resumption_index});
  if (it == attempts_.end()) return;
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
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = clock_->Now();
    for (auto it = attempts_.begin(); it != attempts_.end();) {
      Attempt& a = it->second;
      if (a.ended_at) {
        if (now - *a.ended_at > options_.keep_ended) {
          it = attempts_.erase(it);
          continue;
        }
        ++it;
        continue;
      }
      v1::AttemptUpdate u;
      bool all_exited = true;
      for (auto& p : a.procs) {
        if (!p->Poll()) {
          all_exited = false;
          continue;
        }
        if (a.reported[p->rank()]) continue;
        a.reported[p->rank()] = true;
        *u.add_rank_exits() = ExitOf(a, p->rank(), *p->exit());
        a.exits.push_back(u.rank_exits(u.rank_exits_size() - 1));
        done.push_back(OutputOf(a, p->rank()));
        spdlog::info("run {} attempt {}: rank {} {}", a.start.run_id(), a.start.resumption_index(),
                     p->rank(), p->exit()->ToString());
      }
      if (u.rank_exits_size() > 0 || (all_exited && !a.procs.empty())) {
        u.set_run_id(a.start.run_id());
        u.set_resumption_index(a.start.resumption_index());
        u.set_phase(all_exited ? v1::ATTEMPT_PHASE_FINISHED : v1::ATTEMPT_PHASE_RANK_EXITED);
        Queue(std::move(u));
      }
      if (all_exited) {
        a.ended_at = now;
        (void)records_.Remove(it->first.first, it->first.second);
      }
      ++it;
    }
    // Orphaned descendants of ranks, re-parented to this subreaper, are reaped now and then;
    // never a rank leader, whose status its RankProcess collects.
    if (++polls_ % 50 == 0) ReapUnownedZombies();
  }
  for (const auto& d : done) on_rank_done_(d);
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

std::vector<v1::LocalAttempt> AttemptManager::LocalAttempts() {
  absl::MutexLock lock(&mu_);
  std::vector<v1::LocalAttempt> out;
  for (const auto& [key, a] : attempts_) {
    v1::LocalAttempt l;
    l.set_run_id(key.first);
    l.set_resumption_index(key.second);
    l.set_lost(a.lost);
    for (const auto& p : a.procs) {
      if (!p->exit()) l.add_running_ranks(p->rank());
    }
    for (const auto& e : a.exits) *l.add_exited_ranks() = e;
    out.push_back(std::move(l));
  }
  return out;
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

int AttemptManager::running_ranks() {
  absl::MutexLock lock(&mu_);
  int n = 0;
  for (const auto& [key, a] : attempts_) {
    for (const auto& p : a.procs) n += p->exit() ? 0 : 1;
  }
  return n;
}

}  // namespace tessera::worker
