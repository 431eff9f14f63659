// The figures of bench_goodput: each fault's cost in training time, per kind, the noise floor
// and goodput, and what the run recorded about itself.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>

#include "bench/goodput/chaos.h"
#include "bench/goodput/progress_trace.h"

namespace tessera::bench {
namespace {

double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }

// Training time the window [from, to) lost against the undisturbed rate.
double WindowCost(const ProgressTrace& trace, absl::Time from, absl::Time to, double rate) {
  const double gained = static_cast<double>(trace.StepAt(to) - trace.StepAt(from));
  return Seconds(to - from) - gained / rate;
}

// When a node fault ended the attempt, when the next one reported a step, and the steps it
// computed again (from its checkpoint up to where the old attempt had got).
void Interruption(const std::vector<ProgressSample>& samples, FaultCost& cost, absl::Time end) {
  const absl::Time at = cost.fault.at;
  int old_resumption = -1;
  int64_t old_max = 0;
  for (const auto& s : samples) {
    if (s.t <= at) old_resumption = s.resumption;
  }
  absl::Time detected = absl::InfiniteFuture();
  int64_t resumed_from = -1;
  for (const auto& s : samples) {
    if (s.t >= end) break;
    if (s.resumption == old_resumption) {
      if (detected == absl::InfiniteFuture()) old_max = std::max(old_max, s.step);
      if (s.t > at && s.status != v1::RUN_STATUS_RUNNING && detected == absl::InfiniteFuture()) {
        detected = s.t;
      }
      continue;
    }
    if (s.t <= at) continue;
    if (detected == absl::InfiniteFuture()) detected = s.t;
    if (s.status != v1::RUN_STATUS_RUNNING) continue;
    if (resumed_from < 0 || s.step < resumed_from) resumed_from = s.step;
    if (cost.back_s < 0 && s.step > resumed_from) cost.back_s = Seconds(s.t - at);
  }
  if (detected != absl::InfiniteFuture()) cost.detect_s = Seconds(detected - at);
  if (resumed_from >= 0) cost.recomputed = std::max<int64_t>(0, old_max - (resumed_from - 1));
}

}  // namespace

Report Summarize(const ProgressTrace& calm, const ProgressTrace& chaos,
                 const std::vector<FaultWindow>& faults, double rate, double min_gap,
                 double max_gap) {
  Report r;
  r.rate = rate;
  r.steps = static_cast<int>(chaos.StepAt(chaos.end()));
  r.calm_s = calm.TrainingSeconds();
  r.chaos_s = chaos.TrainingSeconds();
  const std::vector<ProgressSample> samples = chaos.Samples();
  for (size_t i = 0; i < faults.size(); ++i) {
    FaultCost c{faults[i]};
    const absl::Time end = i + 1 < faults.size() ? faults[i + 1].at : chaos.end();
    c.window_s = Seconds(end - faults[i].at);
    c.cost_s = WindowCost(chaos, faults[i].at, end, rate);
    if (IsNodeFault(faults[i].kind)) Interruption(samples, c, end);
    r.costs.push_back(c);
  }
  // The same measurement over the undisturbed run, with gaps drawn the same way.
  std::mt19937 rng(12345);
  std::uniform_real_distribution<double> gap(min_gap, max_gap);
  std::vector<double> noise;
  for (absl::Time from = calm.start() + absl::Seconds(min_gap);;) {
    const absl::Time to = from + absl::Seconds(gap(rng));
    if (to > calm.end()) break;
    noise.push_back(WindowCost(calm, from, to, rate));
    from = to;
  }
  r.noise_windows = static_cast<int>(noise.size());
  if (!noise.empty()) {
    double sum = 0, sq = 0;
    for (double x : noise) {
      sum += x;
      r.noise_max_s = std::max(r.noise_max_s, std::fabs(x));
    }
    r.noise_mean_s = sum / noise.size();
    for (double x : noise) sq += (x - r.noise_mean_s) * (x - r.noise_mean_s);
    r.noise_sd_s = std::sqrt(sq / std::max<size_t>(1, noise.size() - 1));
  }
  return r;
}

