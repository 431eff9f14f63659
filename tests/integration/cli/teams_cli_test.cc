// mcli's team commands, the queue, usage and util against the fake services: what they send,
// what they print, and their usage errors.

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "tests/integration/cli/mcli_runner.h"

using namespace mcli_test;  // NOLINT: the fakes and the runner are this test's vocabulary

TEST_CASE("admin team commands send what was asked and print the team", "[cli][teams]") {
  FakeServer& server = Server();
  Result r = Mcli({"admin", "set-quota", "--team", "vision", "--cluster", "local", "--gpu-type",
                   "h100", "--gpus", "64"});
  INFO(r);
  REQUIRE(r.exit_code == 0);
  const auto quota = server.recorder.LastAs<v1::SetTeamQuotaRequest>("SetTeamQuota");
  CHECK(quota.team() == "vision");
  CHECK(quota.cluster() == "local");
  CHECK(quota.gpu_type() == "h100");
  CHECK(quota.gpus() == 64);
  CHECK_FALSE(quota.remove());
  CHECK_THAT(r.out, Catch::Contains("Members") && Catch::Contains("local=8"));

  r = Mcli({"admin", "set-quota", "--team", "vision", "--cluster", "local", "--remove"});
  REQUIRE(r.exit_code == 0);
  CHECK(server.recorder.LastAs<v1::SetTeamQuotaRequest>("SetTeamQuota").remove());

  // Neither --gpus nor --remove (or both): a usage error, nothing sent.
  const int calls = server.recorder.calls();
  r = Mcli({"admin", "set-quota", "--team", "vision", "--cluster", "local"});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("--gpus N or --remove"));
  CHECK(server.recorder.calls() == calls);

  r = Mcli({"admin", "add-user", "ann", "--team", "vision"});
  REQUIRE(r.exit_code == 0);
  const auto member = server.recorder.LastAs<v1::AddTeamMemberRequest>("AddTeamMember");
  CHECK(member.user() == "ann");
  CHECK(member.team() == "vision");

  r = Mcli({"get", "teams"});
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out,
             Catch::Contains("TEAM") && Catch::Contains("vision") && Catch::Contains("local=8"));
}

TEST_CASE("get usage prints GPU-hours as a table or CSV; util per cluster", "[cli][teams]") {
  FakeServer& server = Server();
  Result r = Mcli({"get", "usage", "--team", "vision", "--since", "2026-11-01", "-o", "csv"});
  INFO(r);
  REQUIRE(r.exit_code == 0);
  const auto request = server.recorder.LastAs<v1::GetUsageRequest>("GetUsage");
  CHECK(request.team() == "vision");
  CHECK(request.has_since());
  const std::vector<std::string> lines = absl::StrSplit(r.out, '\n', absl::SkipEmpty());
  REQUIRE(lines.size() == 2);
  CHECK(lines[0] == "day,cluster,team,user,outcome,gpu_hours,attempts");
  CHECK(lines[1] == "2026-11-20,local,vision,ann,completed,12.5,2");

  r = Mcli({"get", "usage"});
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("GPU-HOURS") && Catch::Contains("12.50") &&
                        Catch::Contains("Total: 12.50 GPU-hours"));

  r = Mcli({"util"});
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("IN USE") && Catch::Contains("local") && Catch::Contains("16"));

  r = Mcli({"get", "queue", "--cluster", "local"});
  REQUIRE(r.exit_code == 0);
  CHECK(server.recorder.LastAs<v1::GetQueueRequest>("GetQueue").cluster() == "local");
}
