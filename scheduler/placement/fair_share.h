#pragma once
// Fair share: within a priority, runs of teams (and users) that used less than their share of
// the GPUs recently go before those that used more, as Slurm's fair-share factor does.
//
// Usage is GPU-seconds, each second weighted by 2^(-age / half_life), so what a team ran a
// half-life ago counts half. A team's factor is 2^(-(its usage / all usage) / (its share / all
// shares)): 1 for a team that used nothing, 0.5 for one that used exactly its share, less for
// one that used more. Teams are ranked by factor (higher first), and within a team its users by
// their own usage (less first); a user in no team is in the team "" of share 1. Ties go by name,
// so the order is deterministic.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"

namespace tessera::scheduler {

// GPU-seconds of `gpus` held over [start, end), decayed to `now` (times in microseconds; an
// interval still open has end >= now and counts up to now).
double DecayedGpuSeconds(int gpus, int64_t start_micros, int64_t end_micros, int64_t now_micros,
                         double half_life_seconds);

class FairShare {
 public:
  explicit FairShare(double half_life_seconds) : half_life_seconds_(half_life_seconds) {}

  // A team's share (weight); teams not set have 1. Non-positive shares count as the smallest
  // positive one.
  void SetShare(const std::string& team, double share);
  // GPUs held by one of the user's attempts over [start, end) (end >= now: still running).
  void AddUsage(const std::string& team, const std::string& user, int gpus, int64_t start_micros,
                int64_t end_micros, int64_t now_micros);

  double TeamUsage(absl::string_view team) const;
  double UserUsage(absl::string_view team, absl::string_view user) const;
  // The team's factor in (0, 1]; 1 when nobody used anything.
  double TeamFactor(absl::string_view team) const;

  // A rank for each (team, user) of `owners` (lower goes first), in the same order; equal pairs
  // get equal ranks.
  std::vector<uint32_t> Ranks(const std::vector<std::pair<std::string, std::string>>& owners) const;

 private:
  double Share(absl::string_view team) const;

  double half_life_seconds_;
  double total_usage_ = 0;
  absl::flat_hash_map<std::string, double> shares_;
  absl::flat_hash_map<std::string, double> team_usage_;
  absl::flat_hash_map<std::string, absl::flat_hash_map<std::string, double>> user_usage_;
  // The sum of the shares of the teams above; a cache TeamFactor fills, reset by every change.
  mutable std::optional<double> known_shares_;
};

}  // namespace tessera::scheduler
