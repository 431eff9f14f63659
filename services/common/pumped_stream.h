#pragma once
// A long server-streaming call (a log follow, a run watch, a node-event watch) served without a
// thread of its own: the call is a reactor on the async API (async_writer.h), its work a series
// of steps (StreamSteps) run on a StreamPump's threads (stream_pump.h), and between two steps a
// call that has nothing to send is an entry of the pump, woken by its change feed topic, at its
// poll, or at once when its caller goes away. 10,000 open follows cost memory, not threads.
//
// The call is admitted as Serve admits one (AdmittedCall: the key, the role table, the call
// rate, the traffic class), holds a StreamGuard (its key checked again at every step, the
// person's stream slot, the stream's maximum lifetime), and is answered (and audited) through
// the AdmittedCall.

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "services/common/auth/stream_guard.h"
#include "services/common/rpc.h"
#include "services/common/stream_pump.h"
#include "services/store/traffic_class.h"
#include "transport/async_writer.h"

namespace tessera {

// What comes after a step.
struct StreamStep {
  enum class Kind { kStep, kWait, kEnd };
  Kind kind = Kind::kStep;
  // kWait: the pump topic's generation before the step's read: a move from it may mean more.
  uint64_t seen = 0;
  // kWait: step again then at the latest (the fallback poll, a check the stream makes).
  absl::Time until = absl::InfiniteFuture();
  // kEnd: what the call ends with.
  absl::Status status;
  // The call's headers go out now, before anything the step gathered: the stream's start is
  // fixed, and a client that waits for the headers (mcli's watch, which then reads the run)
  // misses nothing after them.
  bool headers = false;

  static StreamStep Again() { return StreamStep{}; }
  static StreamStep WaitFor(uint64_t seen, absl::Time until) {
    return StreamStep{
        .kind = Kind::kWait, .seen = seen, .until = until, .status = {}, .headers = false};
  }
  static StreamStep End(absl::Status status) {
    return StreamStep{.kind = Kind::kEnd,
                      .seen = 0,
                      .until = absl::InfiniteFuture(),
                      .status = std::move(status),
                      .headers = false};
  }
};

// One call's work. A step may block (a database read, a call to another service), but never
// waits for something to happen: it says so instead (StreamStep::WaitFor).
template <class Resp>
class StreamSteps {
 public:
  virtual ~StreamSteps() = default;
  // Appends what it sends to `out`. `done`: whether the call is over (its caller went away, its
  // key no longer holds), for a step that reads much.
  virtual StreamStep Step(std::deque<Resp>& out, const std::function<bool()>& done) = 0;
  // After a step that waits: `wake` releases the wait at once (any thread, any number of times;
  // once the wait is over it does nothing), for news the pump's topic does not carry.
  virtual void Waiting(std::function<void()> wake) {}
};

// One server-streaming method served this way.
template <class Req, class Resp>
struct PumpedMethod {
  // A call's steps, once it was admitted: errors (a bad request, a run not found) end the call.
  using Open = std::function<absl::StatusOr<std::unique_ptr<StreamSteps<Resp>>>(
      const auth::Principal& who, const Req& request)>;
  // "tessera.v1.LogService/StreamLogs": the role table's and the audit log's name.
  std::string method;
  Open open;
  auth::Authenticator* auth = nullptr;
};

// The watches' pumps keep moments (polls, checks) to the next 10 ms: many streams' are released
// together (10,000 idle watches: heartbeat p99 0.98-1.19x quiet, against 1.68-2.29x one at a
// time; bench/README).
inline constexpr absl::Duration kPumpTick = absl::Milliseconds(10);

// Where a method's steps run and wait: a StreamPump of its own (stream_pump.h).
struct PumpOptions {
  std::shared_ptr<store::ChangeFeed> feed;
  store::ChangeTopic topic = store::ChangeTopic::kRunEvents;
  std::shared_ptr<Clock> clock;
  int threads = 1;  // steps run at once, however many calls are open
  StreamPump::Wakes wakes = StreamPump::Wakes::kEveryChange;
  absl::Duration tick = kPumpTick;
};

// One call. It is always in exactly one of: a step on the pump's threads, waiting in the pump,
// sending what a step gathered, or finishing; so nothing of it runs once it finished, and
// OnDone may delete it.
template <class Req, class Resp>
class PumpedStreamCall final : public AsyncWriterReactor<Req, Resp> {
 public:
  PumpedStreamCall(const PumpedMethod<Req, Resp>* method, StreamPump* pump,
                   grpc::ServerContext* context)
      : m_(method), pump_(pump), context_(context) {}

  void OnStart(const Req& request) override {
    request_ = request;
    pump_->Run([this] { Open(); });
  }
  void OnSendInitialMetadataDone(bool ok) override { Sent(ok); }
  void OnWriteDone(bool ok) override { Sent(ok); }
  // A call waiting in the pump ends at once, not at its next poll.
  void OnCancel() override { pump_->WakeNow(ticket_.load()); }
  void OnDone() override { delete this; }

 private:
  // On the pump's threads: the caller admitted, the request checked.
  void Open() {
    admitted_.emplace(*m_->auth, *context_, m_->method, &request_);
    if (!admitted_->refused().ok()) return End(admitted_->Answer(admitted_->refused()));
    auto guard = auth::StreamGuard::Open(*m_->auth, *context_, admitted_->who(),
                                         auth::StreamGuard::Lifetime::kReconnecting,
                                         [this] { return this->cancelled(); });
    if (!guard.ok()) return End(admitted_->Answer(guard.status()));
    guard_.emplace(*std::move(guard));
    store::TrafficScope traffic(admitted_->traffic());
    auto steps = [&] {
      auto listening = admitted_->ListenForRunReads();
      return m_->open(admitted_->who(), request_);
    }();
    if (!steps.ok()) return End(admitted_->Answer(guard_->Outcome(steps.status())));
    steps_ = *std::move(steps);
    Step();
  }

