#pragma once
// Asks the log service to delete a run's logs when the run is deleted.

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "services/common/system_client.h"
#include "services/common/system_credential.h"
#include "transport/channel_ref.h"

namespace tessera::runs {

class LogDeleter {
 public:
  virtual ~LogDeleter() = default;
  // OK also when the run has no logs; UNAVAILABLE when the log service cannot be reached.
  virtual absl::Status DeleteRunLogs(const std::string& run_id) = 0;
};

// A DeleteRun waits for the log service, so it gives up after 10 s (the run is deleted anyway
// and its logs removed later).
inline constexpr ServiceClientOptions kLogDeleterOptions{.deadline = absl::Seconds(10)};

// Over the log service's gRPC API, authenticating with `system_key`.
std::shared_ptr<LogDeleter> MakeGrpcLogDeleter(std::shared_ptr<ChannelRef> channel,
                                               SystemCredential system_key,
                                               ServiceClientOptions options = kLogDeleterOptions);

}  // namespace tessera::runs
