#include "services/common/stream_pump.h"

#include <vector>

namespace tessera {

StreamPump::StreamPump(std::shared_ptr<store::ChangeFeed> feed, store::ChangeTopic topic,
                       std::shared_ptr<Clock> clock, int threads, Wakes wakes, absl::Duration tick)
    : feed_(std::move(feed)),
      topic_(topic),
      clock_(std::move(clock)),
      wakes_(wakes),
      tick_(tick),
      threads_(std::make_unique<ThreadPool>(threads < 1 ? 1 : threads)) {
  if (wakes_ != Wakes::kNever) listener_ = feed_->Listen(topic_, [this] { OnChange(); });
  timer_ = std::thread([this] { TimerLoop(); });
}

StreamPump::~StreamPump() {
  if (listener_ >= 0) feed_->Unlisten(listener_);
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  timer_.join();
  threads_.reset();  // what was handed over runs first (its waits are dropped below)
  absl::MutexLock lock(&mu_);
  waiting_.clear();
  by_time_.clear();
  reserved_.clear();
}

void StreamPump::Run(std::function<void()> work) {
  absl::MutexLock lock(&mu_);
  if (!stopping_) threads_->Submit(std::move(work));
}

StreamPump::Ticket StreamPump::Reserve() {
  absl::MutexLock lock(&mu_);
  const Ticket ticket = next_ticket_++;
  reserved_.emplace(ticket, false);
  return ticket;
}

StreamPump::Ticket StreamPump::RunAfterChange(uint64_t seen, absl::Time until,
                                              std::function<void()> work) {
  const Ticket ticket = Reserve();
  RunAfterChange(ticket, seen, until, std::move(work));
  return ticket;
}

void StreamPump::RunAfterChange(Ticket ticket, uint64_t seen, absl::Time until,
                                std::function<void()> work) {
  absl::MutexLock lock(&mu_);
  bool woken = false;
  if (auto it = reserved_.find(ticket); it != reserved_.end()) {
    woken = it->second;
    reserved_.erase(it);
  }
  if (stopping_) return;
  // Read under mu_: a change after this read finds the entry in waiting_ (OnChange takes mu_).
  if (woken || Generation() != seen || until <= clock_->Now()) {
    ++waits_ended_;
    threads_->Submit(std::move(work));
    return;
  }
  if (by_time_.empty() || until < by_time_.begin()->first) earlier_ = true;
  waiting_.emplace(ticket, Waiting{seen, until, std::move(work)});
  by_time_.emplace(until, ticket);
}

void StreamPump::WakeNow(Ticket ticket) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return;
  if (waiting_.contains(ticket)) {
    ReleaseLocked(ticket);
  } else if (auto it = reserved_.find(ticket); it != reserved_.end()) {
    it->second = true;
  }
}

size_t StreamPump::waiting() const {
  absl::MutexLock lock(&mu_);
  return waiting_.size();
}

uint64_t StreamPump::waits_ended() const {
  absl::MutexLock lock(&mu_);
  return waits_ended_;
}

void StreamPump::ReleaseLocked(Ticket ticket) {
  ++waits_ended_;
  auto it = waiting_.find(ticket);
  by_time_.erase({it->second.until, ticket});
  threads_->Submit(std::move(it->second.work));
  waiting_.erase(it);
}

void StreamPump::OnChange() {
  const uint64_t now = Generation();
  absl::MutexLock lock(&mu_);
  if (stopping_) return;
  std::vector<Ticket> moved;
  for (const auto& [ticket, w] : waiting_) {
    if (w.seen != now) moved.push_back(ticket);
  }
  for (Ticket t : moved) ReleaseLocked(t);
}

void StreamPump::TimerLoop() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    absl::Time now = clock_->Now();
    if (tick_ > absl::ZeroDuration()) now = TickAtOrBefore(now, tick_);
    while (!by_time_.empty() && by_time_.begin()->first <= now) {
      ReleaseLocked(by_time_.begin()->second);
    }
    absl::Time next = by_time_.empty() ? absl::InfiniteFuture() : by_time_.begin()->first;
    if (tick_ > absl::ZeroDuration() && next != absl::InfiniteFuture()) {
      // Up to the tick at or after it: what falls due until then goes with it.
      if (const absl::Time last = TickAtOrBefore(next, tick_); last != next) {
        next = TickAfter(next, tick_);
      }
    }
    earlier_ = false;
    const auto woken = [this]()
                           ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || earlier_; };
    clock_->AwaitWithDeadline(mu_, absl::Condition(&woken), next);
  }
}

}  // namespace tessera
