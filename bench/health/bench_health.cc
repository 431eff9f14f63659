// bench_health: detection quality of the health sweep, and what its evidence costs. 100 sweeps
// (--sweeps) over 8 simulated nodes (--nodes), one of them 20% slow (--slow 0.8): each compute
// stress test is asked of a real tessera-canary process by the worker's CanaryRunner (each node's
// runner keeps its `tessera-canary serve` up through the sweeps, as a worker does), and the
// slow node's is really slowed by the worker's ProcessThrottle (the code behind `inject-fault
// --kind slow:0.8`). The nodes share this machine, so they are measured as a sweep measures such
// nodes: one at a time, twice, the second pass starting halfway (a third time, starting a quarter
// of the way, when the first two were noisy), each on one CPU thread as the
// health API's `--canary-compute-threads 1` has it (deploy/cluster.sh sets it; --threads 0: all
// the cores, whose figures swing with every other process on the machine). Then, as the health API
// does, the suspects (confirmation.h) are measured again in turn with peers until the sequential
// test decides, and a sweep that leaves a node inconclusive, or finds one slow for speed alone
// (which one sweep does not condemn), is followed by one more sweep, which carries on with the
// inconclusive nodes and their pairs, measures the slow ones afresh, and condemns them if it
// finds them slow too.
//
// Prints how often the slow node was found in its sweep and within two (the follow-up), how
// often a healthy node was condemned (targets: 100%, 100% within two, never), the measurements
// each sweep needed and its duration; and, on the same first measurements, what one sweep's
// figures alone would have decided (the rules before confirmation). The same tally every 10
// sweeps, and when the run is stopped by SIGINT or SIGTERM (its sweeps so far).
//
// --load N adds N threads that each spin and rest for random spans of 0.2-2 s: a neighbour on the
// machine whose demand comes and goes.
//
//   bench_health [--sweeps N] [--nodes N] [--slow FACTOR] [--seconds S] [--threads T] [--load N]
#include <pthread.h>
#include <signal.h>
#include <string.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/clock.h"
#include "healthcheck/anomaly.h"
#include "healthcheck/confirmation.h"
#include "worker/daemon/canary_runner.h"
#include "worker/daemon/process_throttle.h"

namespace {
using namespace tessera;

// A neighbour whose demand comes and goes: `threads` threads that each spin for a random 0.2-2 s,
// then sleep for another, until `stop` (seeded, so a run can be repeated).
class FluctuatingLoad {
 public:
  explicit FluctuatingLoad(int threads) {
    for (int t = 0; t < threads; ++t) {
      workers_.emplace_back([this, t] {
        std::mt19937 random(static_cast<unsigned>(1000 + t));
        std::uniform_int_distribution<int> span_ms(200, 2000);
        volatile double sink = 1;
        for (bool busy = t % 2 == 0; !stop_; busy = !busy) {
          const auto until =
              std::chrono::steady_clock::now() + std::chrono::milliseconds(span_ms(random));
          while (!stop_ && std::chrono::steady_clock::now() < until) {
            if (busy) {
              for (int i = 0; i < 10000; ++i) sink = sink * 1.0000001 + 1e-9;
            } else {
              std::this_thread::sleep_for(std::chrono::milliseconds(10));
            }
          }
        }
      });
    }
  }
  ~FluctuatingLoad() {
    stop_ = true;
    for (auto& w : workers_) w.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> workers_;
};

struct Bench {
  std::vector<std::unique_ptr<worker::CanaryRunner>> runners;
  std::vector<std::string> names;
  double seconds = 0.3;
  int threads = 1;  // of each compute stress test (0: all the cores)

