#include "scheduler/placement/fair_share.h"

#include <algorithm>
#include <cmath>
#include <tuple>

namespace tessera::scheduler {

double DecayedGpuSeconds(int gpus, int64_t start_micros, int64_t end_micros, int64_t now_micros,
                         double half_life_seconds) {
  const int64_t end = std::min(end_micros, now_micros);
  if (gpus <= 0 || end <= start_micros) return 0;
  const double start_age = static_cast<double>(now_micros - start_micros) / 1e6;
  const double end_age = static_cast<double>(now_micros - end) / 1e6;
  if (half_life_seconds <= 0) return 0;  // no memory at all
  // The integral of gpus * 2^(-age / H) over the interval.
  const double h = half_life_seconds / std::log(2.0);
  return gpus * h *
         (std::exp2(-end_age / half_life_seconds) - std::exp2(-start_age / half_life_seconds));
}

void FairShare::SetShare(const std::string& team, double share) {
  shares_[team] = share;
  known_shares_.reset();
}

void FairShare::AddUsage(const std::string& team, const std::string& user, int gpus,
                         int64_t start_micros, int64_t end_micros, int64_t now_micros) {
  const double used =
      DecayedGpuSeconds(gpus, start_micros, end_micros, now_micros, half_life_seconds_);
  if (used <= 0) return;
  total_usage_ += used;
  team_usage_[team] += used;
  known_shares_.reset();
  user_usage_[team][user] += used;
}

double FairShare::TeamUsage(absl::string_view team) const {
  auto it = team_usage_.find(team);
  return it == team_usage_.end() ? 0 : it->second;
}

double FairShare::UserUsage(absl::string_view team, absl::string_view user) const {
  auto it = user_usage_.find(team);
  if (it == user_usage_.end()) return 0;
  auto u = it->second.find(user);
  return u == it->second.end() ? 0 : u->second;
}

double FairShare::Share(absl::string_view team) const {
  constexpr double kSmallest = 1e-6;
  auto it = shares_.find(team);
  return it == shares_.end() ? 1.0 : std::max(kSmallest, it->second);
}

double FairShare::TeamFactor(absl::string_view team) const {
  if (total_usage_ <= 0) return 1.0;
  // Normalised over the teams with a share set or usage (summed once: Ranks asks every team),
  // and this one.
  if (!known_shares_) {
    double sum = 0;
    for (const auto& [name, share] : shares_) sum += Share(name);
    for (const auto& [name, used] : team_usage_) {
      if (!shares_.contains(name)) sum += Share(name);
    }
    known_shares_ = sum;
  }
  const bool known = shares_.contains(team) || team_usage_.contains(team);
  const double all_shares = *known_shares_ + (known ? 0 : Share(team));
  const double usage = TeamUsage(team) / total_usage_;
  const double share = Share(team) / all_shares;
  return std::exp2(-usage / share);
}

std::vector<uint32_t> FairShare::Ranks(
    const std::vector<std::pair<std::string, std::string>>& owners) const {
  // The distinct owners, each with its key; sorted, their positions are the ranks.
  absl::flat_hash_map<std::string, double> team_factor;
  struct Owner {
    double team_factor;
    std::string team;
    double user_usage;
    std::string user;
  };
  std::vector<Owner> distinct;
  absl::flat_hash_map<std::pair<std::string, std::string>, uint32_t> index;
  std::vector<uint32_t> owner_index(owners.size());
  for (size_t i = 0; i < owners.size(); ++i) {
    auto [it, inserted] = index.try_emplace(owners[i], static_cast<uint32_t>(distinct.size()));
    if (inserted) {
      const auto& [team, user] = owners[i];
      auto [f, new_team] = team_factor.try_emplace(team, 0.0);
      if (new_team) f->second = TeamFactor(team);
      distinct.push_back(Owner{f->second, team, UserUsage(team, user), user});
    }
    owner_index[i] = it->second;
  }
  std::vector<uint32_t> order(distinct.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    const Owner& x = distinct[a];
    const Owner& y = distinct[b];
    return std::tie(y.team_factor, x.team, x.user_usage, x.user) <
           std::tie(x.team_factor, y.team, y.user_usage, y.user);
  });
  std::vector<uint32_t> rank_of(distinct.size());
  for (uint32_t r = 0; r < order.size(); ++r) rank_of[order[r]] = r;
  std::vector<uint32_t> ranks(owners.size());
  for (size_t i = 0; i < owners.size(); ++i) ranks[i] = rank_of[owner_index[i]];
  return ranks;
}

}  // namespace tessera::scheduler
