// Each route reaches the right RPC with the right fields (path, query, body, Idempotency-Key),
// forwards Authorization, and answers the RPC's response as JSON.
#include "tests/unit/gateway/gateway_fixture.h"

namespace tessera::gateway::testing {
namespace gateway_routes_test {

TEST_CASE("POST /api/v1/runs submits the body with the Idempotency-Key header", "[gateway]") {
  GatewayFixture f;
  const HttpResult r = f.Send("POST", "/api/v1/runs",
                              R"({"spec": {"name": "train", "command": "python train.py",
                                  "compute": {"gpus": 8, "gpu_type": "h100"},
                                  "scheduling": {"priority": "PRIORITY_HIGH"}}})",
                              kGoodAuth, {{"Idempotency-Key", "ci-build-42"}});
  INFO(r.body);
  REQUIRE(r.status == 200);
  CHECK(r.headers.at("content-type") == "application/json");
  const auto req = f.rec.LastAs<v1::SubmitRunRequest>("SubmitRun");
  CHECK(req.idempotency_key() == "ci-build-42");
  CHECK(req.spec().name() == "train");
  CHECK(req.spec().command() == "python train.py");
  CHECK(req.spec().compute().gpus() == 8);
  CHECK(req.spec().scheduling().priority() == v1::PRIORITY_HIGH);
  CHECK(f.rec.Last().authorization == kGoodAuth);
  const auto json = r.Json();
  CHECK(json["run"]["name"] == "train-abc1");
  CHECK(json["run"]["status"] == "RUN_STATUS_PENDING");  // enums by name
  CHECK(json["run"].contains("resumption_index"));       // snake_case, defaults printed
}

TEST_CASE("the Idempotency-Key header and the body must agree", "[gateway]") {
  GatewayFixture f;
  SECTION("the same key in both is fine") {
    const HttpResult r = f.Send("POST", "/api/v1/runs", R"({"idempotency_key": "k1"})", kGoodAuth,
                                {{"Idempotency-Key", "k1"}});
    CHECK(r.status == 200);
  }
  SECTION("different keys are a 400 naming the header") {
    const HttpResult r = f.Send("POST", "/api/v1/runs", R"({"idempotency_key": "k1"})", kGoodAuth,
                                {{"Idempotency-Key", "k2"}});
    CHECK(r.status == 400);
    CHECK_THAT(r.ErrorMessage(), Catch::Contains("Idempotency-Key"));
    CHECK(f.rec.count() == 0);
  }
  SECTION("a key with control characters is a 400") {
    const HttpResult r =
        f.Send("POST", "/api/v1/runs", "{}", kGoodAuth, {{"Idempotency-Key", "a\tb"}});
    CHECK(r.status == 400);
    CHECK_THAT(r.ErrorMessage(), Catch::Contains("Idempotency-Key"));
  }
}

TEST_CASE("GET /api/v1/runs maps every query parameter into the filter", "[gateway]") {
  GatewayFixture f;
  const HttpResult r =
      f.Send("GET",
             "/api/v1/runs?name=train-*&name=eval-%2A&status=RUNNING&status=RUN_STATUS_QUEUED"
             "&status=failed&user=alice&cluster=c1&gpu_type=h100&before=2024-05-01T12:00:00Z"
             "&after=2024-04-01T00:00:00.5%2B02:00&limit=10&latest=true"
             "&metadata=team%3Dnlp&metadata=note=a%3Db");
  INFO(r.body);
  REQUIRE(r.status == 200);
  const auto filter = f.rec.LastAs<v1::ListRunsRequest>("ListRuns").filter();
  REQUIRE(filter.name_globs_size() == 2);
  CHECK(filter.name_globs(0) == "train-*");
  CHECK(filter.name_globs(1) == "eval-*");
  REQUIRE(filter.statuses_size() == 3);
  CHECK(filter.statuses(0) == v1::RUN_STATUS_RUNNING);
  CHECK(filter.statuses(1) == v1::RUN_STATUS_QUEUED);
  CHECK(filter.statuses(2) == v1::RUN_STATUS_FAILED);
  CHECK(filter.user() == "alice");
  CHECK(filter.cluster() == "c1");
  CHECK(filter.gpu_type() == "h100");
  CHECK(filter.created_before().seconds() == 1714564800);
  CHECK(filter.created_after().seconds() == 1711922400);
  CHECK(filter.created_after().nanos() == 500000000);
  CHECK(filter.limit() == 10);
  CHECK(filter.latest());
  REQUIRE(filter.metadata_size() == 2);
  CHECK(filter.metadata().at("team") == "nlp");
  CHECK(filter.metadata().at("note") == "a=b");  // split at the first '='
  const auto json = r.Json();
  REQUIRE(json["runs"].size() == 2);
  CHECK(json["runs"][1]["name"] == "b");
}

