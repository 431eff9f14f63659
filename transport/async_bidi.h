#pragma once
// Bidirectional streams served on the async API (async_server.h: completion queues of their own,
// the callback API's reactor model): the workers' control streams, the nodes' shell listens.

#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>

#include "absl/synchronization/mutex.h"
#include "transport/async_server.h"

namespace tessera {

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
struct AsyncBidiShared : AsyncCallCount {
  // Asks for the next call on `cq` (the service's RequestXxx method).
  using Request =
      std::function<void(grpc::ServerContext*, grpc::ServerAsyncReaderWriter<Resp, Req>*,
                         grpc::ServerCompletionQueue*, void*)>;
  // Makes the reactor of an accepted call.
  using MakeReactor = std::function<AsyncBidiReactor<Req, Resp>*(grpc::ServerContext*)>;
  Request request;
  MakeReactor make_reactor;
};

// One call, from the request for it until its end.
template <class Req, class Resp>
class AsyncBidiCall {
 public:
  using Shared = AsyncBidiShared<Req, Resp>;

  // Asks for the next call on `cq`; false once the server shuts down.
  static bool Listen(Shared* shared, grpc::ServerCompletionQueue* cq) {
    if (!shared->Enter()) return false;
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
    shared->Leave();
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
using AsyncBidiServer = AsyncServer<AsyncBidiCall<Req, Resp>>;

}  // namespace tessera
