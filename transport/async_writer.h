#pragma once
// Server-streaming calls served on the async API (async_server.h: completion queues of their
// own, the callback API's reactor model): a log follow or a watch is a reactor, not a thread,
// so 10,000 open follows cost memory. What a call does between its writes runs elsewhere (on a
// StreamPump's threads, stream_pump.h), never on a queue's thread.

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <functional>
#include <memory>

#include "absl/synchronization/mutex.h"
#include "transport/async_server.h"

namespace tessera {

template <class Req, class Resp>
class AsyncWriterCall;

// One call's logic. Operations as grpc::ServerWriteReactor's: at most one write outstanding,
// Finish once none is, and exactly once. They may be called from any thread; the reactions run on
// a queue's thread.
template <class Req, class Resp>
class AsyncWriterReactor {
 public:
  virtual ~AsyncWriterReactor() = default;

  // The call was accepted with its request: write, or Finish.
  virtual void OnStart(const Req& request) = 0;
  virtual void OnWriteDone(bool ok) = 0;
  // The headers went out (StartSendInitialMetadata), or could not.
  virtual void OnSendInitialMetadataDone(bool ok) {}
  // The caller went away, or the server is shutting down (cancelled() is true from now on). The
  // call still ends only with Finish.
  virtual void OnCancel() {}
  // The call is over and no operation is outstanding: nothing of this call runs after it (the
  // reactor may delete itself).
  virtual void OnDone() = 0;

  void StartWrite(const Resp* message) { call_->Write(message); }
  // The headers now, before any message (not while a write is outstanding).
  void StartSendInitialMetadata() { call_->SendInitialMetadata(); }
  void Finish(grpc::Status status) { call_->Finish(std::move(status)); }
  // Whether the caller went away (or the server shuts down). Any thread.
  bool cancelled() const { return call_->cancelled(); }

 private:
  friend class AsyncWriterCall<Req, Resp>;
  AsyncWriterCall<Req, Resp>* call_ = nullptr;
};

template <class Req, class Resp>
struct AsyncWriterShared : AsyncCallCount {
  // Asks for the next call on `cq` (the service's RequestXxx method).
  using Request = std::function<void(grpc::ServerContext*, Req*, grpc::ServerAsyncWriter<Resp>*,
                                     grpc::ServerCompletionQueue*, void*)>;
  // Makes the reactor of an accepted call.
  using MakeReactor = std::function<AsyncWriterReactor<Req, Resp>*(grpc::ServerContext*)>;
  Request request;
  MakeReactor make_reactor;
};

// One call, from the request for it until its end.
template <class Req, class Resp>
class AsyncWriterCall {
 public:
  using Shared = AsyncWriterShared<Req, Resp>;

  // Asks for the next call on `cq`; false once the server shuts down.
  static bool Listen(Shared* shared, grpc::ServerCompletionQueue* cq) {
    if (!shared->Enter()) return false;
    auto* call = new AsyncWriterCall(shared, cq);
    // Before the request: gRPC then tells this call's end (a cancel included) on the queue.
    call->ctx_.AsyncNotifyWhenDone(&call->done_);
    shared->request(&call->ctx_, &call->request_, &call->writer_, cq, &call->accept_);
    return true;
  }

  // A completion of one of this call's operations (`tag` is one of its Tag members).
  static void Proceed(void* tag, bool ok) {
    auto* t = static_cast<Tag*>(tag);
    t->call->OnEvent(t->kind, ok);
  }

  void Write(const Resp* message) {
    {
      absl::MutexLock lock(&mu_);
      ++outstanding_;
    }
    writer_.Write(*message, &write_);
  }
  void SendInitialMetadata() {
    {
      absl::MutexLock lock(&mu_);
      ++outstanding_;
    }
    writer_.SendInitialMetadata(&headers_);
  }
  void Finish(grpc::Status status) {
    {
      absl::MutexLock lock(&mu_);
      ++outstanding_;
      finishing_ = true;
    }
    writer_.Finish(status, &finish_);
  }
  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }

 private:
  enum class Kind { kAccept, kHeaders, kWrite, kFinish, kDone };
  struct Tag {
    AsyncWriterCall* call;
    Kind kind;
  };

  AsyncWriterCall(Shared* shared, grpc::ServerCompletionQueue* cq)
      : shared_(shared), cq_(cq), writer_(&ctx_) {}

  void OnEvent(Kind kind, bool ok) {
    switch (kind) {
      case Kind::kAccept: {
        if (!ok) {  // the server is shutting down: this call never started (no done tag comes)
          End();
          return;
        }
        Listen(shared_, cq_);  // the next call on this queue
        {
          absl::MutexLock lock(&mu_);
          ++outstanding_;  // the done tag, which every started call gets
        }
        reactor_ = shared_->make_reactor(&ctx_);
        reactor_->call_ = this;
        reactor_->OnStart(request_);
        return;
      }
      case Kind::kHeaders:
        reactor_->OnSendInitialMetadataDone(ok);
        break;
      case Kind::kWrite:
        reactor_->OnWriteDone(ok);
        break;
      case Kind::kFinish:
        break;
      case Kind::kDone:
        // IsCancelled may be asked only now, on the async API.
        if (ctx_.IsCancelled()) {
          cancelled_.store(true, std::memory_order_release);
          reactor_->OnCancel();
        }
        break;
    }
    // The call ends once it finished and nothing of it is outstanding (the done tag included).
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
  Req request_;
  grpc::ServerAsyncWriter<Resp> writer_;
  AsyncWriterReactor<Req, Resp>* reactor_ = nullptr;
  Tag accept_{this, Kind::kAccept}, headers_{this, Kind::kHeaders}, write_{this, Kind::kWrite},
      finish_{this, Kind::kFinish}, done_{this, Kind::kDone};
  absl::Mutex mu_;
  int outstanding_ ABSL_GUARDED_BY(mu_) = 0;
  bool finishing_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<bool> cancelled_{false};
};

// Serves one server-streaming method on `shards` completion queues.
template <class Req, class Resp>
using AsyncWriterServer = AsyncServer<AsyncWriterCall<Req, Resp>>;

}  // namespace tessera