TEST_CASE("run routes bind {name} and their bodies", "[gateway]") {
  GatewayFixture f;
  SECTION("get") {
    const HttpResult r = f.Send("GET", "/api/v1/runs/train-1");
    REQUIRE(r.status == 200);
    CHECK(f.rec.LastAs<v1::GetRunRequest>("GetRun").name() == "train-1");
    CHECK(r.Json()["run"]["version"] == "1234567890123");  // int64 as a string
  }
  SECTION("describe") {
    const HttpResult r = f.Send("GET", "/api/v1/runs/train-1/describe");
    REQUIRE(r.status == 200);
    CHECK(f.rec.LastAs<v1::DescribeRunRequest>("DescribeRun").name() == "train-1");
    CHECK(r.Json()["description"]["goodput"] == 0.5);
  }
  SECTION("metrics, of every attempt or of one") {
    HttpResult r = f.Send("GET", "/api/v1/runs/train-1/metrics");
    INFO(r.body);
    REQUIRE(r.status == 200);
    auto req = f.rec.LastAs<v1::GetRunMetricsRequest>("GetRunMetrics");
    CHECK(req.name() == "train-1");
    CHECK_FALSE(req.has_resumption_index());
    const auto json = r.Json();
    REQUIRE(json["points"].size() == 3);
    CHECK(json["points"][0]["step"] == "10");
    CHECK(json["points"][1]["loss"] == 2.25);
    CHECK(json["points"][2]["loss"] == "NaN");
    CHECK(json["attempts"][0]["end_reason"] == "ATTEMPT_END_REASON_NODE_FAILURE");
    r = f.Send("GET", "/api/v1/runs/train-1/metrics?resumption=0");
    REQUIRE(r.status == 200);
    req = f.rec.LastAs<v1::GetRunMetricsRequest>("GetRunMetrics");
    REQUIRE(req.has_resumption_index());
    CHECK(req.resumption_index() == 0);
    r = f.Send("GET", "/api/v1/runs/train-1/metrics?resumption=first");
    CHECK(r.status == 400);
    CHECK_THAT(r.ErrorMessage(), Catch::Contains("resumption"));
    CHECK(f.Send("GET", "/api/v1/runs/nope/metrics").status == 404);
  }
  SECTION("stop with a reason") {
    const HttpResult r = f.Send("POST", "/api/v1/runs/train-1/stop", R"({"reason": "done"})",
                                kGoodAuth, {{"Idempotency-Key", "stop-1"}});
    REQUIRE(r.status == 200);
    const auto req = f.rec.LastAs<v1::StopRunRequest>("StopRun");
    CHECK(req.name() == "train-1");
    CHECK(req.reason() == "done");
    CHECK(req.idempotency_key() == "stop-1");
    CHECK(r.Json()["run"]["stop_requested"] == true);
  }
  SECTION("stop without a body") {
    REQUIRE(f.Send("POST", "/api/v1/runs/train-1/stop").status == 200);
    CHECK(f.rec.LastAs<v1::StopRunRequest>("StopRun").name() == "train-1");
  }
  SECTION("delete") {
    const HttpResult r =
        f.Send("DELETE", "/api/v1/runs/train-1", "", kGoodAuth, {{"Idempotency-Key", "d1"}});
    REQUIRE(r.status == 200);
    const auto req = f.rec.LastAs<v1::DeleteRunRequest>("DeleteRun");
    CHECK(req.name() == "train-1");
    CHECK(req.idempotency_key() == "d1");
    CHECK(r.Json() == nlohmann::json::object());
  }
  SECTION("patch") {
    const HttpResult r =
        f.Send("PATCH", "/api/v1/runs/train-1",
               R"({"priority": "PRIORITY_LOW", "preemptible": false, "max_duration_hours": 2.5})");
    INFO(r.body);
    REQUIRE(r.status == 200);
    const auto req = f.rec.LastAs<v1::UpdateRunRequest>("UpdateRun");
    CHECK(req.name() == "train-1");
    REQUIRE(req.has_priority());
    CHECK(req.priority() == v1::PRIORITY_LOW);
    REQUIRE(req.has_preemptible());  // explicit false is kept (proto3 optional)
    CHECK_FALSE(req.preemptible());
    CHECK(req.max_duration_hours() == 2.5);
  }
  SECTION("restart") {
    REQUIRE(f.Send("POST", "/api/v1/runs/train-1/restart").status == 200);
    CHECK(f.rec.LastAs<v1::RestartRunRequest>("RestartRun").name() == "train-1");
  }
  SECTION("clone with a new name") {
    const HttpResult r = f.Send("POST", "/api/v1/runs/train-1/clone", R"({"new_name": "train-2"})");
    REQUIRE(r.status == 200);
    const auto req = f.rec.LastAs<v1::CloneRunRequest>("CloneRun");
    CHECK(req.name() == "train-1");
    CHECK(req.new_name() == "train-2");
    CHECK(r.Json()["run"]["name"] == "train-2");
  }
  SECTION("a body naming another run than the path is a 400") {
    const HttpResult r = f.Send("POST", "/api/v1/runs/train-1/stop", R"({"name": "train-9"})");
    CHECK(r.status == 400);
    CHECK_THAT(r.ErrorMessage(), Catch::Contains("name"));
    CHECK(f.rec.count() == 0);
  }
  SECTION("a run named watch is reachable below its name") {
    REQUIRE(f.Send("GET", "/api/v1/runs/watch/describe").status == 200);
    CHECK(f.rec.LastAs<v1::DescribeRunRequest>("DescribeRun").name() == "watch");
    REQUIRE(f.Send("DELETE", "/api/v1/runs/watch").status == 200);
    CHECK(f.rec.LastAs<v1::DeleteRunRequest>("DeleteRun").name() == "watch");
  }
}

