#pragma once
// The log service's view of the run manager: a run's owner, status and attempts, read only
// through the run manager's API.

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "services/common/system_client.h"
#include "services/common/system_credential.h"
#include "tessera/v1/runs.pb.h"
#include "transport/channel_ref.h"

namespace tessera::logs {

class RunLookup {
 public:
  virtual ~RunLookup() = default;
  // The run with its attempts; NOT_FOUND when there is no such run.
  virtual absl::StatusOr<v1::RunDescription> DescribeRun(const std::string& name) = 0;
  // The same, by the run's id.
  virtual absl::StatusOr<v1::RunDescription> DescribeRunById(const std::string& run_id) = 0;
};

// The answers of `inner` by name, each shared for `fresh_for` by every caller that asks for the
// same run: the follows of one run check whether it ended once a second each, and 10,000
// follows of one run would be 10,000 calls to the run manager a second. While one caller asks
// again, the others take the last answer. By id, it always asks.
class SharedRunLookup final : public RunLookup {
 public:
  SharedRunLookup(std::shared_ptr<RunLookup> inner, std::shared_ptr<Clock> clock,
                  absl::Duration fresh_for)
      : inner_(std::move(inner)), clock_(std::move(clock)), fresh_for_(fresh_for) {}

  absl::StatusOr<v1::RunDescription> DescribeRun(const std::string& name) override;
  absl::StatusOr<v1::RunDescription> DescribeRunById(const std::string& run_id) override {
    return inner_->DescribeRunById(run_id);
  }

 private:
  struct Answer {
    absl::Time at;
    absl::StatusOr<v1::RunDescription> description;
    bool asking = false;  // a caller is asking again
  };
  const std::shared_ptr<RunLookup> inner_;
  const std::shared_ptr<Clock> clock_;
  const absl::Duration fresh_for_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Answer> answers_ ABSL_GUARDED_BY(mu_);
};

// A follower asks once a second: a lookup that takes longer than 10 s is better retried than
// waited for.
inline constexpr ServiceClientOptions kRunLookupOptions{.deadline = absl::Seconds(10)};

// Over the run manager's gRPC API, authenticating with `system_key`.
std::shared_ptr<RunLookup> MakeGrpcRunLookup(std::shared_ptr<ChannelRef> channel,
                                             SystemCredential system_key,
                                             ServiceClientOptions options = kRunLookupOptions);

}  // namespace tessera::logs
