#include "scheduler/service/shell_service.h"

#include <deque>
#include <optional>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "base/status_macros.h"
#include "services/common/auth/stream_guard.h"
#include "services/common/rpc.h"
#include "services/common/standby.h"

namespace tessera::scheduler {
namespace {

// How often an open shell's key is checked (a lookup only once its cached answer ran out).
constexpr absl::Duration kShellKeyCheckInterval = absl::Seconds(1);

// A session's stream as the hub sees it (`Base`: its caller's end or its node's). Writes come
// from two threads, and gRPC takes one at a time: one lock each.
template <class Base, class In, class Out>
class SessionStream final : public Base {
 public:
  SessionStream(grpc::ServerContext* ctx, grpc::ServerReaderWriter<Out, In>* stream)
      : ctx_(ctx), stream_(stream) {}
  bool Read(In* in) override { return stream_->Read(in); }
  bool Write(const Out& out) override {
    absl::MutexLock lock(&mu_);
    return stream_->Write(out);
  }
  void Cancel() override { ctx_->TryCancel(); }
  // The caller's end says whether the caller went (ShellCallerEnd::Gone).
  bool Gone() { return ctx_->IsCancelled(); }

 private:
  grpc::ServerContext* ctx_;
  grpc::ServerReaderWriter<Out, In>* stream_;
  absl::Mutex mu_;
};
using CallerStream = SessionStream<ShellCallerEnd, v1::ShellInput, v1::ShellOutput>;
using NodeStream = SessionStream<ShellNodeEnd, v1::ShellNodeMessage, v1::ShellInput>;

}  // namespace

// One node's Listen stream: each session the hub gives it is queued and written, one write at a
// time; the node's end of the stream (its read ending) removes it from the hub. The outbox
// outlives the stream: the hub may give a session just as the stream ends.
class ListenStream final : public AsyncBidiReactor<v1::ShellListenRequest, v1::ShellSessionStart> {
 public:
  ListenStream(ShellRelayService* service, grpc::ServerContext* ctx)
      : service_(service), ctx_(ctx), outbox_(std::make_shared<Outbox>()) {}

  void OnStart() override {
    auto who = service_->auth_->Authenticate(*ctx_);
    absl::Status refused = who.status();
    if (who.ok()) refused = auth::CheckRpcRole("tessera.v1.ShellRelay/Listen", *who);
    if (refused.ok() && !service_->is_leader_()) {
      refused = StandbyError("scheduler", "listen at the leader");
    }
    if (!refused.ok()) {
      Finish(ToGrpcStatus(refused));
      return;
    }
    node_ = who->node;
    {
      absl::MutexLock lock(&outbox_->mu);
      outbox_->stream = this;
    }
    listener_ = service_->hub_->AddListener(
        node_, [outbox = outbox_](const v1::ShellSessionStart& s) { outbox->Push(s); });
    StartRead(&in_);
  }

  void OnReadDone(bool ok) override {
    if (ok) {  // nothing more is expected of the node: its messages are read and dropped
      StartRead(&in_);
      return;
    }
    service_->hub_->RemoveListener(node_, listener_);
    absl::MutexLock lock(&outbox_->mu);
    outbox_->finishing = true;
    outbox_->queue.clear();
    if (!outbox_->writing) Finish(grpc::Status::OK);
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&outbox_->mu);
    outbox_->writing = false;
    if (!ok) outbox_->queue.clear();  // the stream broke: its read ends it
    if (outbox_->finishing) {
      Finish(grpc::Status::OK);
      return;
    }
    outbox_->NextLocked();
  }

  void OnDone() override {
    {
      absl::MutexLock lock(&outbox_->mu);
      outbox_->stream = nullptr;
    }
    delete this;
  }

 private:
  struct Outbox {
    absl::Mutex mu;
    ListenStream* stream = nullptr;  // null before the start and once the stream is done
    std::deque<v1::ShellSessionStart> queue;
    v1::ShellSessionStart current;
    bool writing = false;
    bool finishing = false;

