#pragma once
// Streams served on gRPC's async API, on completion queues of their own, with the callback API's
// reactor model (StartRead, StartWrite, Finish; OnReadDone, OnWriteDone, OnDone): a stream is a
// reactor, not a thread. The calls themselves are async_bidi.h's (bidirectional) and
// async_writer.h's (server streaming); this is what they share: the queues, their pollers, and
// the count of calls alive.
//
// Why not the callback API: it serves every stream of the process on one shared completion
// queue, and Debian's gRPC (built without NDEBUG) scans every outstanding operation of a queue
// at each completion. With 10,000 workers' control streams that scan was a third of the
// scheduler's CPU, and it grew with the number of nodes. Here the streams are spread over
// several queues, each polled by a thread of its own, so each scan is that much shorter.
//
// A service that serves this way implements AsyncServing; ServiceHost adds its queues to the
// server and starts it once the server is built. The server must be shut down before the
// AsyncServer (ServiceHost does it first); the AsyncServer then waits for its streams to end
// before it shuts its queues down.

#include <grpcpp/grpcpp.h>

#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace tessera {

// A service with completion queues of its own (see ServiceHost::Start).
class AsyncServing {
 public:
  virtual ~AsyncServing() = default;
  // Before the server is built.
  virtual void AddCompletionQueues(grpc::ServerBuilder& builder) = 0;
  // Once it is built and started: accept calls and poll the queues.
  virtual void Started() = 0;
  // After the server's Shutdown and before it is destroyed (the server's own requests on the
  // queues refer to it): waits for the calls to end, then stops polling. Idempotent.
  virtual void Stop() = 0;
};

// What every call of one method shares with the server: the count of calls alive, and whether
// the server stopped asking for more.
struct AsyncCallCount {
  absl::Mutex mu;
  int alive ABSL_GUARDED_BY(mu) = 0;
  bool shutting_down ABSL_GUARDED_BY(mu) = false;

  // A call is asked for; false once the server shuts down.
  bool Enter() {
    absl::MutexLock lock(&mu);
    if (shutting_down) return false;
    ++alive;
    return true;
  }
  void Leave() {
    absl::MutexLock lock(&mu);
    --alive;
  }
};

// Serves one method whose calls are `Call`s on `shards` completion queues. `Call` has a type
// `Shared` (derived from AsyncCallCount: how to ask for a call and make its reactor), a static
// `bool Listen(Shared*, grpc::ServerCompletionQueue*)` that asks for the next call, and a static
// `void Proceed(void* tag, bool ok)` that handles a completion of one of its operations.
template <class Call>
class AsyncServer {
 public:
  using Shared = typename Call::Shared;

  AsyncServer(typename Shared::Request request, typename Shared::MakeReactor make_reactor,
              int shards)
      : shards_(shards < 1 ? 1 : shards) {
    shared_.request = std::move(request);
    shared_.make_reactor = std::move(make_reactor);
  }

  ~AsyncServer() { Stop(); }

  // Waits for every stream to end (the server was shut down, so they do), then stops polling.
  void Stop() {
    if (stopped_) return;
    stopped_ = true;
    {
      absl::MutexLock lock(&shared_.mu);
      shared_.shutting_down = true;
      shared_.mu.Await(absl::Condition(
          +[](int* alive) { return *alive == 0; }, &shared_.alive));
    }
    for (auto& cq : queues_) cq->Shutdown();
    for (auto& t : pollers_) t.join();
    if (pollers_.empty()) {  // never started: the queues are drained here
      for (auto& cq : queues_) {
        void* tag;
        bool ok;
        while (cq->Next(&tag, &ok)) {
        }
      }
    }
  }

  void AddCompletionQueues(grpc::ServerBuilder& builder) {
    for (int i = 0; i < shards_; ++i) queues_.push_back(builder.AddCompletionQueue());
  }

  void Start() {
    for (auto& cq : queues_) {
      // A few calls waiting per queue, so that a burst of connections is accepted at once.
      for (int i = 0; i < 4; ++i) Call::Listen(&shared_, cq.get());
      pollers_.emplace_back([q = cq.get()] {
        void* tag;
        bool ok;
        while (q->Next(&tag, &ok)) Call::Proceed(tag, ok);
      });
    }
  }

 private:
  const int shards_;
  bool stopped_ = false;
  Shared shared_;
  std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> queues_;
  std::vector<std::thread> pollers_;
};

}  // namespace tessera
