#pragma once
// The gRPC adapters of mcli connect (shell.proto) over the ShellHub: ShellService for callers,
// ShellRelay for the nodes' workers. Each node's Listen stream is held on the async API
// (async_bidi.h: no thread each, as the control streams); a session's two streams are
// synchronous, a thread each: shells are few (the hub bounds them). Only the scheduler's leader
// serves them; a standby refuses, as for the workers' control streams.

#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>

#include "scheduler/service/shell_hub.h"
#include "services/common/auth/api_keys.h"
#include "tessera/v1/shell.grpc.pb.h"
#include "transport/async_bidi.h"

namespace tessera::scheduler {

class ShellService final : public v1::ShellService::Service {
 public:
  using Api = v1::ShellService;

  ShellService(std::shared_ptr<ShellHub> hub, std::shared_ptr<auth::Authenticator> auth,
               std::function<bool()> is_leader)
      : hub_(std::move(hub)), auth_(std::move(auth)), is_leader_(std::move(is_leader)) {}

  grpc::Status Connect(grpc::ServerContext* ctx,
                       grpc::ServerReaderWriter<v1::ShellOutput, v1::ShellInput>* stream) override;

 private:
  std::shared_ptr<ShellHub> hub_;
  std::shared_ptr<auth::Authenticator> auth_;
  std::function<bool()> is_leader_;
};

class ShellRelayService final
    : public v1::ShellRelay::WithAsyncMethod_Listen<v1::ShellRelay::Service>,
      public AsyncServing {
 public:
  using Api = v1::ShellRelay;

  ShellRelayService(std::shared_ptr<ShellHub> hub, std::shared_ptr<auth::Authenticator> auth,
                    std::function<bool()> is_leader, int listen_queues = 2);
  ~ShellRelayService() override;

  grpc::Status Attach(
      grpc::ServerContext* ctx,
      grpc::ServerReaderWriter<v1::ShellInput, v1::ShellNodeMessage>* stream) override;

  void AddCompletionQueues(grpc::ServerBuilder& builder) override {
    listens_->AddCompletionQueues(builder);
  }
  void Started() override { listens_->Start(); }
  void Stop() override { listens_->Stop(); }

 private:
  friend class ListenStream;

  std::shared_ptr<ShellHub> hub_;
  std::shared_ptr<auth::Authenticator> auth_;
  std::function<bool()> is_leader_;
  std::unique_ptr<AsyncBidiServer<v1::ShellListenRequest, v1::ShellSessionStart>> listens_;
};

}  // namespace tessera::scheduler
