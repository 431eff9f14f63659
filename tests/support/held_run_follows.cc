#include "tests/support/held_run_follows.h"

#include <grpcpp/grpcpp.h>

#include <chrono>

#include "absl/strings/str_cat.h"

namespace tessera::testing {
namespace {

// Under the gateway's default --max-connections-per-address (1,000).
constexpr int kPerAddress = 900;

// Generous: opening is not what is measured.
absl::Duration OpeningTime(int count) {
  return absl::Seconds(120) + count * absl::Milliseconds(20);
}

}  // namespace

absl::StatusOr<std::unique_ptr<SseFollowers>> FollowHeldRun(
    v1::RunService::Stub& runs, const std::string& api_key, const std::string& spec_name, int gpus,
    int http_port, int count, const std::function<double()>& following) {
  const auto ctx = [&] {
    auto c = std::make_unique<grpc::ClientContext>();
    c->AddMetadata("authorization", "Bearer " + api_key);
    c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    return c;
  };
  v1::SubmitRunRequest req;
  req.mutable_spec()->set_name(spec_name);
  req.mutable_spec()->set_command("python train.py");
  req.mutable_spec()->mutable_compute()->set_gpus(gpus);
  req.mutable_spec()->mutable_compute()->set_cluster("local");
  v1::SubmitRunResponse resp;
  if (const grpc::Status st = runs.SubmitRun(ctx().get(), req, &resp); !st.ok()) {
    return absl::InternalError(absl::StrCat("submit the followed run: ", st.error_message()));
  }
  const std::string followed = resp.run().name();
  for (const absl::Time until = absl::Now() + absl::Seconds(60);;) {
    v1::GetRunRequest get;
    get.set_name(followed);
    v1::GetRunResponse got;
    if (runs.GetRun(ctx().get(), get, &got).ok() && got.run().status() == v1::RUN_STATUS_RUNNING) {
      break;
    }
    if (absl::Now() > until) return absl::DeadlineExceededError("the followed run never ran");
    absl::SleepFor(absl::Milliseconds(100));
  }
  auto follows =
      SseFollowers::Open(http_port, absl::StrCat("/api/v1/runs/", followed, "/logs?follow=true"),
                         api_key, count, kPerAddress, OpeningTime(count));
  if (!follows.ok()) return follows.status();
  for (const absl::Time until = absl::Now() + absl::Seconds(300);;) {
    const double now_following = following();
    if (now_following >= count) break;
    if (absl::Now() > until) {
      return absl::DeadlineExceededError(
          absl::StrCat("only ", now_following, " of ", count, " follows following after 300 s"));
    }
    absl::SleepFor(absl::Milliseconds(500));
  }
  return follows;
}

absl::StatusOr<std::unique_ptr<SseFollowers>> WatchRunChanges(int http_port,
                                                              const std::string& api_key,
                                                              int count) {
  return SseFollowers::Open(http_port, "/api/v1/runs/watch", api_key, count, kPerAddress,
                            OpeningTime(count));
}

}  // namespace tessera::testing
