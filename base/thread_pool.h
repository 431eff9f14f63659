#pragma once
// A fixed set of threads running submitted work in submission order (first come, first run;
// several at once). For work that may wait (a database write, a call to another service) and
// must not run on a thread that serves many others, such as gRPC's callback threads.

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace tessera {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  // Runs what was submitted before it, then joins the threads.
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  void Submit(std::function<void()> work);
  // Work submitted and not started yet.
  size_t queued() const;

 private:
  void Loop();
  bool HasWorkOrStops() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace tessera
