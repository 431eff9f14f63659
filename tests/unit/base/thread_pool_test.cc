#include "base/thread_pool.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <mutex>
#include <set>
#include <thread>

#include "absl/synchronization/notification.h"

namespace tessera {
namespace thread_pool_test {

TEST_CASE("a thread pool runs everything submitted, several at once, before it goes") {
  std::atomic<int> ran{0};
  std::mutex mu;
  std::set<std::thread::id> threads;
  absl::Notification both_running;
  std::atomic<int> running{0};
  {
    ThreadPool pool(2);
    // Two pieces of work that each wait for the other: they finish only if they run at once.
    for (int i = 0; i < 2; ++i) {
      pool.Submit([&] {
        if (++running == 2) both_running.Notify();
        CHECK(both_running.WaitForNotificationWithTimeout(absl::Seconds(10)));
        ++ran;
      });
    }
    for (int i = 0; i < 100; ++i) {
      pool.Submit([&] {
        std::lock_guard<std::mutex> lock(mu);
        threads.insert(std::this_thread::get_id());
        ++ran;
      });
    }
  }  // drains, then joins
  CHECK(ran == 102);
  CHECK(threads.size() <= 2);
  CHECK(threads.count(std::this_thread::get_id()) == 0);
}

TEST_CASE("a thread pool with one thread runs work in submission order") {
  std::vector<int> order;
  {
    ThreadPool pool(1);
    for (int i = 0; i < 50; ++i) pool.Submit([&order, i] { order.push_back(i); });
  }
  REQUIRE(order.size() == 50);
  for (int i = 0; i < 50; ++i) CHECK(order[i] == i);
}

}  // namespace thread_pool_test
}  // namespace tessera
