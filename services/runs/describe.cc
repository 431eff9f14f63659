#include "services/runs/describe.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "base/timestamps.h"

namespace tessera::runs {
namespace {

using Points = std::vector<const store::ProgressPoint*>;  // one attempt's, by step

absl::Time EndOf(const v1::Attempt& a, absl::Time now) {
  return a.has_ended_at() ? FromProtoTime(a.ended_at()) : now;
}

bool IsInterruption(v1::AttemptEndReason r) {
  return r == v1::ATTEMPT_END_REASON_NODE_FAILURE || r == v1::ATTEMPT_END_REASON_GPU_FAULT ||
         r == v1::ATTEMPT_END_REASON_HANG || r == v1::ATTEMPT_END_REASON_STRAGGLER ||
         r == v1::ATTEMPT_END_REASON_PREEMPTED || r == v1::ATTEMPT_END_REASON_CONTROL_PLANE ||
         r == v1::ATTEMPT_END_REASON_RESIZED;
}

double Seconds(absl::Duration d) { return std::max(0.0, absl::ToDoubleSeconds(d)); }

std::map<int, Points> ByAttempt(const std::vector<store::ProgressPoint>& progress) {
  std::map<int, Points> out;
  for (const auto& p : progress) out[p.resumption_index].push_back(&p);
  for (auto& [index, points] : out) {
    std::stable_sort(points.begin(), points.end(),
                     [](const auto* a, const auto* b) { return a->step < b->step; });
  }
  return out;
}

// The median seconds per step between consecutive reports of an attempt; 0 with none.
double MedianStepSeconds(const std::map<int, Points>& by_attempt) {
  std::vector<double> rates;
  for (const auto& [index, points] : by_attempt) {
    for (size_t i = 1; i < points.size(); ++i) {
      const int64_t steps = points[i]->step - points[i - 1]->step;
      const double seconds = absl::ToDoubleSeconds(points[i]->time - points[i - 1]->time);
      if (steps > 0 && seconds > 0) rates.push_back(seconds / static_cast<double>(steps));
    }
  }
  if (rates.empty()) return 0;
  std::nth_element(rates.begin(), rates.begin() + rates.size() / 2, rates.end());
  return rates[rates.size() / 2];
}

std::string CauseName(v1::AttemptEndReason cause) {
  std::string name = v1::AttemptEndReason_Name(cause);
  const std::string prefix = "ATTEMPT_END_REASON_";
  if (name.rfind(prefix, 0) == 0) name.erase(0, prefix.size());
  return name;
}

// The parts of interruption `it` (attempt `a`, then `next` if any) from the progress reports,
// `step_seconds` apart. A moment known only by a later report is taken back by the steps between
// (training resumed at the checkpoint's step a few steps before its first report).
void MeasureFromProgress(const v1::Attempt& a, const v1::Attempt* next, const Points* before,
                         const Points* after, double step_seconds, absl::Time run_end,
                         absl::Time now, v1::Interruption& it) {
  const auto back_by = [&](int64_t steps) {
    return absl::Seconds(static_cast<double>(std::max<int64_t>(0, steps)) * step_seconds);
  };
  absl::Time last_progress = a.has_started_at() ? FromProtoTime(a.started_at()) : EndOf(a, now);
  int64_t reached = a.resumed_from_step();
  if (before != nullptr && !before->empty()) {
    last_progress = before->back()->time;
    reached = before->back()->step;
  }
  const absl::Time ended = EndOf(a, now);
  it.set_detection_seconds(Seconds(ended - last_progress));
  if (next == nullptr || !next->has_started_at()) {
    // Not started again (yet, or ever: the run ended here).
    it.set_downtime_seconds(Seconds(run_end - ended));
    it.set_ongoing(run_end == now);
    return;
  }
  const absl::Time started = FromProtoTime(next->started_at());
  it.set_downtime_seconds(Seconds(started - ended));
  it.set_rework_steps(std::max<int64_t>(0, reached - next->resumed_from_step()));
  if (after == nullptr || after->empty()) {
    it.set_restart_seconds(Seconds(EndOf(*next, now) - started));
    it.set_ongoing(!next->has_ended_at());
    return;
  }
  const store::ProgressPoint& first = *after->front();
  const absl::Time training =
      std::max(started, first.time - back_by(first.step - next->resumed_from_step()));
  it.set_restart_seconds(Seconds(training - started));
  auto back =
      std::find_if(after->begin(), after->end(), [&](const auto* p) { return p->step >= reached; });
  if (back != after->end()) {
    const absl::Time there = std::max(training, (*back)->time - back_by((*back)->step - reached));
    it.set_rework_seconds(Seconds(there - training));
  } else if (!next->has_ended_at()) {
    it.set_rework_seconds(Seconds(now - training));
    it.set_ongoing(true);
  } else {
    // It ended before getting back there: the rest is the next interruption's.
    it.set_rework_seconds(Seconds(after->back()->time - training));
  }
}

}  // namespace

std::optional<v1::CheckpointAdvice> AdviseCheckpointInterval(const v1::RunProgress& progress,
                                                             double step_seconds, int gpus,
                                                             const ReliabilityFigures& figures) {
  const double save = progress.checkpoint_save_seconds();
  if (progress.checkpoint_interval_steps() <= 0 || save <= 0 || step_seconds <= 0 ||
      figures.gpu_hours <= 0) {
    return std::nullopt;
  }
  v1::CheckpointAdvice a;
  a.set_save_seconds(save);
  a.set_interval_steps(progress.checkpoint_interval_steps());
  a.set_interval_seconds(static_cast<double>(progress.checkpoint_interval_steps()) * step_seconds);
  a.set_interruptions(figures.interruptions);
  a.set_gpu_hours(figures.gpu_hours);
  a.set_window_days(figures.window_days);
  // None seen: at most one, so the interval advised is at least as short as it should be.
  a.set_rate_is_bound(figures.interruptions == 0);
  const double per_gpu_hour = std::max(1, figures.interruptions) / figures.gpu_hours;
  const double mtbi = 3600 / (per_gpu_hour * std::max(1, gpus));
  a.set_mean_seconds_between_interruptions(mtbi);
  // Daly's higher-order estimate of the optimum (Young's sqrt(2 C M) is its first term); a save
  // that costs more than twice the time between faults: save once per fault.
  double advised = mtbi;
  if (save < 2 * mtbi) {
    const double x = std::sqrt(save / (2 * mtbi));
    advised = std::sqrt(2 * save * mtbi) * (1 + x / 3 + x * x / 9) - save;
  }
  advised = std::max(advised, step_seconds);
  a.set_advised_interval_seconds(advised);
  a.set_advised_interval_steps(std::max<int64_t>(1, std::llround(advised / step_seconds)));
  // Saves cost C per interval; a fault costs half an interval of steps on average.
  const auto loss = [&](double interval) {
    return std::min(1.0, save / interval + interval / (2 * mtbi));
  };
  a.set_expected_loss_now(loss(a.interval_seconds()));
  a.set_expected_loss_advised(loss(advised));
  return a;
}

v1::RunDescription Describe(const v1::Run& run, const std::vector<v1::Attempt>& attempts,
                            const std::vector<v1::RunEvent>& events,
                            const std::vector<store::ProgressPoint>& progress, absl::Time now) {
  v1::RunDescription d;
  *d.mutable_run() = run;
  for (const auto& a : attempts) *d.add_attempts() = a;
  for (const auto& e : events) *d.add_events() = e;

  const auto by_attempt = ByAttempt(progress);
  const double step_seconds = MedianStepSeconds(by_attempt);
  d.set_step_seconds(step_seconds);
  const auto points_of = [&](const v1::Attempt* a) -> const Points* {
    if (a == nullptr) return nullptr;
    auto it = by_attempt.find(a->resumption_index());
    return it == by_attempt.end() ? nullptr : &it->second;
  };
  const absl::Time run_end = run.has_ended_at() ? FromProtoTime(run.ended_at()) : now;

  double running = 0;  // the attempts' time, start to end
  double kept = 0;     // of it, what the next attempts kept (without reports)
  for (size_t i = 0; i < attempts.size(); ++i) {
    const v1::Attempt& a = attempts[i];
    if (!a.has_started_at()) continue;  // never ran: nothing to interrupt
    const double ran = Seconds(EndOf(a, now) - FromProtoTime(a.started_at()));
    running += ran;
    if (!IsInterruption(a.end_reason())) {
      kept += ran;
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
    kept += ran * kept_fraction;
    v1::Interruption* it = d.add_interruptions();
    it->set_resumption_index(a.resumption_index());
    it->set_cause(a.end_reason());
    it->set_detection_method(a.detection_method());
    *it->mutable_time() = a.ended_at();
    it->set_detail(a.reason());
    if (step_seconds > 0) {
      MeasureFromProgress(a, next, points_of(&a), points_of(next), step_seconds, run_end, now, *it);
      it->set_seconds_lost(it->detection_seconds() + it->downtime_seconds() +
                           it->restart_seconds() + it->rework_seconds());
    } else {
      double waited = 0;
      if (next) {
        const absl::Time resumed = next->has_started_at() ? FromProtoTime(next->started_at()) : now;
        waited = Seconds(resumed - EndOf(a, now));
      }
      it->set_downtime_seconds(waited);
      it->set_rework_seconds(ran * (1 - kept_fraction));
      it->set_seconds_lost(ran * (1 - kept_fraction) + waited);
    }
    (*d.mutable_seconds_lost_by_cause())[CauseName(a.end_reason())] += it->seconds_lost();
  }

  double effective = kept;
  if (step_seconds > 0) {
    // The steps the run has, at the pace it trains when nothing goes wrong.
    int64_t steps = 0;
    for (const auto& [index, points] : by_attempt) steps = std::max(steps, points.back()->step);
    effective = std::min(running, static_cast<double>(steps) * step_seconds);
  }
  d.mutable_run()->set_effective_training_seconds(effective);
  if (run.has_created_at()) {
    const double wall = absl::ToDoubleSeconds(run_end - FromProtoTime(run.created_at()));
    d.set_goodput(wall > 0 ? std::clamp(effective / wall, 0.0, 1.0) : 0.0);
  }
  return d;
}

}  // namespace tessera::runs
