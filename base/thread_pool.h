#pragma once
// A fixed set of threads running submitted work in submission order (first come, first run;
// several at once). For work that may wait (a database write, a call to another service) and
// must not run on a thread that serves many others, such as gRPC's callback threads.

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

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

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace tessera
