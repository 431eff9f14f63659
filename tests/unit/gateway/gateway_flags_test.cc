#include "services/gateway/gateway_flags.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace tessera::gateway {
namespace gateway_flags_test {

// tessera-gateway's flags as its command line gives them, checked and resolved.
absl::StatusOr<GatewaySetup> Resolve(std::vector<std::string> args) {
  CLI::App app;
  GatewayFlags flags;
  AddGatewayFlags(app, flags);
  std::reverse(args.begin(), args.end());  // CLI11 takes a vector last argument first
  app.parse(args);
  return FinishGatewayFlags(flags);
}

TEST_CASE("tessera-gateway's flags resolve to the gateway main starts") {
  auto setup =
      Resolve({"--plaintext", "--listen", "127.0.0.1:0", "--upstream",
               "127.0.0.1:7001,127.0.0.1:7002", "--max-connections", "5",
               "--max-connections-per-address", "2", "--handler-threads", "3", "--upstream-timeout",
               "4", "--request-timeout-seconds", "2.5", "--metrics-listen", "127.0.0.1:9999"});
  REQUIRE(setup.ok());
  CHECK(setup->listen_host == "127.0.0.1");
  CHECK(setup->listen_port == 0);
  CHECK(setup->upstream_target == "ipv4:127.0.0.1:7001,127.0.0.1:7002");
  CHECK_FALSE(setup->logs_target.has_value());  // the logs go over the upstream channel
  CHECK(setup->metrics_host == "127.0.0.1");
  CHECK(setup->metrics_port == 9999);
  CHECK(setup->https == nullptr);
  CHECK(setup->options.max_connections == 5);
  CHECK(setup->options.max_connections_per_address == 2);
  CHECK(setup->options.handler_threads == 3);
  CHECK(setup->options.upstream_timeout == std::chrono::seconds(4));
  CHECK(setup->options.limits.request_timeout == std::chrono::milliseconds(2500));
}

TEST_CASE("a log service apart from the API gets its own target") {
  auto setup =
      Resolve({"--plaintext", "--upstream", "127.0.0.1:7001", "--logs-endpoint", "127.0.0.1:7010"});
  REQUIRE(setup.ok());
  CHECK(setup->upstream_target == "127.0.0.1:7001");
  REQUIRE(setup->logs_target.has_value());
  CHECK(*setup->logs_target == "127.0.0.1:7010");
}

TEST_CASE("a bad gateway flag is one error that names it") {
  struct Case {
    std::vector<std::string> args;
    std::string names;
  };
  const std::vector<Case> cases = {
      {{"--plaintext", "--listen", "nowhere"}, "--listen"},
      {{"--plaintext", "--upstream", "127.0.0.1:1,db.example:2"}, "--upstream"},
      {{"--plaintext", "--logs-endpoint", "logs"}, "--logs-endpoint"},
      {{"--plaintext", "--metrics-listen", "9465"}, "--metrics-listen"},
      {{"--plaintext", "--log-level", "loud"}, "loud"},
      // Plain text only where nothing crosses a network.
      {{"--plaintext", "--listen", "0.0.0.0:8080"}, "--listen"},
      // TLS (the default) needs its files.
      {{}, "--tls-"},
  };
  for (const auto& c : cases) {
    INFO(c.names);
    auto setup = Resolve(c.args);
    REQUIRE_FALSE(setup.ok());
    CHECK(setup.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(setup.status().message()), Catch::Contains(c.names));
  }
}

}  // namespace gateway_flags_test
}  // namespace tessera::gateway
