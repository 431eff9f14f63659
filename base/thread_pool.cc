#include "base/thread_pool.h"

#include <algorithm>

namespace tessera {

ThreadPool::ThreadPool(int threads) {
  for (int i = 0; i < std::max(threads, 1); ++i) threads_.emplace_back([this] { Loop(); });
}

ThreadPool::~ThreadPool() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (auto& t : threads_) t.join();
}

void ThreadPool::Submit(std::function<void()> work) {
  absl::MutexLock lock(&mu_);
  queue_.push_back(std::move(work));
}

size_t ThreadPool::queued() const {
  absl::MutexLock lock(&mu_);
  return queue_.size();
}

bool ThreadPool::HasWorkOrStops() const { return stopping_ || !queue_.empty(); }

void ThreadPool::Loop() {
  while (true) {
    std::function<void()> work;
    {
      // absl re-evaluates the condition whenever the mutex is released: no notify to forget.
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &ThreadPool::HasWorkOrStops));
      if (queue_.empty()) return;  // stopping, and everything submitted has run
      work = std::move(queue_.front());
      queue_.pop_front();
    }
    work();
  }
}

}  // namespace tessera
