#include "services/runs/log_deleter.h"

#include "tessera/v1/logs.grpc.pb.h"

namespace tessera::runs {
namespace {

class GrpcLogDeleter final : public LogDeleter {
 public:
  GrpcLogDeleter(std::shared_ptr<ChannelRef> channel, SystemCredential key,
                 ServiceClientOptions options)
      : logs_(std::move(channel), std::move(key), "the log service", options) {}

  absl::Status DeleteRunLogs(const std::string& run_id) override {
    v1::DeleteRunLogsRequest req;
    req.set_idempotency_key("delete-logs-" + run_id);
    req.set_run_id(run_id);
    v1::DeleteRunLogsResponse resp;
    return logs_.Call(&v1::LogService::Stub::DeleteRunLogs, req, &resp);
  }

 private:
  SystemClient<v1::LogService> logs_;
};

}  // namespace

std::shared_ptr<LogDeleter> MakeGrpcLogDeleter(std::shared_ptr<ChannelRef> channel,
                                               SystemCredential system_key,
                                               ServiceClientOptions options) {
  return std::make_shared<GrpcLogDeleter>(std::move(channel), std::move(system_key), options);
}

}  // namespace tessera::runs
