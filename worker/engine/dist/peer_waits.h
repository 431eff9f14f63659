#pragma once
// Whether a rank is blocked on its peers. When a job hangs, every rank stops making progress:
// the one that is stuck, and the others waiting for it in a collective. The worker's hang watch
// blames the ranks that stopped outside any wait (progress_watcher.h), so every call that may
// block on a peer must be marked, not only the step's own reductions: a rank waiting in a
// forward pass's parameter gather for a hung node looks stuck itself otherwise, and its healthy
// node is blamed.

#include <functional>
#include <memory>

#include "absl/synchronization/mutex.h"
#include "worker/engine/dist/communicator.h"

namespace tessera::engine {

// Counts the waits in progress on any thread; `mark` is called with true when the first begins
// and with false when the last ends, never out of order. It also sums the time during which any
// wait was in progress (`seconds`: a monotonic clock, in seconds), so that a step's compute time
// can leave out its waits for the peers: under FULL_SHARD the forward and backward passes gather
// and reduce inside, and a fast rank waiting there for a slow node's would otherwise look as
// slow as it (the straggler watch compares the nodes' compute times).
class PeerWaits {
 public:
  explicit PeerWaits(std::function<void(bool waiting)> mark,
                     std::function<double()> seconds = MonotonicSeconds);
  void Begin();
  void End();
  bool waiting() const;
  // Seconds spent waiting so far, the wait in progress included.
  double waited_seconds() const;

  static double MonotonicSeconds();

  // Begin now, End when it goes out of scope.
  class Scope {
   public:
    explicit Scope(PeerWaits& waits) : waits_(waits) { waits_.Begin(); }
    ~Scope() { waits_.End(); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    PeerWaits& waits_;
  };

 private:
  mutable absl::Mutex mu_;
  int depth_ ABSL_GUARDED_BY(mu_) = 0;
  double waited_ ABSL_GUARDED_BY(mu_) = 0;  // ended waits
  double began_ ABSL_GUARDED_BY(mu_) = 0;   // the one in progress, when depth_ > 0
  std::function<void(bool)> mark_;
  std::function<double()> seconds_;
};

// `inner` with each of its blocking calls (every collective, and the Wait of one started
// earlier) inside a wait of `waits`, which must outlive it.
std::unique_ptr<Communicator> MarkPeerWaits(std::unique_ptr<Communicator> inner, PeerWaits& waits);

}  // namespace tessera::engine