  v1::HealthCheckResult Measure(int node, const std::string& sweep, int step) {
    auto& runner = *runners[static_cast<size_t>(node)];
    v1::StartCanary c;
    c.set_sweep_id(sweep);
    c.set_kind(v1::HEALTH_CHECK_KIND_COMPUTE_STRESS);
    c.set_seconds(seconds);
    c.set_threads(threads);
    c.set_step(step);
    c.mutable_timeout()->set_seconds(60);
    if (!runner.Start(c).ok()) std::abort();
    for (;;) {
      auto results = runner.TakeResults();
      if (!results.empty()) return results[0];
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  int Index(const std::string& name) const {
    return static_cast<int>(std::find(names.begin(), names.end(), name) - names.begin());
  }
};

struct SweepOutcome {
  std::vector<std::string> condemned, inconclusive;
  std::vector<std::string> repeat;              // found slow here only: the follow-up repeats
  std::map<std::string, std::string> findings;  // why each condemned node was
  std::vector<std::string> single_sweep;        // what the first measurements alone condemn
  int measurements = 0;
  int passes = 2;  // the first measurements' turns: 3 when the first two were noisy
  double seconds = 0;
  double slow_fraction = 0;       // the slow node's screen figure over the median
  double slow_beside = 1;         // its first figures over the nodes measured beside them (mean)
  health::ConfirmationPlan plan;  // as the sweep ended
  std::string id;                 // "b7", or "b7-again" for its follow-up
};

// A suspect's line in the sweep and every pair of its test.
void PrintOutcome(const std::string& sweep, const std::string& node,
                  const health::SuspectOutcome& o) {
  std::printf("  %s %s\n", sweep.c_str(), health::DescribeOutcome(node, o).c_str());
  for (size_t i = 0; i < o.suspect_tflops.size(); ++i) {
    std::printf("    pair %zu: %.4f / %.4f = %.3f\n", i + 1, o.suspect_tflops[i], o.peer_tflops[i],
                o.suspect_tflops[i] / o.peer_tflops[i]);
  }
}

// What the sweep's sequential test made of `node`, with every pair; or that it was no suspect.
void PrintTestOf(const SweepOutcome& sweep, const std::string& node) {
  if (const auto it = sweep.plan.outcomes.find(node); it != sweep.plan.outcomes.end()) {
    PrintOutcome(sweep.id, node, it->second);
  } else {
    std::printf("  %s: %s was not a suspect\n", sweep.id.c_str(), node.c_str());
  }
}

// `earlier`: the plan of the sweep this one follows up (null: none).
SweepOutcome Sweep(Bench& b, const std::string& id, int slow_node,
                   const health::ConfirmationPlan* earlier = nullptr) {
  const auto start = std::chrono::steady_clock::now();
  const int nodes = static_cast<int>(b.names.size());
  std::vector<v1::HealthCheckResult> results;
  const auto measure_pass = [&](int offset) {
    for (int i = 0; i < nodes; ++i) results.push_back(b.Measure((i + offset) % nodes, id, 0));
  };
  measure_pass(0);
  measure_pass(nodes / 2);
  SweepOutcome out;
  {  // a third turn when the first two were noisy, as the sweep driver decides it
    std::vector<std::string> condemned;
    for (const auto& a : health::FindAnomalies(b.names, {}, results, health::AnomalyConfig{})) {
      condemned.push_back(a.node);
    }
    const health::ConfirmationConfig confirmation;
    out.passes = health::ComputePassesAfter(b.names, results, confirmation, condemned);
    if (out.passes == 3) measure_pass(nodes / 4);
  }
  health::AnomalyConfig single;
  single.confirmation.enabled = false;
  for (const auto& a : health::FindAnomalies(b.names, {}, results, single)) {
    out.single_sweep.push_back(a.node);
  }
  const auto best = health::ScreenFigures(b.names, results);
  std::vector<double> rates;
  for (const auto& [n, r] : best) rates.push_back(r);
  out.slow_fraction = best.at(b.names[static_cast<size_t>(slow_node)]) / health::Median(rates);
  const auto beside = health::NeighbourRatios(results, b.names);
  if (const auto it = beside.find(b.names[static_cast<size_t>(slow_node)]); it != beside.end()) {
    out.slow_beside = health::GeometricMean(it->second);
  }

  const health::AnomalyConfig config;
  std::vector<std::string> condemned;
  for (const auto& a : health::FindAnomalies(b.names, {}, results, config)) {
    condemned.push_back(a.node);
    out.findings[a.node] = a.finding;
  }
  std::vector<std::string> peers;
  std::vector<std::string> suspects =
      health::FindSuspects(b.names, results, config.confirmation, condemned, &peers);
  std::map<std::string, health::SuspectOutcome> carried;
  if (earlier != nullptr) {
    health::CarryUndecided(*earlier, config.confirmation, &suspects, &peers, &carried);
  }
  health::ConfirmationPlan plan;
  for (;;) {
    plan = health::PlanConfirmation(suspects, peers, results, config.confirmation, carried);
    if (plan.next_node.empty()) break;
    results.push_back(b.Measure(b.Index(plan.next_node), id, plan.next_step));
  }
  if (std::getenv("BENCH_HEALTH_VERBOSE") != nullptr) {
    std::printf("  %s: %d turns, %zu suspect(s), the first measurements' noise sigma %.3f\n",
                id.c_str(), out.passes, suspects.size(), plan.noise_sigma);
  }
  // As the health API's FinishSweep judges them: a node found slow only here is measured again
  // by the follow-up, like an inconclusive one.
  const health::ConfirmationVerdicts verdicts =
      health::JudgeConfirmation(plan, earlier, config.confirmation);
  for (const auto& a : verdicts.anomalies) {
    condemned.push_back(a.node);
    out.findings[a.node] = a.finding;
  }
  out.inconclusive = verdicts.inconclusive;
  out.repeat = verdicts.repeat;
  if (std::getenv("BENCH_HEALTH_VERBOSE") != nullptr) {
    for (const auto& [node, o] : plan.outcomes) PrintOutcome(id, node, o);
  }
  out.condemned = condemned;
  out.plan = plan;
  out.id = id;
  out.measurements = static_cast<int>(results.size());
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

bool Has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

double At(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1))];
}

// What the targets are judged on, over the sweeps done so far: printed every 10 sweeps, at the
// end, and when the run is stopped by SIGINT or SIGTERM (a long run cut short still counts).
struct Tally {
  int sweeps_done = 0, follow_ups = 0;
  int found_first = 0, found_within_two = 0, false_condemnations = 0;
  int single_found = 0, single_false = 0, healthy_inconclusive = 0;
  int third_passes = 0;  // sweeps (and follow-ups) whose first measurements took three turns
  std::vector<double> measurements, durations, fractions;