void PrintReport(const Report& r) {
  std::printf("\nper fault (cost: window - steps gained / %.2f steps/s)\n", r.rate);
  std::printf("  %-11s %-12s %8s %8s %8s %8s %10s\n", "kind", "target", "window s", "cost s",
              "detect s", "back s", "recomputed");
  for (const auto& c : r.costs) {
    auto opt = [](double v) { return v < 0 ? std::string("-") : std::to_string(v).substr(0, 5); };
    std::printf("  %-11s %-12s %8.1f %8.1f %8s %8s %10lld\n", c.fault.kind.c_str(),
                c.fault.target.c_str(), c.window_s, c.cost_s, opt(c.detect_s).c_str(),
                opt(c.back_s).c_str(), static_cast<long long>(c.recomputed));
  }
  std::printf("\nper kind\n  %-11s %3s %11s %10s %13s\n", "kind", "n", "mean cost s", "max cost s",
              "mean detect s");
  double node_sum = 0, plane_sum = 0;
  int node_n = 0, plane_n = 0;
  for (const std::string& kind : AllFaultKinds()) {
    double sum = 0, worst = -1e9, detect = 0;
    int n = 0, detected = 0;
    for (const auto& c : r.costs) {
      if (c.fault.kind != kind) continue;
      ++n;
      sum += c.cost_s;
      worst = std::max(worst, c.cost_s);
      if (c.detect_s >= 0) {
        detect += c.detect_s;
        ++detected;
      }
    }
    if (n == 0) continue;
    (IsNodeFault(kind) ? node_sum : plane_sum) += sum;
    (IsNodeFault(kind) ? node_n : plane_n) += n;
    std::printf("  %-11s %3d %11.1f %10.1f %13s\n", kind.c_str(), n, sum / n, worst,
                detected ? std::to_string(detect / detected).substr(0, 5).c_str() : "-");
  }
  std::printf(
      "\nnoise floor (the undisturbed run's own %d windows): mean %.1f s, sd %.1f s, "
      "max |cost| %.1f s\n",
      r.noise_windows, r.noise_mean_s, r.noise_sd_s, r.noise_max_s);
  if (plane_n) {
    std::printf("control-plane faults: %d, mean cost %.1f s (target 0 s; under 1 s measured)\n",
                plane_n, plane_sum / plane_n);
  }
  if (node_n) {
    std::printf("node faults: %d, mean cost %.1f s (target under 10 s)\n", node_n,
                node_sum / node_n);
  }
  const double effective = r.steps / r.rate;
  std::printf(
      "goodput: %d steps = %.1f s of undisturbed training over %.1f s of wall time "
      "= %.3f (undisturbed run: %.1f s)\n",
      r.steps, effective, r.chaos_s, effective / std::max(1e-9, r.chaos_s), r.calm_s);
}

void PrintRunRecord(SplitCluster& c, const std::string& run) {
  v1::DescribeRunRequest req;
  req.set_name(run);
  v1::DescribeRunResponse resp;
  auto ctx = c.Ctx(absl::Seconds(10));
  if (!c.runs->DescribeRun(ctx.get(), req, &resp).ok()) return;
  const v1::Run& r = resp.description().run();
  std::printf(
      "\nthe run's own record: %d interruption(s), %d retries used, %d control-plane "
      "interruption(s), goodput %.3f\n",
      resp.description().interruptions_size(), r.retries_used(), r.control_plane_interruptions(),
      resp.description().goodput());
  for (const auto& i : resp.description().interruptions()) {
    std::printf("  resumption %d: %s by %s, %.1f s lost: %s\n", i.resumption_index(),
                v1::AttemptEndReason_Name(i.cause()).c_str(),
                v1::DetectionMethod_Name(i.detection_method()).c_str(), i.seconds_lost(),
                i.detail().c_str());
  }
}

}  // namespace tessera::bench
