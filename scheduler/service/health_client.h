#pragma once
// The scheduler's view of the health API: what workers report on their control streams about the
// hardware (canary results, GPU faults, hung ranks) goes on to it.

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "services/common/system_client.h"
#include "services/common/system_credential.h"
#include "tessera/v1/health.pb.h"
#include "tessera/v1/worker.pb.h"
#include "transport/channel_ref.h"

namespace tessera::scheduler {

class HealthClient {
 public:
  virtual ~HealthClient() = default;
  virtual absl::Status ReportHealthResult(const v1::HealthCheckResult& result) = 0;
  virtual absl::Status ReportGpuFault(const v1::GpuFault& fault) = 0;
  virtual absl::Status ReportRankHang(const v1::ReportRankHangRequest& hang) = 0;
};

inline constexpr ServiceClientOptions kHealthClientOptions{.deadline = absl::Seconds(15)};

// Over gRPC with a system API key.
std::shared_ptr<HealthClient> MakeGrpcHealthClient(
    std::shared_ptr<ChannelRef> channel, SystemCredential system_key,
    ServiceClientOptions options = kHealthClientOptions);

}  // namespace tessera::scheduler
