#include <grpcpp/grpcpp.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <string>

#include "tessera/v1/admin.grpc.pb.h"
#include "tessera/v1/logs.grpc.pb.h"
#include "transport/metrics/grpc_interceptor.h"
#include "transport/metrics/registry.h"
#include "transport/metrics/text_format.h"

namespace tessera::metrics {
namespace metrics_grpc_interceptor_test {

class FakeAdmin final : public tessera::v1::AdminService::Service {
 public:
  grpc::Status WhoAmI(grpc::ServerContext*, const tessera::v1::WhoAmIRequest*,
                      tessera::v1::WhoAmIResponse* response) override {
    response->set_user("alice");
    return grpc::Status::OK;
  }
  grpc::Status ListApiKeys(grpc::ServerContext*, const tessera::v1::ListApiKeysRequest*,
                           tessera::v1::ListApiKeysResponse*) override {
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "no such user");
  }
  // CreateApiKey is left to the generated base class: UNIMPLEMENTED.
};

class FakeLogs final : public tessera::v1::LogService::Service {
 public:
  grpc::Status GetLogs(grpc::ServerContext*, const tessera::v1::GetLogsRequest*,
                       grpc::ServerWriter<tessera::v1::LogLine>* writer) override {
    for (int i = 0; i < 3; ++i) {
      tessera::v1::LogLine line;
      line.set_sequence(i);
      writer->Write(line);
    }
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "after three lines");
  }
};

// Each reading moves time on by exactly 1 ms, so every (sequential) call takes 1 ms.
class SteppingClock {
 public:
  std::chrono::steady_clock::time_point Now() {
    return std::chrono::steady_clock::time_point{} + std::chrono::milliseconds(ticks_++);
  }

 private:
  std::atomic<int> ticks_{0};
};

struct TestServer {
  explicit TestServer(Registry& registry, SteppingClock& clock) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&admin);
    builder.RegisterService(&logs);
    const absl::Status added =
        AddMetricsInterceptor(builder, registry, [&clock] { return clock.Now(); });
    REQUIRE(added.ok());
    server = builder.BuildAndStart();
    REQUIRE(server != nullptr);
    REQUIRE(port != 0);
    channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                  grpc::InsecureChannelCredentials());
  }
  ~TestServer() { server->Shutdown(std::chrono::system_clock::now()); }

  FakeAdmin admin;
  FakeLogs logs;
  int port = 0;
  std::unique_ptr<grpc::Server> server;
  std::shared_ptr<grpc::Channel> channel;
};

const MetricSnapshot* Find(const std::vector<FamilySnapshot>& families, std::string_view name,
                           const std::vector<std::string>& labels) {
  for (const auto& f : families) {
    if (f.name != name) continue;
    for (const auto& m : f.metrics) {
      if (m.label_values == labels) return &m;
    }
  }
  return nullptr;
}

double CounterValue(const Registry& r, std::string_view name,
                    const std::vector<std::string>& labels) {
  const auto families = r.Collect();
  const MetricSnapshot* m = Find(families, name, labels);
  return m == nullptr ? -1 : m->value;
}

constexpr const char* kAdmin = "tessera.v1.AdminService";
constexpr const char* kLogs = "tessera.v1.LogService";