  void Print(int nodes, int slow_node, double slow, const Bench& b, int load,
             double elapsed) const {
    if (sweeps_done == 0) {
      std::printf("no sweep finished (%.0f s)\n", elapsed);
      return;
    }
    const int healthy = sweeps_done * (nodes - 1);
    std::printf(
        "%d sweeps of %d nodes (and %d follow-ups), node-%d at %.0f%% speed, %.1f s each "
        "measurement on %s, beside %d load thread(s) (%.0f s):\n",
        sweeps_done, nodes, follow_ups, slow_node, 100 * slow, b.seconds,
        b.threads == 0 ? "every core" : absl::StrCat(b.threads, " thread(s)").c_str(), load,
        elapsed);
    std::printf(
        "  slow node found in its sweep: %d/%d = %.1f%%; within two sweeps: %d/%d = %.1f%% "
        "(target 100%%)\n",
        found_first, sweeps_done, 100.0 * found_first / sweeps_done, found_within_two, sweeps_done,
        100.0 * found_within_two / sweeps_done);
    std::printf("  healthy nodes condemned: %d of %d = %.2f%% (target 0); left inconclusive: %d\n",
                false_condemnations, healthy, 100.0 * false_condemnations / healthy,
                healthy_inconclusive);
    std::printf(
        "  measurements per sweep: median %.0f, max %.0f (%d without confirmation, %d with a "
        "third turn: %d of %d sweeps and follow-ups took one)\n",
        At(measurements, 0.5), At(measurements, 1.0), 2 * nodes, 3 * nodes, third_passes,
        sweeps_done + follow_ups);
    std::printf(
        "  sweep duration: median %.1f s, max %.1f s (%.1f s of measuring without "
        "confirmation)\n",
        At(durations, 0.5), At(durations, 1.0), 2 * nodes * b.seconds);
    std::printf(
        "  one sweep's figures alone (the rules before confirmation): slow node found "
        "%d/%d, healthy condemned %d of %d\n",
        single_found, sweeps_done, single_false, healthy);
    std::printf("  the slow node's first measurements: %.2f-%.2f of the median (median %.2f)\n",
                At(fractions, 0), At(fractions, 1), At(fractions, 0.5));
    std::fflush(stdout);
  }
};

}  // namespace

int main(int argc, char** argv) {
  // SIGINT and SIGTERM are taken by a thread of their own (below), which prints the tally.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  int sweeps = 100, nodes = 8;
  Bench b;  // its seconds and threads come from the flags
  int load = 0;
  double slow = 0.8;
  CLI::App app{"bench_health: detection quality of the health sweep, and what its evidence costs"};
  app.add_option("--sweeps", sweeps, "sweeps to run (each followed by one more where needed)")
      ->capture_default_str();
  app.add_option("--nodes", nodes, "simulated nodes, one of them slow")->capture_default_str();
  app.add_option("--slow", slow, "the slow node's speed, a fraction of a healthy node's")
      ->capture_default_str();
  app.add_option("--seconds", b.seconds, "how long each compute stress test measures")
      ->capture_default_str();
  app.add_option("--threads", b.threads,
                 "CPU threads of each compute stress test (0: all the cores)")
      ->capture_default_str();
  app.add_option("--load", load,
                 "threads of a neighbour that each spin and rest for random spans of 0.2-2 s")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (sweeps < 1 || nodes < 3 || slow <= 0 || slow > 1 || b.seconds <= 0 || b.threads < 0 ||
      load < 0) {
    std::cerr << "need --sweeps >= 1, --nodes >= 3, 0 < --slow <= 1, --seconds > 0, "
                 "--threads >= 0, --load >= 0\n";
    return 2;
  }
  const std::string canary = std::string(TESSERA_BIN_DIR) + "/tessera-canary";
  const std::string state = "/tmp/tessera-bench-health";
  for (int n = 0; n < nodes; ++n) {
    b.names.push_back(absl::StrCat("node-", n));
    b.runners.push_back(std::make_unique<worker::CanaryRunner>(canary, b.names.back(), state,
                                                               SystemClock::Shared()));
  }
  const int slow_node = nodes / 2;
  const std::string slow_name = b.names[static_cast<size_t>(slow_node)];
  worker::CanaryRunner* slow_runner = b.runners[static_cast<size_t>(slow_node)].get();
  worker::ProcessThrottle throttle([slow_runner] { return slow_runner->ProcessGroups(); },
                                   absl::Milliseconds(20));
  throttle.SetFactor(slow);
  FluctuatingLoad neighbour(load);

  std::mutex tally_mu;
  Tally tally;
  const auto start = std::chrono::steady_clock::now();
  const auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  std::thread([&] {
    int signal = 0;
    if (sigwait(&stop_signals, &signal) != 0) return;
    for (const auto& runner : b.runners) {  // no canary outlives the bench
      for (pid_t group : runner->ProcessGroups()) ::kill(-group, SIGKILL);
    }
    std::lock_guard lock(tally_mu);
    std::printf("stopped by %s; what the sweeps done so far give:\n", strsignal(signal));
    tally.Print(nodes, slow_node, slow, b, load, elapsed());
    std::_Exit(128 + signal);
  }).detach();
  for (int s = 0; s < sweeps; ++s) {
    SweepOutcome o = Sweep(b, absl::StrCat("b", s), slow_node);
    std::vector<SweepOutcome> chain = {o};
    if (!o.inconclusive.empty() || !o.repeat.empty()) {  // the health API's follow-up sweep
      chain.push_back(Sweep(b, absl::StrCat("b", s, "-again"), slow_node, &o.plan));
    }
    std::lock_guard lock(tally_mu);
    Tally& t = tally;
    t.follow_ups += chain.size() > 1 ? 1 : 0;
    t.single_found += Has(o.single_sweep, slow_name) ? 1 : 0;
    t.single_false += static_cast<int>(o.single_sweep.size()) - (Has(o.single_sweep, slow_name));
    t.fractions.push_back(o.slow_fraction);
    bool found = false;
    for (size_t k = 0; k < chain.size(); ++k) {
      const auto& c = chain[k];
      t.measurements.push_back(c.measurements);
      t.third_passes += c.passes == 3 ? 1 : 0;
      t.durations.push_back(c.seconds);
      for (const auto& n : c.inconclusive) t.healthy_inconclusive += n == slow_name ? 0 : 1;
      for (const auto& n : c.condemned) {
        if (n == slow_name) {
          if (!found && k == 0) ++t.found_first;
          found = true;
        } else {
          ++t.false_condemnations;
          std::printf("sweep %d%s: healthy %s condemned: %s\n", s, k ? " (follow-up)" : "",
                      n.c_str(), c.findings.at(n).c_str());
          PrintTestOf(c, n);
        }
      }
    }
    t.found_within_two += found ? 1 : 0;
    t.sweeps_done = s + 1;
    if (!found) {
      std::printf(
          "sweep %d: slow node missed (first measurements %.2f of the median, %.2f of the nodes "
          "measured beside them%s)\n",
          s, o.slow_fraction, o.slow_beside, chain.size() > 1 ? ", follow-up too" : "");
      for (const auto& c : chain) PrintTestOf(c, slow_name);  // what each sweep's test made of it
    }
    if ((s + 1) % 10 == 0 && s + 1 < sweeps) {  // a running tally: a long run stopped early counts
      std::printf("after %d sweeps: ", s + 1);
      t.Print(nodes, slow_node, slow, b, load, elapsed());
    }
  }
  std::lock_guard lock(tally_mu);
  tally.Print(nodes, slow_node, slow, b, load, elapsed());
  return 0;
}
