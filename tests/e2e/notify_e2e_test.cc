// Webhooks as a user and an operator use them: mcli subscribes them, the real tessera-server
// (PostgreSQL, a worker) plans and delivers, a receiver on loopback gets Slack-style bodies, and
// `mcli get notifications` shows what was delivered.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "tests/support/http_test_server.h"
#include "tests/support/local_cluster.h"
#include "tests/support/poll_until.h"

namespace tessera::testing {
namespace notify_e2e_test {

struct Receiver {
  absl::Mutex mu;
  std::vector<std::string> texts ABSL_GUARDED_BY(mu);
  HttpTestServer server{[this](const HttpTestRequest& r) {
    const auto body = nlohmann::json::parse(r.body, nullptr, false);
    absl::MutexLock lock(&mu);
    texts.push_back(body.is_object() && body.contains("text") ? body["text"].get<std::string>()
                                                              : "not a Slack body: " + r.body);
    return HttpTestResponse{};
  }};
  // Waits until a text containing `what` arrived (or fails the test after `timeout`).
  std::string WaitFor(const std::string& what, absl::Duration timeout) {
    std::string found;
    const bool arrived = PollUntil(
        [&] {
          absl::MutexLock lock(&mu);
          for (const auto& t : texts) {
            if (!absl::StrContains(t, what)) continue;
            found = t;
            return true;
          }
          return false;
        },
        timeout, absl::Milliseconds(50));
    if (arrived) return found;
    absl::MutexLock lock(&mu);
    FAIL("no notification with \"" << what << "\" within " << timeout << "; got " << texts.size());
    return "";
  }
};

TEST_CASE("a failed run and a cordoned node reach their webhooks, and mcli shows the deliveries") {
  Receiver receiver;
  LocalCluster c;
  c.StartWorker("node-1", 1);
  const std::string url = receiver.server.url() + "/slack";

  // A clear refusal, naming the field: notifications do not cross a network in clear.
  ShellResult refused = c.Mcli("create webhook http://hooks.example.com/x");
  CHECK(refused.exit_code != 0);
  CHECK(absl::StrContains(refused.output, "url: http:// only to a loopback address"));

  ShellResult mine = c.Mcli("create webhook " + url + " --events failed,completed");
  INFO(mine.output);
  REQUIRE(mine.exit_code == 0);
  const std::string id(absl::StripSuffix(
      absl::StripPrefix(absl::StripAsciiWhitespace(mine.output), "Webhook "), " created"));
  ShellResult nodes = c.Mcli("create webhook " + url + " --nodes");
  REQUIRE(nodes.exit_code == 0);
  ShellResult listed = c.Mcli("get webhooks");
  CHECK(absl::StrContains(listed.output, id));
  CHECK(absl::StrContains(listed.output, "failed,completed"));
  CHECK(absl::StrContains(listed.output, "cordoned,returned"));

  // The time a run takes to be placed, started and to fail here bounds nothing: the receiver
  // waits for the run's own end, then for the notification within the notifier's passes.
  const v1::Run doomed = c.Submit("doomed", "exit 3", 1, 1);
  c.client->WaitForStatus(doomed.name(), v1::RUN_STATUS_FAILED, absl::Seconds(60));
  const absl::Time ended = absl::Now();
  const std::string failed = receiver.WaitFor("failed", absl::Seconds(30));
  std::printf("the failure notice arrived %.2f s after the run was seen FAILED\n",
              absl::ToDoubleSeconds(absl::Now() - ended));
  CHECK(absl::StartsWith(failed, "Run " + doomed.name() + " failed"));

  ShellResult cordon = c.Mcli("cordon node-1 --reason 'xid 79'");
  REQUIRE(cordon.exit_code == 0);
  CHECK(receiver.WaitFor("cordoned", absl::Seconds(30)) == "Node node-1 cordoned: xid 79");
  REQUIRE(c.Mcli("uncordon node-1").exit_code == 0);
  CHECK(absl::StrContains(receiver.WaitFor("returned", absl::Seconds(30)),
                          "Node node-1 returned to service"));

  // The record: delivered, once each.
  ShellResult record = c.Mcli("get notifications --webhook " + id);
  INFO(record.output);
  CHECK(absl::StrContains(record.output, "DELIVERED"));
  CHECK(absl::StrContains(record.output, "run/" + doomed.name()));
  ShellResult json = c.Mcli("get notifications -o json");
  const auto all = nlohmann::json::parse(json.output);
  REQUIRE(all.is_array());
  CHECK(all.size() == 3);
  for (const auto& n : all) CHECK(n.at("state") == "NOTIFICATION_STATE_DELIVERED");
  {
    absl::MutexLock lock(&receiver.mu);
    CHECK(receiver.texts.size() == 3);  // none twice
  }
  REQUIRE(c.Mcli("delete webhook " + id).exit_code == 0);
  CHECK_FALSE(absl::StrContains(c.Mcli("get webhooks").output, id));
}

}  // namespace notify_e2e_test
}  // namespace tessera::testing
