#pragma once
// The scheduler's view of the run manager: it reads the queue and reports what happens to
// attempts, only through the run manager's API.

#include <grpcpp/channel.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "services/common/system_client.h"
#include "services/common/system_credential.h"
#include "services/store/write_fence.h"
#include "tessera/v1/runs.grpc.pb.h"
#include "tessera/v1/secrets.grpc.pb.h"
#include "transport/channel_ref.h"

namespace tessera::scheduler {

class RunsClient {
 public:
  virtual ~RunsClient() = default;
  virtual absl::StatusOr<std::vector<v1::Run>> ListRuns(
      const std::vector<v1::RunStatus>& statuses) = 0;
  virtual absl::StatusOr<v1::Run> RecordAttempt(const v1::Attempt& attempt) = 0;
  virtual absl::Status ReportProgress(const v1::ReportProgressRequest& request) = 0;
  // A note from a node about an attempt ("Pulling image ..."), kept as a SETUP event.
  virtual absl::Status RecordNote(const std::string& run_id, int resumption_index,
                                  const std::string& note) = 0;
  // The run's owner's secrets, in clear, for its nodes' start commands.
  virtual absl::StatusOr<std::vector<v1::SecretValue>> RunSecrets(const std::string& run_id) = 0;
};

// Over gRPC with a system API key (calls wait ServiceClientOptions' default 30 s). With a
// `fence`, RecordAttempt carries the leader's term and is refused once a newer one began.
std::shared_ptr<RunsClient> MakeGrpcRunsClient(std::shared_ptr<ChannelRef> channel,
                                               SystemCredential system_key,
                                               ServiceClientOptions options = {},
                                               store::FenceSource fence = nullptr);

}  // namespace tessera::scheduler
