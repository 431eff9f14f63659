#include "healthcheck/run_watch.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_format.h"
#include "healthcheck/anomaly.h"

namespace tessera::health {

double StragglerRatio(const v1::Run& run, const std::string& node) {
  const auto& compute = run.progress().node_compute_seconds();
  auto mine = compute.find(node);
  if (mine == compute.end()) return 0;
  std::vector<double> others;
  for (const auto& [other, seconds] : compute) {
    if (other != node) others.push_back(seconds);
  }
  if (others.empty()) return 0;
  const double median = Median(others);
  return median > 0 ? mine->second / median : 0;
}

std::optional<SweepTriggerEvent> RunWatch::Observe(const v1::Run& run) {
  State& s = runs_[run.id()];
  if (s.resumption != run.resumption_index()) {
    s = State{};
    s.resumption = run.resumption_index();
  }
  const auto& p = run.progress();
  const int64_t reported = p.reported_at().seconds() * 1'000'000'000 + p.reported_at().nanos();
  if (reported == 0 || reported == s.last_report_nanos) return std::nullopt;
  s.last_report_nanos = reported;
  if (s.quiet_reports > 0) {
    --s.quiet_reports;
    return std::nullopt;
  }

  const double threshold = run.spec().scheduling().mfu_threshold();
  if (threshold > 0 && p.mfu() > 0) {
    s.low_mfu = p.mfu() < threshold ? s.low_mfu + 1 : 0;
    if (s.low_mfu >= config_.mfu_reports) {
      s.quiet_reports = config_.rearm_reports;
      const int reports = s.low_mfu;
      s.low_mfu = 0;
      return SweepTriggerEvent{
          v1::SWEEP_TRIGGER_MFU_DROP, run.name(), "",
          absl::StrFormat("MFU %.2f%% under the run's threshold %.2f%% for %d reports",
                          100 * p.mfu(), 100 * threshold, reports)};
    }
  }

  const auto& compute = p.node_compute_seconds();
  if (compute.size() >= 2) {
    for (const auto& [node, seconds] : compute) {
      const double ratio = StragglerRatio(run, node);
      int& count = s.straggling[node];
      count = ratio > config_.straggler_factor ? count + 1 : 0;
      if (count >= config_.straggler_reports) {
        s.quiet_reports = config_.rearm_reports;
        s.straggling.clear();
        return SweepTriggerEvent{
            v1::SWEEP_TRIGGER_STRAGGLER, run.name(), node,
            absl::StrFormat("node %s computes a step in %.3f s, %.1f x the median %.3f s of the "
                            "run's other nodes, for %d reports",
                            node, seconds, ratio, seconds / ratio, count)};
      }
    }
  }
  return std::nullopt;
}

void RunWatch::Retain(const std::set<std::string>& running_run_ids) {
  for (auto it = runs_.begin(); it != runs_.end();) {
    it = running_run_ids.count(it->first) ? std::next(it) : runs_.erase(it);
  }
}

}  // namespace tessera::health
