#include "services/logs/log_service.h"

#include <deque>
#include <variant>

#include "services/logs/line_batcher.h"

namespace tessera::logs {
namespace {

// What a step's batcher writes: the step's messages.
struct StepOutput {
  std::deque<v1::LogLines>* out = nullptr;
  bool Write(v1::LogLines message) {
    out->push_back(std::move(message));
    return true;
  }
};

// One StreamLogs call's steps: the LogStreamer's, its lines gathered into messages (plain, or
// packed when the request asks for packed lines).
class StreamLogsSteps final : public StreamSteps<v1::LogLines> {
 public:
  // Opens the handler's streamer with sinks into this call's batcher.
  static absl::StatusOr<std::unique_ptr<StreamSteps<v1::LogLines>>> Open(
      LogHandler& handler, const auth::Principal& who, const v1::GetLogsRequest& req) {
    auto steps = std::unique_ptr<StreamLogsSteps>(new StreamLogsSteps());
    LogSinks sinks;
    if (req.packed()) {
      auto& packed = steps->batcher_.emplace<PackedLineBatcher<StepOutput>>(&steps->output_);
      sinks.send = [&packed](const v1::LogLine& l) { return packed.Add(l); };
      sinks.flush = [&packed] { return packed.Flush(); };
      sinks.send_packed = [&packed](const v1::PackedLogLines& group, absl::string_view lines,
                                    int64_t count) {
        return packed.AddPacked(group, lines, count);
      };
      sinks.send_start = [&packed](const v1::LogCursor& start) { return packed.Start(start); };
    } else {
      auto& plain = steps->batcher_.emplace<LineBatcher<StepOutput>>(&steps->output_);
      sinks.send = [&plain](const v1::LogLine& l) { return plain.Add(l); };
      sinks.flush = [&plain] { return plain.Flush(); };
      sinks.send_start = [&plain](const v1::LogCursor& start) { return plain.Start(start); };
    }
    auto streamer = handler.OpenStream(who, req, std::move(sinks));
    if (!streamer.ok()) return streamer.status();
    steps->streamer_ = *std::move(streamer);
    steps->streamer_->UseNewsWakes();
    return steps;
  }

  void Waiting(std::function<void()> wake) override { streamer_->WakeOnNews(std::move(wake)); }

  StreamStep Step(std::deque<v1::LogLines>& out, const std::function<bool()>& done) override {
    output_.out = &out;
    StreamStep next = streamer_->Step(done);
    // What was gathered goes out after every step, the lines before an end (an error too).
    std::visit([](auto& b) { FlushBatcher(b); }, batcher_);
    output_.out = nullptr;
    return next;
  }

 private:
  StreamLogsSteps() = default;
  static void FlushBatcher(std::monostate&) {}
  template <typename Batcher>
  static void FlushBatcher(Batcher& b) {
    b.Flush();
  }

  StepOutput output_;
  std::variant<std::monostate, LineBatcher<StepOutput>, PackedLineBatcher<StepOutput>> batcher_;
  std::unique_ptr<LogStreamer> streamer_;
};

}  // namespace

LogService::LogService(std::shared_ptr<LogHandler> handler,
                       std::shared_ptr<auth::Authenticator> auth, LogServiceOptions options)
    : h_(std::move(handler)),
      auth_(std::move(auth)),
      follows_(
          [this](grpc::ServerContext* ctx, v1::GetLogsRequest* req,
                 grpc::ServerAsyncWriter<v1::LogLines>* writer, grpc::ServerCompletionQueue* cq,
                 void* tag) { RequestStreamLogs(ctx, req, writer, cq, cq, tag); },
          PumpedMethod<v1::GetLogsRequest, v1::LogLines>{
              .method = TESSERA_RPC_NAME(StreamLogs),
              .open =
                  [h = h_.get()](const auth::Principal& who, const v1::GetLogsRequest& req) {
                    return StreamLogsSteps::Open(*h, who, req);
                  },
              .auth = auth_.get()},
          // Other writers' lines wake follows through the feed; this process's, through each
          // follow's subscription (a follow is woken by its attempt's lines only). A follow's
          // check reads more than a watch's: released in 10 ms batches, 10,000 follows' checks
          // delayed heartbeats more (p99 1.7x quiet in two runs) than one at a time (0.94x).
          PumpOptions{.feed = h_->change_feed(),
                      .topic = store::ChangeTopic::kLogs,
                      .clock = h_->clock(),
                      .threads = options.stream_threads,
                      .wakes = StreamPump::Wakes::kForeignChanges,
                      .tick = absl::ZeroDuration()},
          options.stream_queues) {}

}  // namespace tessera::logs