TEST_CASE("grpc interceptor: counts and times unary calls by method and code", "[metrics][grpc]") {
  Registry registry;
  SteppingClock clock;
  TestServer server(registry, clock);
  auto stub = tessera::v1::AdminService::NewStub(server.channel);

  for (int i = 0; i < 2; ++i) {
    grpc::ClientContext ctx;
    tessera::v1::WhoAmIResponse response;
    const grpc::Status status = stub->WhoAmI(&ctx, tessera::v1::WhoAmIRequest(), &response);
    REQUIRE(status.ok());
    CHECK(response.user() == "alice");
  }
  {
    grpc::ClientContext ctx;
    tessera::v1::ListApiKeysResponse response;
    CHECK(stub->ListApiKeys(&ctx, tessera::v1::ListApiKeysRequest(), &response).error_code() ==
          grpc::StatusCode::NOT_FOUND);
  }
  {
    grpc::ClientContext ctx;
    tessera::v1::CreateApiKeyResponse response;
    CHECK(stub->CreateApiKey(&ctx, tessera::v1::CreateApiKeyRequest(), &response).error_code() ==
          grpc::StatusCode::UNIMPLEMENTED);
  }

  CHECK(CounterValue(registry, kGrpcStartedTotal, {kAdmin, "WhoAmI"}) == 2);
  CHECK(CounterValue(registry, kGrpcStartedTotal, {kAdmin, "ListApiKeys"}) == 1);
  CHECK(CounterValue(registry, kGrpcHandledTotal, {kAdmin, "WhoAmI", "OK"}) == 2);
  CHECK(CounterValue(registry, kGrpcHandledTotal, {kAdmin, "ListApiKeys", "NOT_FOUND"}) == 1);
  CHECK(CounterValue(registry, kGrpcHandledTotal, {kAdmin, "CreateApiKey", "UNIMPLEMENTED"}) == 1);
  CHECK(CounterValue(registry, kGrpcHandledTotal, {kAdmin, "WhoAmI", "NOT_FOUND"}) == -1);

  const auto families = registry.Collect();
  const MetricSnapshot* who = Find(families, kGrpcHandlingSeconds, {kAdmin, "WhoAmI"});
  REQUIRE(who != nullptr);
  CHECK(who->count == 2);
  CHECK(who->sum == Approx(0.002).margin(1e-12));
  // Buckets 0.0005, 0.001, ...: both 1 ms calls fall in le="0.001".
  CHECK(who->cumulative_counts.size() == 15);
  CHECK(who->cumulative_counts[0] == 0);
  CHECK(who->cumulative_counts[1] == 2);
  CHECK(who->cumulative_counts.back() == 2);

  const std::string text = RenderText(registry);
  CHECK_THAT(text, Catch::Contains("tessera_grpc_server_handled_total{grpc_service=\"tessera.v1."
                                   "AdminService\",grpc_method=\"WhoAmI\",grpc_code=\"OK\"} 2\n"));
  CHECK_THAT(text, Catch::Contains("tessera_grpc_server_handling_seconds_bucket{grpc_service="
                                   "\"tessera.v1.AdminService\",grpc_method=\"WhoAmI\",le=\"10\"} "
                                   "2\n"));
  CHECK_THAT(text, Catch::Contains("tessera_grpc_server_handling_seconds_count{grpc_service="
                                   "\"tessera.v1.AdminService\",grpc_method=\"WhoAmI\"} 2\n"));
}

TEST_CASE("grpc interceptor: a server-streaming call is handled when its status is sent",
          "[metrics][grpc]") {
  Registry registry;
  SteppingClock clock;
  TestServer server(registry, clock);
  auto stub = tessera::v1::LogService::NewStub(server.channel);

  grpc::ClientContext ctx;
  auto reader = stub->GetLogs(&ctx, tessera::v1::GetLogsRequest());
  tessera::v1::LogLine line;
  int lines = 0;
  while (reader->Read(&line)) ++lines;
  CHECK(lines == 3);
  CHECK(reader->Finish().error_code() == grpc::StatusCode::UNAUTHENTICATED);

  CHECK(CounterValue(registry, kGrpcStartedTotal, {kLogs, "GetLogs"}) == 1);
  CHECK(CounterValue(registry, kGrpcHandledTotal, {kLogs, "GetLogs", "UNAUTHENTICATED"}) == 1);
  const auto families = registry.Collect();
  const MetricSnapshot* h = Find(families, kGrpcHandlingSeconds, {kLogs, "GetLogs"});
  REQUIRE(h != nullptr);
  CHECK(h->count == 1);
}

TEST_CASE("grpc interceptor: one registry serves several servers, conflicts are errors",
          "[metrics][grpc]") {
  Registry registry;
  CHECK(MakeMetricsInterceptorFactory(registry).ok());
  CHECK(MakeMetricsInterceptorFactory(registry).ok());

  Registry taken;
  REQUIRE(taken.AddGauge(std::string(kGrpcHandledTotal), "someone else's").ok());
  grpc::ServerBuilder builder;
  const absl::Status status = AddMetricsInterceptor(builder, taken);
  CHECK(status.code() == absl::StatusCode::kAlreadyExists);
}

TEST_CASE("grpc interceptor: canonical code names", "[metrics][grpc]") {
  CHECK(GrpcCodeName(grpc::StatusCode::OK) == "OK");
  CHECK(GrpcCodeName(grpc::StatusCode::NOT_FOUND) == "NOT_FOUND");
  CHECK(GrpcCodeName(grpc::StatusCode::UNAUTHENTICATED) == "UNAUTHENTICATED");
  CHECK(GrpcCodeName(grpc::StatusCode::DEADLINE_EXCEEDED) == "DEADLINE_EXCEEDED");
  CHECK(GrpcCodeName(static_cast<grpc::StatusCode>(99)) == "UNKNOWN");
}

}  // namespace metrics_grpc_interceptor_test
}  // namespace tessera::metrics