TEST_CASE("node routes", "[gateway]") {
  GatewayFixture f;
  SECTION("list with filters") {
    const HttpResult r =
        f.Send("GET",
               "/api/v1/nodes?cluster=c1&gpu_type=a100&liveness=ONLINE&admin_state=CORDONED"
               "&admin_state=NODE_ADMIN_STATE_DRAINING&name=n1&name=n2&limit=5");
    INFO(r.body);
    REQUIRE(r.status == 200);
    const auto filter = f.rec.LastAs<v1::ListNodesRequest>("ListNodes").filter();
    CHECK(filter.cluster() == "c1");
    CHECK(filter.gpu_type() == "a100");
    REQUIRE(filter.liveness_size() == 1);
    CHECK(filter.liveness(0) == v1::NODE_LIVENESS_ONLINE);
    REQUIRE(filter.admin_states_size() == 2);
    CHECK(filter.admin_states(1) == v1::NODE_ADMIN_STATE_DRAINING);
    CHECK(filter.names_size() == 2);
    CHECK(filter.limit() == 5);
    CHECK(r.Json()["nodes"][0]["name"] == "node-1");
  }
  SECTION("get") {
    const HttpResult r = f.Send("GET", "/api/v1/nodes/gpu-node.rack1_07");
    REQUIRE(r.status == 200);
    CHECK(f.rec.LastAs<v1::GetNodeRequest>("GetNode").name() == "gpu-node.rack1_07");
    CHECK(r.Json()["run_names"][0] == "train-1");
  }
  SECTION("cordon with reason and evidence") {
    const HttpResult r = f.Send(
        "POST", "/api/v1/nodes/node-3/cordon",
        R"({"reason": "slow all-reduce", "evidence": {"busbw_gbps": 12.5, "peers": [1, 2]}})",
        kGoodAuth, {{"Idempotency-Key", "c-1"}});
    INFO(r.body);
    REQUIRE(r.status == 200);
    const auto req = f.rec.LastAs<v1::CordonNodeRequest>("CordonNode");
    CHECK(req.node_name() == "node-3");
    CHECK(req.reason() == "slow all-reduce");
    CHECK(req.idempotency_key() == "c-1");
    CHECK(req.evidence().fields().at("busbw_gbps").number_value() == 12.5);
    CHECK(r.Json()["node"]["admin_state"] == "NODE_ADMIN_STATE_CORDONED");
  }
  SECTION("uncordon") {
    REQUIRE(f.Send("POST", "/api/v1/nodes/node-3/uncordon", R"({"reason": "fixed"})").status ==
            200);
    const auto req = f.rec.LastAs<v1::UncordonNodeRequest>("UncordonNode");
    CHECK(req.node_name() == "node-3");
    CHECK(req.reason() == "fixed");
  }
  SECTION("drain") {
    REQUIRE(f.Send("POST", "/api/v1/nodes/node-3/drain").status == 200);
    CHECK(f.rec.LastAs<v1::DrainNodeRequest>("DrainNode").node_name() == "node-3");
  }
  SECTION("events, not followed") {
    const HttpResult r =
        f.Send("GET", "/api/v1/events?node=node-1&type=CORDONED&after_id=41&limit=3");
    REQUIRE(r.status == 200);
    const auto filter = f.rec.LastAs<v1::ListNodeEventsRequest>("ListNodeEvents").filter();
    CHECK(filter.node_names(0) == "node-1");
    CHECK(filter.types(0) == v1::NODE_EVENT_TYPE_CORDONED);
    CHECK(filter.after_id() == 41);
    CHECK(filter.limit() == 3);
    CHECK(r.Json()["events"][0]["id"] == "7");
  }
  SECTION("queue") {
    const HttpResult r = f.Send("GET", "/api/v1/queue?cluster=c1&limit=2");
    REQUIRE(r.status == 200);
    const auto req = f.rec.LastAs<v1::GetQueueRequest>("GetQueue");
    CHECK(req.cluster() == "c1");
    CHECK(req.limit() == 2);
    CHECK(r.Json()["entries"][0]["waiting_reason"] == "needs 4 nodes");
  }
}

