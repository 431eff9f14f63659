#pragma once
// The worker side of the control stream, driven by tests until the real worker daemon exists:
// registers a node, heartbeats on its own thread, records the commands it receives and answers
// them as a worker would (ranks started, then finished with a chosen exit code).

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "tessera/v1/worker.grpc.pb.h"

namespace tessera::testing {

class FakeWorker {
 public:
  FakeWorker(std::string endpoint, std::string api_key, v1::Node node);
  ~FakeWorker();

  // Opens the stream and registers; heartbeats every `heartbeat` until Disconnect.
  absl::Status Connect(absl::Duration heartbeat = absl::Milliseconds(200));
  // Stops heartbeating and closes the stream, as a dead or cut-off worker would.
  void Disconnect();

  // When set, every started attempt reports FINISHED at once with this exit code for each rank.
  void FinishImmediately(std::optional<int> exit_code);
  // Reports the attempt's local ranks as exited with `exit_code`.
  void Finish(const std::string& run_id, int resumption, int exit_code);

  std::vector<v1::StartAttempt> starts();
  std::vector<v1::StopAttempt> stops();
  // Waits for a StartAttempt of `run_id` (any resumption when -1).
  std::optional<v1::StartAttempt> WaitForStart(const std::string& run_id, int resumption,
                                               absl::Duration timeout);
  const std::string& name() const { return node_.name(); }

 private:
  absl::Status ConnectOnce(absl::Duration heartbeat);
  void ReadLoop();
  bool Send(const v1::WorkerMessage& m);

  const std::string endpoint_, key_;
  const v1::Node node_;
  std::unique_ptr<v1::WorkerControl::Stub> stub_;
  std::unique_ptr<grpc::ClientContext> ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::WorkerMessage, v1::ControlMessage>> stream_;
  std::thread reader_, heartbeater_;
  std::atomic<bool> stop_{false};
  absl::Mutex mu_;
  std::vector<v1::StartAttempt> starts_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::StopAttempt> stops_ ABSL_GUARDED_BY(mu_);
  std::optional<int> auto_exit_ ABSL_GUARDED_BY(mu_);
  std::mutex write_mu_;
};

}  // namespace tessera::testing