    void Push(const v1::ShellSessionStart& s) {
      absl::MutexLock lock(&mu);
      if (stream == nullptr || finishing) return;
      queue.push_back(s);
      NextLocked();
    }
    void NextLocked() {
      if (writing || queue.empty() || stream == nullptr) return;
      current = std::move(queue.front());
      queue.pop_front();
      writing = true;
      stream->StartWrite(&current);
    }
  };

  ShellRelayService* const service_;
  grpc::ServerContext* const ctx_;
  std::shared_ptr<Outbox> outbox_;
  v1::ShellListenRequest in_;
  std::string node_;
  uint64_t listener_ = 0;
};

ShellRelayService::ShellRelayService(std::shared_ptr<ShellHub> hub,
                                     std::shared_ptr<auth::Authenticator> auth,
                                     std::function<bool()> is_leader, int listen_queues)
    : hub_(std::move(hub)),
      auth_(std::move(auth)),
      is_leader_(std::move(is_leader)),
      listens_(std::make_unique<AsyncBidiServer<v1::ShellListenRequest, v1::ShellSessionStart>>(
          [this](
              grpc::ServerContext* ctx,
              grpc::ServerAsyncReaderWriter<v1::ShellSessionStart, v1::ShellListenRequest>* stream,
              grpc::ServerCompletionQueue* cq,
              void* tag) { RequestListen(ctx, stream, cq, cq, tag); },
          [this](grpc::ServerContext* ctx)
              -> AsyncBidiReactor<v1::ShellListenRequest, v1::ShellSessionStart>* {
            return new ListenStream(this, ctx);
          },
          listen_queues)) {}

ShellRelayService::~ShellRelayService() = default;

grpc::Status ShellService::Connect(
    grpc::ServerContext* ctx, grpc::ServerReaderWriter<v1::ShellOutput, v1::ShellInput>* stream) {
  v1::ShellOpen open;  // what the audit log records of the call
  return Serve(
      *auth_, ctx, TESSERA_RPC_NAME(Connect),
      [&](const auth::Principal& who) -> absl::Status {
        if (!is_leader_()) return StandbyError("scheduler", "connect to the leader");
        v1::ShellInput first;
        if (!stream->Read(&first)) return absl::CancelledError("the caller sent nothing");
        if (!first.has_open()) {
          return absl::InvalidArgumentError("the first message of Connect must be `open`");
        }
        open = first.open();
        CallerStream caller(ctx, stream);
        // A key revoked or expired during the session ends it: its last output says why, then
        // the call is cut (the hub takes the shell down with it).
        TESSERA_ASSIGN_OR_RETURN(
            auto guard,
            auth::StreamGuard::Open(*auth_, *ctx, who, auth::StreamGuard::Lifetime::kUnbounded));
        absl::Notification over;
        std::thread keeper([&] {
          while (!over.WaitForNotificationWithTimeout(kShellKeyCheckInterval)) {
            if (auto st = guard.CheckKey(); !st.ok()) {
              v1::ShellOutput last;
              last.set_output(absl::StrCat("\r\n", st.message(), "\r\n"));
              caller.Write(last);
              caller.Cancel();
              return;
            }
          }
        });
        absl::Status outcome = hub_->Connect(who, open, caller);
        over.Notify();
        keeper.join();
        return guard.Outcome(outcome);
      },
      &open);
}

grpc::Status ShellRelayService::Attach(
    grpc::ServerContext* ctx,
    grpc::ServerReaderWriter<v1::ShellInput, v1::ShellNodeMessage>* stream) {
  return Serve(*auth_, ctx, TESSERA_RPC_NAME(Attach), [&](const auth::Principal& who) {
    if (!is_leader_()) return StandbyError("scheduler", "attach at the leader");
    v1::ShellNodeMessage first;
    if (!stream->Read(&first) || !first.has_session_id()) {
      return absl::InvalidArgumentError("the first message of Attach must be `session_id`");
    }
    NodeStream end(ctx, stream);
    return hub_->Attach(who.node, first.session_id(), end);
  });
}

}  // namespace tessera::scheduler
