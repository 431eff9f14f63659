#include "bench/goodput/progress_trace.h"

#include <algorithm>

namespace tessera::bench {

ProgressTrace::ProgressTrace(SplitCluster& cluster, std::string run)
    : cluster_(cluster), run_(std::move(run)), poller_([this] { Poll(); }) {}

ProgressTrace::~ProgressTrace() {
  stop_ = true;
  poller_.join();
}

void ProgressTrace::Poll() {
  while (!stop_) {
    v1::GetRunRequest req;
    req.set_name(run_);
    v1::GetRunResponse resp;
    auto ctx = cluster_.Ctx(absl::Seconds(1));
    if (cluster_.runs->GetRun(ctx.get(), req, &resp).ok()) {
      ProgressSample s{absl::Now(),
                       resp.run().progress().step(),
                       resp.run().resumption_index(),
                       resp.run().status(),
                       {}};
      for (const auto& n : resp.run().nodes()) s.nodes.push_back(n.node_name());
      const bool terminal = s.status == v1::RUN_STATUS_COMPLETED ||
                            s.status == v1::RUN_STATUS_FAILED || s.status == v1::RUN_STATUS_STOPPED;
      {
        std::lock_guard<std::mutex> lock(mu_);
        samples_.push_back(std::move(s));
      }
      if (terminal) finished_ = true;
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
}

absl::Status ProgressTrace::WaitForEnd(absl::Duration timeout) {
  for (const absl::Time end = absl::Now() + timeout; !finished_;) {
    if (absl::Now() > end) return absl::DeadlineExceededError(run_ + " did not end in time");
    absl::SleepFor(absl::Milliseconds(100));
  }
  if (!Completed()) {
    return absl::AbortedError(run_ + " ended " + v1::RunStatus_Name(Latest().status));
  }
  return absl::OkStatus();
}

void ProgressTrace::WaitForStep(int64_t step, absl::Duration timeout) {
  for (const absl::Time end = absl::Now() + timeout;
       !finished_ && absl::Now() < end && Latest().step < step;) {
    absl::SleepFor(absl::Milliseconds(100));
  }
}

bool ProgressTrace::Completed() const { return Latest().status == v1::RUN_STATUS_COMPLETED; }

ProgressSample ProgressTrace::Latest() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (samples_.empty()) {
    ProgressSample none;
    none.t = absl::Now();
    return none;
  }
  return samples_.back();
}

std::vector<ProgressSample> ProgressTrace::Samples() const {
  std::lock_guard<std::mutex> lock(mu_);
  return samples_;
}

absl::Time ProgressTrace::start() const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& s : samples_) {
    if (s.step > 0) return s.t;
  }
  return absl::InfinitePast();
}

absl::Time ProgressTrace::end() const {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t last = 0;
  for (const auto& s : samples_) last = std::max(last, s.step);
  for (const auto& s : samples_) {
    if (s.step == last) return s.t;
  }
  return absl::InfinitePast();
}

double ProgressTrace::StepsPerSecond() const {
  const absl::Time from = start();
  const int64_t first = StepAt(from), last = StepAt(end());
  return static_cast<double>(last - first) / std::max(1e-9, absl::ToDoubleSeconds(end() - from));
}

int64_t ProgressTrace::StepAt(absl::Time t) const {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t step = 0;
  for (const auto& s : samples_) {
    if (s.t > t) break;
    step = s.step;
  }
  return step;
}

}  // namespace tessera::bench
