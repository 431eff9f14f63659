// Endpoint lists: one endpoint as given, several IP endpoints as gRPC's static address list, and
// one clear error for lists gRPC cannot fail over across.
#include "transport/endpoints.h"

#include <catch2/catch.hpp>

#include "absl/strings/match.h"

namespace tessera {
namespace endpoints_test {

TEST_CASE("endpoints: lists split on commas, trimmed, empty entries skipped") {
  CHECK(SplitEndpoints("a:1") == std::vector<std::string>{"a:1"});
  CHECK(SplitEndpoints(" 10.0.0.1:5, ,10.0.0.2:5 ,") ==
        std::vector<std::string>{"10.0.0.1:5", "10.0.0.2:5"});
  CHECK(SplitEndpoints(" , ").empty());
}

TEST_CASE("endpoints: one endpoint is its own target, several IPs become a static list") {
  CHECK(*GrpcTarget("--x", "scheduler.example:50051") == "scheduler.example:50051");
  CHECK(*GrpcTarget("--x", "127.0.0.1:1, 127.0.0.1:2") == "ipv4:127.0.0.1:1,127.0.0.1:2");
  CHECK(*GrpcTarget("--x", "[::1]:1,[fe80::1]:2") == "ipv6:[::1]:1,[fe80::1]:2");
}

TEST_CASE("endpoints: names or mixed families in a list, and empty lists, are refused by flag") {
  auto names = GrpcTarget("--upstream", "a.example:1,b.example:1");
  REQUIRE(absl::IsInvalidArgument(names.status()));
  CHECK(absl::StrContains(names.status().message(), "--upstream: \"a.example:1\""));
  CHECK(absl::StrContains(names.status().message(), "one DNS name"));
  CHECK(absl::IsInvalidArgument(GrpcTarget("--x", "127.0.0.1:1,[::1]:2").status()));
  CHECK(absl::IsInvalidArgument(GrpcTarget("--x", "127.0.0.1,127.0.0.2:1").status()));
  auto empty = GrpcTarget("--scheduler-endpoint", " , ");
  REQUIRE(absl::IsInvalidArgument(empty.status()));
  CHECK(absl::StrContains(empty.status().message(), "--scheduler-endpoint: no endpoint"));
}

}  // namespace endpoints_test
}  // namespace tessera
