#include "scheduler/service/team_policy.h"

#include <spdlog/spdlog.h>

namespace tessera::scheduler {

TeamPolicy::TeamPolicy(std::shared_ptr<store::TeamStore> teams, std::shared_ptr<Clock> clock,
                       absl::Duration refresh, std::shared_ptr<store::UsageStore> usage,
                       absl::Duration half_life)
    : teams_(std::move(teams)),
      clock_(std::move(clock)),
      refresh_(refresh),
      usage_(std::move(usage)),
      half_life_(half_life) {}

void TeamPolicy::RefreshUsage() {
  const absl::Time now = clock_->Now();
  if (usage_ == nullptr || now - usage_read_at_ < kUsageRefresh) return;
  // Older than five half-lives counts for less than 1/32: not read.
  auto attempts = usage_->ListAttemptUsage(now - kUsageHalfLives * half_life_, now);
  if (!attempts.ok()) {
    spdlog::warn("scheduler: could not read GPU usage for fair share: {}",
                 attempts.status().ToString());
    return;
  }
  usage_read_at_ = now;
  // Decayed once per read: the ranks move slowly, and a cycle (every 200 ms) only looks them up.
  share_ = std::make_unique<FairShare>(absl::ToDoubleSeconds(half_life_));
  for (const v1::Team& team : cached_) {
    if (team.share() > 0) share_->SetShare(team.name(), team.share());
  }
  const int64_t now_micros = absl::ToUnixMicros(now);
  for (const store::AttemptUsage& a : *attempts) {
    share_->AddUsage(
        a.team, a.user, a.gpus, absl::ToUnixMicros(a.started_at),
        a.ended_at == absl::InfiniteFuture() ? now_micros : absl::ToUnixMicros(a.ended_at),
        now_micros);
  }
}

void TeamPolicy::AssignShareRanks(const std::vector<const v1::Run*>& runs,
                                  std::vector<QueuedRun>& queue) {
  std::vector<std::pair<std::string, std::string>> owners;
  owners.reserve(runs.size());
  for (const v1::Run* run : runs) owners.emplace_back(run->team(), run->user());
  absl::MutexLock lock(&mu_);
  Refresh();
  RefreshUsage();
  if (share_ == nullptr) return;  // no usage read: every owner ranks alike
  const std::vector<uint32_t> ranks = share_->Ranks(owners);
  for (size_t i = 0; i < queue.size(); ++i) queue[i].share_rank = ranks[i];
}

void TeamPolicy::Refresh() {
  if (teams_ == nullptr || clock_->Now() - read_at_ < refresh_) return;
  auto teams = teams_->ListTeams();
  if (!teams.ok()) {
    // Placement goes on with the quotas last read; the next cycle tries again.
    spdlog::warn("scheduler: could not read the teams: {}", teams.status().ToString());
    return;
  }
  read_at_ = clock_->Now();
  cached_ = std::move(*teams);
}

std::vector<TeamQuota> TeamPolicy::Quotas() {
  absl::MutexLock lock(&mu_);
  Refresh();
  std::vector<TeamQuota> quotas;
  for (const v1::Team& team : cached_) {
    for (const v1::TeamQuota& q : team.quotas()) {
      quotas.push_back(TeamQuota{team.name(), q.cluster(), q.gpu_type(), q.gpus()});
    }
  }
  return quotas;
}

absl::StatusOr<std::string> TeamPolicy::TeamOfUser(const std::string& user) {
  if (teams_ == nullptr) return std::string();
  return teams_->TeamOfUser(user);
}

}  // namespace tessera::scheduler