  // On the pump's threads: one step, then what it gathered sent.
  void Step() {
    store::TrafficScope traffic(admitted_->traffic());
    const auto done = [this] { return guard_->Done(); };
    if (done()) return End(admitted_->Answer(guard_->Outcome(absl::OkStatus())));
    next_ = steps_->Step(out_, done);
    if (next_.kind == StreamStep::Kind::kEnd) {
      answer_ = admitted_->Answer(guard_->Outcome(next_.status));
    }
    if (next_.headers && !headers_sent_) {
      headers_sent_ = true;
      this->StartSendInitialMetadata();
      return;
    }
    SendOrGoOn();
  }

  void Sent(bool ok) {
    if (!ok) {  // the caller went away
      this->Finish(grpc::Status(grpc::StatusCode::CANCELLED, "the caller went away"));
      return;
    }
    SendOrGoOn();
  }

  // With nothing outstanding: the next message, or what the last step said comes next.
  void SendOrGoOn() {
    if (!out_.empty()) {
      sending_ = std::move(out_.front());
      out_.pop_front();
      this->StartWrite(&sending_);
      return;
    }
    switch (next_.kind) {
      case StreamStep::Kind::kStep:
        pump_->Run([this] { Step(); });
        return;
      case StreamStep::Kind::kWait: {
        // Everything that may end the wait learns its ticket before it begins: once it began,
        // the step may be running (and the call ending) on another thread.
        StreamPump* pump = pump_;
        const StreamPump::Ticket ticket = pump->Reserve();
        ticket_ = ticket;
        steps_->Waiting([pump, ticket] { pump->WakeNow(ticket); });
        if (this->cancelled()) pump->WakeNow(ticket);  // a cancel before the ticket was known
        pump->RunAfterChange(ticket, next_.seen, next_.until, [this] { Step(); });
        return;
      }
      case StreamStep::Kind::kEnd:
        this->Finish(answer_);
        return;
    }
  }

  // Ends with `answer` once what was gathered is sent.
  void End(grpc::Status answer) {
    answer_ = std::move(answer);
    next_ = StreamStep::End(absl::OkStatus());
    SendOrGoOn();
  }

  const PumpedMethod<Req, Resp>* const m_;
  StreamPump* const pump_;
  grpc::ServerContext* const context_;
  Req request_;
  std::optional<AdmittedCall> admitted_;
  std::optional<auth::StreamGuard> guard_;
  std::unique_ptr<StreamSteps<Resp>> steps_;
  std::deque<Resp> out_;
  StreamStep next_;
  bool headers_sent_ = false;
  grpc::Status answer_;
  Resp sending_;
  std::atomic<StreamPump::Ticket> ticket_{0};
};

// Serves one method this way: its completion queues (a service that has one is AsyncServing and
// forwards to these), the calls' reactors, and the pump their steps run in.
template <class Req, class Resp>
class PumpedStreams {
 public:
  PumpedStreams(typename AsyncWriterShared<Req, Resp>::Request request,
                PumpedMethod<Req, Resp> method, const PumpOptions& pump, int queues)
      : pump_(pump.feed, pump.topic, pump.clock, pump.threads, pump.wakes, pump.tick),
        method_(std::move(method)),
        server_(
            std::move(request),
            [this](grpc::ServerContext* ctx) -> AsyncWriterReactor<Req, Resp>* {
              return new PumpedStreamCall<Req, Resp>(&method_, &pump_, ctx);
            },
            queues) {}
  // Every call ends first (the server was shut down before), then the pump: no step is left.
  ~PumpedStreams() { server_.Stop(); }
  PumpedStreams(const PumpedStreams&) = delete;
  PumpedStreams& operator=(const PumpedStreams&) = delete;

  void AddCompletionQueues(grpc::ServerBuilder& builder) { server_.AddCompletionQueues(builder); }
  void Start() { server_.Start(); }
  // Waits for every call to end (the server was shut down first).
  void Stop() { server_.Stop(); }
  // Calls waiting between their steps, and waits that ended so far (tests, benchmarks).
  size_t waiting() const { return pump_.waiting(); }
  uint64_t waits_ended() const { return pump_.waits_ended(); }

 private:
  StreamPump pump_;  // first: destroyed last
  const PumpedMethod<Req, Resp> method_;
  AsyncWriterServer<Req, Resp> server_;
};

// Drives `steps` on the caller's own thread, waiting on `feed`'s `topic` between them, for the
// blocking callers of a pumped method (the handlers' WatchRuns and WatchNodeEvents, the unit
// tests): sends what each step gathered until `send` says the caller went away, and returns the
// stream's end. `started` (if set) is called when a step says the headers go out. The first
// step is taken whatever `done` says: what happens after the call is the stream's.
template <class Resp>
absl::Status DriveOnThisThread(StreamSteps<Resp>& steps, store::ChangeFeed& feed,
                               store::ChangeTopic topic, Clock& clock,
                               const std::function<bool(const Resp&)>& send,
                               const std::function<bool()>& done,
                               const std::function<void()>& started = nullptr) {
  std::deque<Resp> out;
  for (;;) {
    const StreamStep next = steps.Step(out, done);
    if (next.headers && started) started();
    for (; !out.empty(); out.pop_front()) {
      if (!send(out.front())) return absl::OkStatus();
    }
    if (next.kind == StreamStep::Kind::kEnd) return next.status;
    if (done()) return absl::OkStatus();
    if (next.kind == StreamStep::Kind::kWait) {
      feed.WaitForChange(topic, next.seen, next.until - clock.Now(), clock);
    }
  }
}

}  // namespace tessera
