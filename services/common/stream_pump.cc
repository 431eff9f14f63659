#include "services/common/stream_pump.h"

#include <vector>

namespace tessera {

StreamPump::StreamPump(std::shared_ptr<store::ChangeFeed> feed, store::ChangeTopic topic,
                       std::shared_ptr<Clock> clock, int threads)
    : feed_(std::move(feed)),
      topic_(topic),
      clock_(std::move(clock)),
      threads_(std::make_unique<ThreadPool>(threads < 1 ? 1 : threads)) {
  listener_ = feed_->Listen(topic_, [this] { OnChange(); });
  timer_ = std::thread([this] { TimerLoop(); });
}

StreamPump::~StreamPump() {
  feed_->Unlisten(listener_);
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  timer_.join();
  threads_.reset();  // what was handed over runs first (its waits are dropped below)
  absl::MutexLock lock(&mu_);
  waiting_.clear();
  by_time_.clear();
}

void StreamPump::Run(std::function<void()> work) {
  absl::MutexLock lock(&mu_);
  if (!stopping_) threads_->Submit(std::move(work));
}

StreamPump::Ticket StreamPump::RunAfterChange(uint64_t seen, absl::Time until,
                                              std::function<void()> work) {
  absl::MutexLock lock(&mu_);
  const Ticket ticket = next_ticket_++;
  if (stopping_) return ticket;
  // Read under mu_: a change after this read finds the entry in waiting_ (OnChange takes mu_).
  if (feed_->Generation(topic_) != seen || until <= clock_->Now()) {
    threads_->Submit(std::move(work));
    return ticket;
  }
  if (by_time_.empty() || until < by_time_.begin()->first) earlier_ = true;
  waiting_.emplace(ticket, Waiting{seen, until, std::move(work)});
  by_time_.emplace(until, ticket);
  return ticket;
}

void StreamPump::WakeNow(Ticket ticket) {
  absl::MutexLock lock(&mu_);
  if (!stopping_ && waiting_.contains(ticket)) ReleaseLocked(ticket);
}

size_t StreamPump::waiting() const {
  absl::MutexLock lock(&mu_);
  return waiting_.size();
}

void StreamPump::ReleaseLocked(Ticket ticket) {
  auto it = waiting_.find(ticket);
  by_time_.erase({it->second.until, ticket});
  threads_->Submit(std::move(it->second.work));
  waiting_.erase(it);
}

void StreamPump::OnChange() {
  const uint64_t now = feed_->Generation(topic_);
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
    const absl::Time now = clock_->Now();
    while (!by_time_.empty() && by_time_.begin()->first <= now) {
      ReleaseLocked(by_time_.begin()->second);
    }
    const absl::Time next = by_time_.empty() ? absl::InfiniteFuture() : by_time_.begin()->first;
    earlier_ = false;
    const auto woken = [this]()
                           ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || earlier_; };
    clock_->AwaitWithDeadline(mu_, absl::Condition(&woken), next);
  }
}

}  // namespace tessera
