#pragma once
// Bidirectional streams served on gRPC's async API, on completion queues of their own, with the
// callback API's reactor model (StartRead, StartWrite, Finish; OnReadDone, OnWriteDone, OnDone).
//
// Why not the callback API: it serves every stream of the process on one shared completion
// queue, and Debian's gRPC (built without NDEBUG) scans every outstanding operation of a queue
// at each completion. With 10,000 workers' control streams that scan was a third of the
// scheduler's CPU, and it grew with the number of nodes. Here the streams are spread over
// several queues, each polled by a thread of its own, so each scan is that much shorter.
//
// A service that serves this way implements AsyncServing; ServiceHost adds its queues to the
// server and starts it once the server is built. The server must be shut down before the
// AsyncBidiServer (ServiceHost does it first); the AsyncBidiServer then waits for its streams
// to end before it shuts its queues down.

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <functional>
#include <memory>
#include <thread>
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

template <class Req, class Resp>
class AsyncBidiCall;

// One stream's logic. Operations as grpc::ServerBidiReactor's: at most one read and one write
// outstanding, Finish once no write is. They may be called from any thread; the reactions run
// on a queue's thread.
template <class Req, class Resp>
class AsyncBidiReactor {
 public:
  virtual ~AsyncBidiReactor() = default;

  // The call was accepted: start reading, or Finish at once.
  virtual void OnStart() = 0;
  virtual void OnReadDone(bool ok) = 0;
  virtual void OnWriteDone(bool ok) = 0;
  // The call is over and no operation is outstanding: nothing of this stream runs after it (the
  // reactor may delete itself).
  virtual void OnDone() = 0;

  void StartRead(Req* message) { call_->Read(message); }
  void StartWrite(const Resp* message) { call_->Write(message); }
  void Finish(grpc::Status status) { call_->Finish(std::move(status)); }

 private:
  friend class AsyncBidiCall<Req, Resp>;
  AsyncBidiCall<Req, Resp>* call_ = nullptr;
};

// What every call of one server shares: how to ask for a call and make its reactor, and the
// count of calls alive.
template <class Req, class Resp>
struct AsyncBidiShared {
  // Asks for the next call on `cq` (the service's RequestXxx method).
  using Request =
      std::function<void(grpc::ServerContext*, grpc::ServerAsyncReaderWriter<Resp, Req>*,
                         grpc::ServerCompletionQueue*, void*)>;
  // Makes the reactor of an accepted call.
  using MakeReactor = std::function<AsyncBidiReactor<Req, Resp>*(grpc::ServerContext*)>;
  Request request;
  MakeReactor make_reactor;
  absl::Mutex mu;
  int alive ABSL_GUARDED_BY(mu) = 0;
  bool shutting_down ABSL_GUARDED_BY(mu) = false;
};

// One call, from the request for it until its end.
template <class Req, class Resp>
class AsyncBidiCall {
 public:
  using Shared = AsyncBidiShared<Req, Resp>;

  // Asks for the next call on `cq`; false once the server shuts down.
  static bool Listen(Shared* shared, grpc::ServerCompletionQueue* cq) {
    {
      absl::MutexLock lock(&shared->mu);
      if (shared->shutting_down) return false;
      ++shared->alive;
    }
    auto* call = new AsyncBidiCall(shared, cq);
    shared->request(&call->ctx_, &call->stream_, cq, &call->accept_);
    return true;
  }

  // A completion of one of this call's operations (`tag` is one of its Tag members).
  static void Proceed(void* tag, bool ok) {
    auto* t = static_cast<Tag*>(tag);
    t->call->OnEvent(t->kind, ok);
  }

  void Read(Req* message) {
    {
      absl::MutexLock lock(&mu_);
      ++outstanding_;
    }
    stream_.Read(message, &read_);
  }
  void Write(const Resp* message) {
    {
      absl::MutexLock lock(&mu_);
      ++outstanding_;
    }
    stream_.Write(*message, &write_);
  }
  void Finish(grpc::Status status) {
    {
      absl::MutexLock lock(&mu_);
      ++outstanding_;
      finishing_ = true;
    }
    stream_.Finish(status, &finish_);
  }

 private:
  enum class Kind { kAccept, kRead, kWrite, kFinish };
  struct Tag {
    AsyncBidiCall* call;
    Kind kind;
  };

  AsyncBidiCall(Shared* shared, grpc::ServerCompletionQueue* cq)
      : shared_(shared), cq_(cq), stream_(&ctx_) {}

  void OnEvent(Kind kind, bool ok) {
    switch (kind) {
      case Kind::kAccept:
        if (!ok) {  // the server is shutting down: this call never started
          End();
          return;
        }
        Listen(shared_, cq_);  // the next call on this queue
        reactor_ = shared_->make_reactor(&ctx_);
        reactor_->call_ = this;
        reactor_->OnStart();
        break;
      case Kind::kRead:
        reactor_->OnReadDone(ok);
        break;
      case Kind::kWrite:
        reactor_->OnWriteDone(ok);
        break;
      case Kind::kFinish:
        break;
    }
    if (kind == Kind::kAccept) return;
    // Once finishing, no operation starts any more: the last one to complete ends the call.
    bool done = false;
    {
      absl::MutexLock lock(&mu_);
      --outstanding_;
      done = finishing_ && outstanding_ == 0;
    }
    if (!done) return;
    reactor_->OnDone();
    End();
  }

  void End() {
    Shared* shared = shared_;
    delete this;
    absl::MutexLock lock(&shared->mu);
    --shared->alive;
  }

  Shared* const shared_;
  grpc::ServerCompletionQueue* const cq_;
  grpc::ServerContext ctx_;
  grpc::ServerAsyncReaderWriter<Resp, Req> stream_;
  AsyncBidiReactor<Req, Resp>* reactor_ = nullptr;
  Tag accept_{this, Kind::kAccept}, read_{this, Kind::kRead}, write_{this, Kind::kWrite},
      finish_{this, Kind::kFinish};
  absl::Mutex mu_;
  int outstanding_ ABSL_GUARDED_BY(mu_) = 0;
  bool finishing_ ABSL_GUARDED_BY(mu_) = false;
};

// Serves one bidirectional streaming method on `shards` completion queues.
template <class Req, class Resp>
class AsyncBidiServer {
 public:
  AsyncBidiServer(typename AsyncBidiShared<Req, Resp>::Request request,
                  typename AsyncBidiShared<Req, Resp>::MakeReactor make_reactor, int shards)
      : shards_(shards < 1 ? 1 : shards) {
    shared_.request = std::move(request);
    shared_.make_reactor = std::move(make_reactor);
  }

  ~AsyncBidiServer() { Stop(); }

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
      for (int i = 0; i < 4; ++i) AsyncBidiCall<Req, Resp>::Listen(&shared_, cq.get());
      pollers_.emplace_back([q = cq.get()] {
        void* tag;
        bool ok;
        while (q->Next(&tag, &ok)) AsyncBidiCall<Req, Resp>::Proceed(tag, ok);
      });
    }
  }

 private:
  const int shards_;
  bool stopped_ = false;
  AsyncBidiShared<Req, Resp> shared_;
  std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> queues_;
  std::vector<std::thread> pollers_;
};

}  // namespace tessera
