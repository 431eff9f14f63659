#pragma once
// The log service's view of the run manager: a run's owner, status and attempts, read only
// through the run manager's API.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "services/common/channel_ref.h"
#include "services/common/system_client.h"
#include "services/common/system_credential.h"
#include "tessera/v1/runs.grpc.pb.h"

namespace tessera::logs {

class RunLookup {
 public:
  virtual ~RunLookup() = default;
  // The run with its attempts; NOT_FOUND when there is no such run.
  virtual absl::StatusOr<v1::RunDescription> DescribeRun(const std::string& name) = 0;
  // The same, by the run's id.
  virtual absl::StatusOr<v1::RunDescription> DescribeRunById(const std::string& run_id) = 0;
};

// A follower asks once a second: a lookup that takes longer than 10 s is better retried than
// waited for.
inline constexpr ServiceClientOptions kRunLookupOptions{.deadline = absl::Seconds(10)};

// Over the run manager's gRPC API, authenticating with `system_key`.
std::shared_ptr<RunLookup> MakeGrpcRunLookup(std::shared_ptr<ChannelRef> channel,
                                             SystemCredential system_key,
                                             ServiceClientOptions options = kRunLookupOptions);

}  // namespace tessera::logs