TEST_CASE("health routes", "[gateway]") {
  GatewayFixture f;
  SECTION("start a sweep") {
    const HttpResult r =
        f.Send("POST", "/api/v1/health/sweeps",
               R"({"node_names": ["n1", "n2"], "trigger": "SWEEP_TRIGGER_ON_DEMAND"})");
    REQUIRE(r.status == 200);
    const auto req = f.rec.LastAs<v1::StartSweepRequest>("StartSweep");
    CHECK(req.node_names_size() == 2);
    CHECK(req.trigger() == v1::SWEEP_TRIGGER_ON_DEMAND);
    CHECK(r.Json()["sweep"]["state"] == "SWEEP_STATE_RUNNING");
  }
  SECTION("list sweeps") {
    REQUIRE(f.Send("GET", "/api/v1/health/sweeps?limit=4").status == 200);
    CHECK(f.rec.LastAs<v1::ListSweepsRequest>("ListSweeps").limit() == 4);
  }
  SECTION("get a sweep") {
    const HttpResult r = f.Send("GET", "/api/v1/health/sweeps/0b7c-11ef:9");
    REQUIRE(r.status == 200);
    CHECK(f.rec.LastAs<v1::GetSweepRequest>("GetSweep").id() == "0b7c-11ef:9");
  }
  SECTION("results") {
    REQUIRE(f.Send("GET", "/api/v1/health/results?node=n1&sweep_id=s1&limit=9").status == 200);
    const auto req = f.rec.LastAs<v1::ListHealthResultsRequest>("ListHealthResults");
    CHECK(req.node_names(0) == "n1");
    CHECK(req.sweep_id() == "s1");
    CHECK(req.limit() == 9);
  }
}

