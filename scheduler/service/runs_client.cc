#include "scheduler/service/runs_client.h"

namespace tessera::scheduler {
namespace {

constexpr int kRunsPage = 500;

class GrpcRunsClient final : public RunsClient {
 public:
  GrpcRunsClient(std::shared_ptr<ChannelRef> channel, SystemCredential key,
                 ServiceClientOptions options, store::FenceSource fence)
      : runs_(channel, key, "the run manager", options),
        secrets_(std::move(channel), std::move(key), "the run manager", options),
        fence_(std::move(fence)) {}

  absl::StatusOr<std::vector<v1::Run>> ListRuns(
      const std::vector<v1::RunStatus>& statuses) override {
    v1::ListRunsRequest req;
    for (auto s : statuses) req.mutable_filter()->add_statuses(s);
    // Lists carry no command, env or parameters: placement needs none, and a start takes them
    // from the run RecordAttempt returns.
    // In pages, so that no one reply (and no one database read) grows with the queue.
    req.set_page_size(kRunsPage);
    std::vector<v1::Run> runs;
    do {
      v1::ListRunsResponse resp;
      if (auto st = runs_.Call(&v1::RunService::Stub::ListRuns, req, &resp); !st.ok()) return st;
      for (auto& r : *resp.mutable_runs()) runs.push_back(std::move(r));
      req.set_page_token(resp.next_page_token());
    } while (!req.page_token().empty());
    return runs;
  }

  absl::StatusOr<v1::Run> RecordAttempt(const v1::Attempt& attempt) override {
    v1::RecordAttemptRequest req;
    *req.mutable_attempt() = attempt;
    if (fence_) {
      auto fence = fence_();
      if (!fence.ok()) return fence.status();  // not leading: nothing is sent
      if (fence->has_value()) req.set_leader_epoch((*fence)->epoch);
    }
    v1::RecordAttemptResponse resp;
    if (auto st = runs_.Call(&v1::RunService::Stub::RecordAttempt, req, &resp); !st.ok()) {
      return st;
    }
    return resp.run();
  }

  absl::Status ReportProgress(const v1::ReportProgressRequest& request) override {
    v1::ReportProgressResponse resp;
    return runs_.Call(&v1::RunService::Stub::ReportProgress, request, &resp);
  }

  absl::StatusOr<std::vector<v1::SecretValue>> RunSecrets(const std::string& run_id) override {
    v1::GetRunSecretsRequest req;
    req.set_run_id(run_id);
    v1::GetRunSecretsResponse resp;
    if (auto st = secrets_.Call(&v1::SecretService::Stub::GetRunSecrets, req, &resp); !st.ok()) {
      return st;
    }
    return std::vector<v1::SecretValue>(std::make_move_iterator(resp.mutable_secrets()->begin()),
                                        std::make_move_iterator(resp.mutable_secrets()->end()));
  }

  absl::Status RecordNote(const std::string& run_id, int resumption_index,
                          const std::string& note) override {
    v1::RecordAttemptRequest req;
    req.mutable_attempt()->set_run_id(run_id);
    req.mutable_attempt()->set_resumption_index(resumption_index);
    req.set_note(note);
    v1::RecordAttemptResponse resp;
    return runs_.Call(&v1::RunService::Stub::RecordAttempt, req, &resp);
  }

 private:
  SystemClient<v1::RunService> runs_;
  SystemClient<v1::SecretService> secrets_;
  const store::FenceSource fence_;
};

}  // namespace

std::shared_ptr<RunsClient> MakeGrpcRunsClient(std::shared_ptr<ChannelRef> channel,
                                               SystemCredential system_key,
                                               ServiceClientOptions options,
                                               store::FenceSource fence) {
  return std::make_shared<GrpcRunsClient>(std::move(channel), std::move(system_key), options,
                                          std::move(fence));
}

}  // namespace tessera::scheduler
