#include "services/runs/describe.h"

#include <algorithm>

#include "base/timestamps.h"

namespace tessera::runs {
namespace {

absl::Time EndOf(const v1::Attempt& a, absl::Time now) {
  return a.has_ended_at() ? FromProtoTime(a.ended_at()) : now;
}

bool IsInterruption(v1::AttemptEndReason r) {
  return r == v1::ATTEMPT_END_REASON_NODE_FAILURE || r == v1::ATTEMPT_END_REASON_GPU_FAULT ||
         r == v1::ATTEMPT_END_REASON_HANG || r == v1::ATTEMPT_END_REASON_STRAGGLER ||
         r == v1::ATTEMPT_END_REASON_PREEMPTED || r == v1::ATTEMPT_END_REASON_CONTROL_PLANE;
}

}  // namespace

v1::RunDescription Describe(const v1::Run& run, const std::vector<v1::Attempt>& attempts,
                            const std::vector<v1::RunEvent>& events, absl::Time now) {
  v1::RunDescription d;
  *d.mutable_run() = run;
  for (const auto& a : attempts) *d.add_attempts() = a;
  for (const auto& e : events) *d.add_events() = e;

  double effective = 0;
  for (size_t i = 0; i < attempts.size(); ++i) {
    const v1::Attempt& a = attempts[i];
    if (!a.has_started_at()) continue;
    const double ran = absl::ToDoubleSeconds(EndOf(a, now) - FromProtoTime(a.started_at()));
    if (!IsInterruption(a.end_reason())) {
      effective += std::max(0.0, ran);
      continue;
    }
    // Fraction of this attempt's progress that the next attempt kept.
    double kept_fraction = 0;
    const v1::Attempt* next = i + 1 < attempts.size() ? &attempts[i + 1] : nullptr;
    const int64_t steps = a.last_step() - a.resumed_from_step();
    if (next && steps > 0 && next->resumed_from_step() > a.resumed_from_step()) {
      kept_fraction = std::min(
          1.0, static_cast<double>(next->resumed_from_step() - a.resumed_from_step()) / steps);
    }
    effective += std::max(0.0, ran) * kept_fraction;
    v1::Interruption* it = d.add_interruptions();
    it->set_resumption_index(a.resumption_index());
    it->set_cause(a.end_reason());
    it->set_detection_method(a.detection_method());
    *it->mutable_time() = a.ended_at();
    double waited = 0;
    if (next) {
      const absl::Time resumed = next->has_started_at() ? FromProtoTime(next->started_at()) : now;
      waited = std::max(0.0, absl::ToDoubleSeconds(resumed - EndOf(a, now)));
    }
    it->set_seconds_lost(std::max(0.0, ran) * (1 - kept_fraction) + waited);
    it->set_detail(a.reason());
  }
  d.mutable_run()->set_effective_training_seconds(effective);
  if (run.has_created_at()) {
    const absl::Time end = run.has_ended_at() ? FromProtoTime(run.ended_at()) : now;
    const double wall = absl::ToDoubleSeconds(end - FromProtoTime(run.created_at()));
    d.set_goodput(wall > 0 ? std::clamp(effective / wall, 0.0, 1.0) : 0.0);
  }
  return d;
}

}  // namespace tessera::runs