TEST_CASE("admin routes", "[gateway]") {
  GatewayFixture f;
  SECTION("whoami") {
    const HttpResult r = f.Send("GET", "/api/v1/whoami");
    REQUIRE(r.status == 200);
    CHECK(f.rec.Last().method == "WhoAmI");
    CHECK(r.Json()["user"] == "alice");
    CHECK(r.Json()["role"] == "ROLE_ADMIN");
  }
  SECTION("create a key") {
    const HttpResult r = f.Send("POST", "/api/v1/admin/api-keys",
                                R"({"user": "bob", "role": "ROLE_USER", "description": "ci"})");
    REQUIRE(r.status == 200);
    const auto req = f.rec.LastAs<v1::CreateApiKeyRequest>("CreateApiKey");
    CHECK(req.user() == "bob");
    CHECK(req.role() == v1::ROLE_USER);
    CHECK(r.Json()["secret"] == "s3cret");
  }
  SECTION("list keys") {
    REQUIRE(f.Send("GET", "/api/v1/admin/api-keys?user=bob").status == 200);
    CHECK(f.rec.LastAs<v1::ListApiKeysRequest>("ListApiKeys").user() == "bob");
  }
  SECTION("revoke a key") {
    REQUIRE(f.Send("DELETE", "/api/v1/admin/api-keys/key-1").status == 200);
    CHECK(f.rec.LastAs<v1::RevokeApiKeyRequest>("RevokeApiKey").id() == "key-1");
  }
  SECTION("join tokens") {
    HttpResult r = f.Send("POST", "/api/v1/admin/join-tokens",
                          R"({"node": "gpu-9", "expires_in_seconds": 600})", kGoodAuth,
                          {{"Idempotency-Key", "t-1"}});
    REQUIRE(r.status == 200);
    const auto req = f.rec.LastAs<v1::CreateJoinTokenRequest>("CreateJoinToken");
    CHECK(req.node() == "gpu-9");
    CHECK(req.expires_in_seconds() == 600);
    CHECK(req.idempotency_key() == "t-1");
    CHECK(r.Json()["secret"] == "tjt_s3cret");
    REQUIRE(f.Send("GET", "/api/v1/admin/join-tokens").status == 200);
    CHECK(f.rec.Last().method == "ListJoinTokens");
    REQUIRE(f.Send("DELETE", "/api/v1/admin/join-tokens/jt-1").status == 200);
    CHECK(f.rec.LastAs<v1::RevokeJoinTokenRequest>("RevokeJoinToken").id() == "jt-1");
  }
  SECTION("the audit log, and the client's address forwarded for it") {
    const HttpResult r =
        f.Send("GET",
               "/api/v1/admin/audit?since=2026-01-01T00:00:00Z&actor=ops&action=CordonNode"
               "&target=node-1&before_id=90&limit=5");
    INFO(r.body);
    REQUIRE(r.status == 200);
    const auto req = f.rec.LastAs<v1::ListAuditRecordsRequest>("ListAuditRecords");
    CHECK(req.since().seconds() == 1767225600);
    CHECK(req.actor() == "ops");
    CHECK(req.action() == "CordonNode");
    CHECK(req.target() == "node-1");
    CHECK(req.before_id() == 90);
    CHECK(req.limit() == 5);
    CHECK(r.Json()["records"][0]["actor"] == "ops");
    CHECK(f.rec.Last().client_address.rfind("127.0.0.1:", 0) == 0);
    CHECK(f.Send("GET", "/api/v1/admin/audit?limit=many").status == 400);
  }
}

TEST_CASE("healthz and the OpenAPI document need no key and call nothing upstream", "[gateway]") {
  GatewayFixture f;
  const HttpResult health = f.Send("GET", "/healthz", "", "");
  CHECK(health.status == 200);
  CHECK(health.Json()["status"] == "ok");
  const HttpResult doc = f.Send("GET", "/api/v1/openapi.json", "", "");
  CHECK(doc.status == 200);
  CHECK(doc.Json()["openapi"] == "3.0.3");
  CHECK(f.rec.count() == 0);
}

TEST_CASE("a kept-alive connection serves several requests", "[gateway]") {
  GatewayFixture f;
  namespace beast = boost::beast;
  namespace http = beast::http;
  boost::asio::io_context ioc;
  boost::asio::ip::tcp::socket socket(ioc);
  socket.connect({boost::asio::ip::make_address("127.0.0.1"), f.port()});
  beast::flat_buffer buffer;
  for (const char* target : {"/api/v1/runs/a", "/api/v1/nope", "/api/v1/runs/b"}) {
    http::request<http::string_body> req{http::verb::get, target, 11};
    req.set(http::field::host, "127.0.0.1");
    req.set(http::field::authorization, kGoodAuth);
    req.keep_alive(true);
    http::write(socket, req);
    http::response<http::string_body> res;
    http::read(socket, buffer, res);
    CHECK(res.keep_alive());
  }
  CHECK(f.rec.LastAs<v1::GetRunRequest>("GetRun").name() == "b");
}

}  // namespace gateway_routes_test
}  // namespace tessera::gateway::testing
