// Bidirectional streams on the async API with completion queues of their own (async_bidi.h):
// real gRPC over loopback, many streams over several queues, ends from either side, and a
// shutdown with streams still open.
#include "transport/async_bidi.h"

#include <catch2/catch.hpp>
#include <thread>

#include "absl/strings/str_cat.h"
#include "tessera/v1/worker.grpc.pb.h"

namespace tessera {
namespace async_bidi_test {

using Reactor = AsyncBidiReactor<v1::WorkerMessage, v1::ControlMessage>;

std::atomic<int> g_done{0};

// Answers each heartbeat with a lease renewal; ends the stream when the client is done, or at
// once for a client whose metadata asks to be refused.
class Echo final : public Reactor {
 public:
  explicit Echo(grpc::ServerContext* ctx) : ctx_(ctx) {}
  void OnStart() override {
    if (ctx_->client_metadata().count("refuse") > 0) {
      Finish(grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "refused"));
      return;
    }
    StartRead(&in_);
  }
  void OnReadDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status::OK);
      return;
    }
    out_.Clear();
    out_.mutable_lease_renewed()->set_heartbeat_sequence(in_.heartbeat().sequence());
    StartWrite(&out_);
  }
  void OnWriteDone(bool ok) override {
    if (ok) StartRead(&in_);
  }
  void OnDone() override {
    ++g_done;
    delete this;
  }

 private:
  grpc::ServerContext* const ctx_;
  v1::WorkerMessage in_;
  v1::ControlMessage out_;
};

class EchoService final : public v1::WorkerControl::AsyncService, public AsyncServing {
 public:
  explicit EchoService(int queues)
      : streams_(
            [this](grpc::ServerContext* ctx,
                   grpc::ServerAsyncReaderWriter<v1::ControlMessage, v1::WorkerMessage>* stream,
                   grpc::ServerCompletionQueue* cq,
                   void* tag) { RequestConnect(ctx, stream, cq, cq, tag); },
            [](grpc::ServerContext* ctx) -> Reactor* { return new Echo(ctx); }, queues) {}
  void AddCompletionQueues(grpc::ServerBuilder& builder) override {
    streams_.AddCompletionQueues(builder);
  }
  void Started() override { streams_.Start(); }
  void Stop() override { streams_.Stop(); }

 private:
  AsyncBidiServer<v1::WorkerMessage, v1::ControlMessage> streams_;
};

struct Served {
  explicit Served(int queues) : service(std::make_unique<EchoService>(queues)) {
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    b.RegisterService(service.get());
    service->AddCompletionQueues(b);
    server = b.BuildAndStart();
    REQUIRE(server != nullptr);
    service->Started();
    stub = v1::WorkerControl::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  }
  // The order ServiceHost keeps: the server's Shutdown, the service's queues, then the server.
  ~Served() {
    server->Shutdown(std::chrono::system_clock::now());
    service->Stop();
    server->Wait();
    server.reset();
    service.reset();
  }
  int port = 0;
  std::unique_ptr<EchoService> service;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<v1::WorkerControl::Stub> stub;
};

v1::WorkerMessage Beat(int seq) {
  v1::WorkerMessage m;
  m.mutable_heartbeat()->set_sequence(seq);
  return m;
}

TEST_CASE("many streams over several queues each get their own answers, then end") {
  g_done = 0;
  {
    Served s(/*queues=*/3);
    constexpr int kStreams = 24;
    std::vector<std::thread> clients;
    std::atomic<int> answered{0}, finished_ok{0};
    for (int c = 0; c < kStreams; ++c) {
      clients.emplace_back([&, c] {
        grpc::ClientContext ctx;
        auto stream = s.stub->Connect(&ctx);
        for (int i = 1; i <= 5; ++i) {
          if (!stream->Write(Beat(c * 100 + i))) return;
          v1::ControlMessage reply;
          if (!stream->Read(&reply)) return;
          if (reply.lease_renewed().heartbeat_sequence() == c * 100 + i) ++answered;
        }
        stream->WritesDone();
        if (stream->Finish().ok()) ++finished_ok;
      });
    }
    for (auto& t : clients) t.join();
    CHECK(answered == kStreams * 5);
    CHECK(finished_ok == kStreams);
  }
  CHECK(g_done == 24);  // every reactor saw its end
}

TEST_CASE("a stream the server refuses at once ends with the server's status") {
  g_done = 0;
  {
    Served s(2);
    grpc::ClientContext ctx;
    ctx.AddMetadata("refuse", "yes");
    auto stream = s.stub->Connect(&ctx);
    v1::ControlMessage reply;
    CHECK_FALSE(stream->Read(&reply));
    const grpc::Status st = stream->Finish();
    CHECK(st.error_code() == grpc::StatusCode::PERMISSION_DENIED);
    CHECK(st.error_message() == "refused");
  }
  CHECK(g_done == 1);
}

TEST_CASE("a client that goes away ends its stream on the server") {
  g_done = 0;
  Served s(2);
  {
    grpc::ClientContext ctx;
    auto stream = s.stub->Connect(&ctx);
    REQUIRE(stream->Write(Beat(1)));
    v1::ControlMessage reply;
    REQUIRE(stream->Read(&reply));
    ctx.TryCancel();
    stream->Finish();
  }
  for (int i = 0; i < 500 && g_done == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(g_done == 1);
}

TEST_CASE("shutting down with streams open ends them all and returns") {
  g_done = 0;
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientReaderWriter<v1::WorkerMessage, v1::ControlMessage>>>
      streams;
  {
    Served s(4);
    for (int i = 0; i < 10; ++i) {
      contexts.push_back(std::make_unique<grpc::ClientContext>());
      streams.push_back(s.stub->Connect(contexts.back().get()));
      REQUIRE(streams.back()->Write(Beat(i)));
      v1::ControlMessage reply;
      REQUIRE(streams.back()->Read(&reply));
    }
  }  // the server shuts down with the ten streams open
  CHECK(g_done == 10);
  for (auto& stream : streams) {
    v1::ControlMessage reply;
    CHECK_FALSE(stream->Read(&reply));
    CHECK_FALSE(stream->Finish().ok());
  }
}

}  // namespace async_bidi_test
}  // namespace tessera
