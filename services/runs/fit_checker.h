#pragma once
// Asks the scheduler whether a compute request can ever be placed on its cluster.

#include <grpcpp/channel.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "services/common/system_client.h"
#include "services/common/system_credential.h"
#include "tessera/v1/scheduler.grpc.pb.h"
#include "transport/channel_ref.h"

namespace tessera::runs {

class FitChecker {
 public:
  virtual ~FitChecker() = default;
  // The owner's team (empty: none) when the run can ever start; INVALID_ARGUMENT naming the
  // field (the cluster cannot hold it, or it is larger than its team's quota and may not
  // borrow), or UNAVAILABLE when the scheduler cannot answer.
  virtual absl::StatusOr<std::string> CheckFit(const v1::ComputeSpec& compute,
                                               const std::string& user, bool preemptible) = 0;
};

// A submit waits for the check: 10 s, well within the 30 s that mcli waits for the submit.
inline constexpr ServiceClientOptions kFitCheckerOptions{.deadline = absl::Seconds(10)};

// Over the scheduler's gRPC API, authenticating with `system_key`.
std::shared_ptr<FitChecker> MakeGrpcFitChecker(std::shared_ptr<ChannelRef> channel,
                                               SystemCredential system_key,
                                               ServiceClientOptions options = kFitCheckerOptions);

}  // namespace tessera::runs
