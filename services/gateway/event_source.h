#pragma once
// A source of Server-Sent Events, and the one the gateway uses: a gRPC server stream. The
// connection that relays it waits on the client socket and on the source's notifications at once
// (see sse_relay.h), so it notices a client that leaves while no event is coming.

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/client_callback.h>

#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "services/gateway/upstream.h"

namespace tessera::gateway {

// One event as it goes on the wire: "event: <event>\nid: <id>\ndata: <data>\n\n".
struct SseEvent {
  std::string event;
  std::string id;  // omitted when empty
  std::string data;
};

struct SourceItem {
  enum class Kind {
    kEvent,
    kEnd,  // no more items; `status` says how the stream ended
  };
  Kind kind = Kind::kEnd;
  SseEvent event;
  grpc::Status status;
};

class EventSource {
 public:
  virtual ~EventSource() = default;
  // Starts producing. `notify` is called, from another thread, whenever Next() may have
  // something new; it must be cheap and must not call back into the source. Called once.
  virtual void Start(std::function<void()> notify) = 0;
  // The next item, if there is one now; never blocks. Nothing follows kEnd.
  virtual std::optional<SourceItem> Next() = 0;
  // Ends the stream soon (the client left, or the gateway is stopping): a kEnd follows.
  // Safe from any thread, any number of times.
  virtual void Cancel() = 0;
};

// A gRPC server stream as a source of events, read with the callback API: the reactor queues
// each message (as an event) for the connection, and reads the next one only while the queue has
// room, so a slow client slows the upstream read instead of growing memory. The callback API
// (rather than a blocking reader) lets the relay wait for the first event or the end without a
// thread per stream. Initial metadata is not taken as acceptance: some transports (the
// all-in-one server's in-process channel) send it even for a call refused at once, so the relay
// sends the SSE head on the first event or after its head delay, and a refusal that ends the
// stream before that becomes a plain JSON error with the right HTTP status.
template <class Msg>
class GrpcStreamSource final : public EventSource, public grpc::ClientReadReactor<Msg> {
 public:
  // Starts the call with the reactor, e.g. stub.async()->WatchRuns(ctx, &request, reactor).
  using Starter = std::function<void(grpc::ClientContext*, grpc::ClientReadReactor<Msg>*)>;
  using Converter = std::function<SseEvent(const Msg&)>;
  // For a message that carries several events (a batch of log lines). An error ends the stream
  // with it (the message could not be read: e.g. packed log lines that are not whole lines).
  using BatchConverter = std::function<absl::StatusOr<std::vector<SseEvent>>(const Msg&)>;

  GrpcStreamSource(std::shared_ptr<UpstreamCall> call, Starter start, Converter convert,
                   std::size_t capacity = 64)
      : GrpcStreamSource(std::move(call), std::move(start),
                         BatchConverter([convert = std::move(convert)](
                                            const Msg& m) -> absl::StatusOr<std::vector<SseEvent>> {
                           return std::vector<SseEvent>{convert(m)};
                         }),
                         capacity) {}
  // `capacity` counts events: reading pauses once that many wait (plus at most one message's).
  GrpcStreamSource(std::shared_ptr<UpstreamCall> call, Starter start, BatchConverter convert,
                   std::size_t capacity)
      : call_(std::move(call)),
        start_(std::move(start)),
        convert_(std::move(convert)),
        capacity_(capacity == 0 ? 1 : capacity) {}

  // Cancels a stream still running and waits for gRPC to be done with the reactor.
  ~GrpcStreamSource() override {
    {
      absl::MutexLock lock(&mu_);
      if (!started_) return;
    }
    Cancel();
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&done_));
  }

  void Start(std::function<void()> notify) override {
    notify_ = std::move(notify);
    {
      absl::MutexLock lock(&mu_);
      started_ = true;
    }
    start_(call_->context(), this);
    // Reads are also started from Next(), outside the reactions: the hold keeps the call alive
    // until no read will be started any more.
    this->AddHold();
    this->StartRead(&msg_);
    this->StartCall();
  }

  std::optional<SourceItem> Next() override {
    std::optional<SourceItem> item;
    bool read = false;
    {
      absl::MutexLock lock(&mu_);
      if (!queue_.empty()) {
        item = std::move(queue_.front());
        queue_.pop_front();
      }
      if (paused_ && !cancelled_ && queue_.size() < capacity_) {
        paused_ = false;
        read = true;
      }
    }
    if (read) this->StartRead(&msg_);
    return item;
  }

  void Cancel() override {
    bool remove_hold = false;
    {
      absl::MutexLock lock(&mu_);
      cancelled_ = true;
      if (paused_ && !hold_removed_) {  // no read outstanding: none will be started now
        paused_ = false;
        hold_removed_ = true;
        remove_hold = true;
      }
    }
    call_->TryCancel();
    if (remove_hold) this->RemoveHold();
  }

 private:
  void OnReadDone(bool ok) override {
    bool read = false, remove_hold = false, pushed = false, unreadable = false;
    {
      absl::MutexLock lock(&mu_);
      // Not ok unless a message was read and converted.
      absl::StatusOr<std::vector<SseEvent>> events = absl::CancelledError();
      if (ok && !cancelled_) {
        events = convert_(msg_);
        if (!events.ok()) {  // the message could not be converted: the stream ends with why
          failure_ = grpc::Status(static_cast<grpc::StatusCode>(events.status().code()),
                                  std::string(events.status().message()));
          cancelled_ = unreadable = true;
        }
      }
      if (events.ok()) {
        for (auto& event : *events) {
          queue_.push_back(SourceItem{SourceItem::Kind::kEvent, std::move(event), {}});
        }
        pushed = true;
        if (queue_.size() < capacity_) {
          read = true;
        } else {
          paused_ = true;
        }
      } else if (!hold_removed_) {
        hold_removed_ = true;
        remove_hold = true;
      }
    }
    if (pushed) notify_();
    if (read) this->StartRead(&msg_);
    if (unreadable) call_->TryCancel();
    if (remove_hold) this->RemoveHold();
  }

  void OnDone(const grpc::Status& status) override {
    std::optional<grpc::Status> failure;
    {
      absl::MutexLock lock(&mu_);
      failure = failure_;
    }
    Push(SourceItem{SourceItem::Kind::kEnd, {}, failure ? *failure : status});
    absl::MutexLock lock(&mu_);
    done_ = true;
  }

  void Push(SourceItem item) {
    {
      absl::MutexLock lock(&mu_);
      queue_.push_back(std::move(item));
    }
    notify_();
  }

  std::shared_ptr<UpstreamCall> call_;
  Starter start_;
  BatchConverter convert_;
  const std::size_t capacity_;
  std::function<void()> notify_;
  Msg msg_;

  absl::Mutex mu_;
  std::deque<SourceItem> queue_;
  bool started_ = false;
  bool paused_ = false;  // the queue was full: no read outstanding
  bool cancelled_ = false;
  bool hold_removed_ = false;
  bool done_ = false;
  std::optional<grpc::Status> failure_;  // why the source ended the stream itself
};

}  // namespace tessera::gateway
