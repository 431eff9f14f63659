#include "tests/support/submit_flood.h"

#include <grpcpp/grpcpp.h>

#include <chrono>

#include "absl/strings/str_cat.h"

namespace tessera::testing {

SubmitFlood::SubmitFlood(v1::RunService::Stub& runs, std::string key, int clients, int gpus)
    : runs_(runs), key_(std::move(key)), gpus_(gpus) {
  for (int c = 0; c < clients; ++c) clients_.emplace_back([this, c] { Client(c); });
}

SubmitFlood::~SubmitFlood() { Stop(); }

void SubmitFlood::Client(int client) {
  FloodCounts mine;
  for (int i = 0; flooding_.load(); ++i) {
    v1::SubmitRunRequest req;
    req.mutable_spec()->set_name(absl::StrCat("flood-", client, "-", i));
    req.mutable_spec()->set_command("python train.py");
    req.mutable_spec()->mutable_compute()->set_gpus(gpus_);
    req.mutable_spec()->mutable_compute()->set_cluster("local");
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + key_);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::SubmitRunResponse resp;
    const grpc::Status st = runs_.SubmitRun(&ctx, req, &resp);
    if (st.ok()) {
      ++mine.accepted;
    } else if (st.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      ++mine.refused;
    } else if (mine.failed++ == 0) {
      mine.first_failure = st.error_message();
    }
  }
  absl::MutexLock lock(&mu_);
  counts_.accepted += mine.accepted;
  counts_.refused += mine.refused;
  counts_.failed += mine.failed;
  if (counts_.first_failure.empty()) counts_.first_failure = mine.first_failure;
}

FloodCounts SubmitFlood::Stop() {
  flooding_ = false;
  for (auto& t : clients_) {
    if (t.joinable()) t.join();
  }
  absl::MutexLock lock(&mu_);
  return counts_;
}

}  // namespace tessera::testing
