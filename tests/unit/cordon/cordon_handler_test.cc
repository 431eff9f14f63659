#include "services/cordon/cordon_handler.h"

#include <catch2/catch.hpp>

#include "services/store/memory/memory_database.h"

namespace tessera::cordon {
namespace cordon_handler_test {

struct Fixture {
  std::shared_ptr<FakeClock> clock = std::make_shared<FakeClock>();
  store::Stores stores = store::MakeMemoryStores();
  CordonHandler handler{stores.nodes, stores.node_events,
                        std::make_shared<IdempotentCalls>(stores.idempotency, clock), clock};
  auth::Principal ops{"ops", v1::ROLE_ADMIN};
  auth::Principal alice{"alice", v1::ROLE_USER};
  auth::Principal health{"health-api", v1::ROLE_SYSTEM};

  Fixture() {
    v1::Node node;
    node.set_name("n1");
    node.set_admin_state(v1::NODE_ADMIN_STATE_SCHEDULABLE);
    node.set_health(v1::NODE_HEALTH_UNHEALTHY);
    REQUIRE(stores.nodes->CreateNode(node).ok());
  }
};

TEST_CASE("cordon records the state, the actor, the reason and the evidence together") {
  Fixture f;
  v1::CordonNodeRequest req;
  req.set_node_name("n1");
  req.set_reason("busbw 40% under the median");
  (*req.mutable_evidence()->mutable_fields())["busbw_gbps"].set_number_value(3.5);
  v1::CordonNodeResponse resp;
  REQUIRE(f.handler.CordonNode(f.health, req, &resp).ok());
  CHECK(resp.node().admin_state() == v1::NODE_ADMIN_STATE_CORDONED);
  CHECK(resp.node().status_reason() == "busbw 40% under the median");
  auto events = f.stores.node_events->ListNodeEvents({});
  REQUIRE(events->size() == 1);
  CHECK((*events)[0].type() == v1::NODE_EVENT_TYPE_CORDONED);
  CHECK((*events)[0].actor().kind() == v1::ACTOR_KIND_HEALTH_API);
  CHECK((*events)[0].evidence().fields().at("busbw_gbps").number_value() == 3.5);
  CHECK((*events)[0].time().seconds() == absl::ToUnixSeconds(f.clock->Now()));

  // Repeating it records nothing new.
  REQUIRE(f.handler.CordonNode(f.health, req, &resp).ok());
  CHECK(f.stores.node_events->ListNodeEvents({})->size() == 1);
}

TEST_CASE("a user sees node events without the runs named in their evidence") {
  Fixture f;
  v1::CordonNodeRequest req;
  req.set_node_name("n1");
  req.set_reason("health: sweep s-1: n1: compute 0.2 TFLOP/s");
  auto& e = *req.mutable_evidence()->mutable_fields();
  e["run_name"].set_string_value("bobs-secret-run-a1b2");
  e["trigger_detail"].set_string_value("rank 3 of run run-77 on n1 made no progress");
  e["tflops"].set_number_value(0.2);
  v1::CordonNodeResponse resp;
  REQUIRE(f.handler.CordonNode(f.health, req, &resp).ok());
  v1::ListNodeEventsResponse seen;
  REQUIRE(f.handler.ListNodeEvents(f.alice, v1::ListNodeEventsRequest(), &seen).ok());
  REQUIRE(seen.events_size() == 1);
  const auto& fields = seen.events(0).evidence().fields();
  CHECK(fields.count("run_name") == 0);
  CHECK(fields.count("trigger_detail") == 0);
  CHECK(fields.at("tflops").number_value() == 0.2);
  REQUIRE(f.handler.ListNodeEvents(f.ops, v1::ListNodeEventsRequest(), &seen).ok());
  CHECK(seen.events(1).evidence().fields().at("run_name").string_value() == "bobs-secret-run-a1b2");
}

TEST_CASE("cordoning is for admins and needs a reason and a known node") {
  Fixture f;
  v1::CordonNodeRequest req;
  req.set_node_name("n1");
  req.set_reason("x");
  v1::CordonNodeResponse resp;
  CHECK(absl::IsPermissionDenied(f.handler.CordonNode(f.alice, req, &resp)));
  req.set_reason("");
  auto st = f.handler.CordonNode(f.ops, req, &resp);
  CHECK(absl::IsInvalidArgument(st));
  CHECK(st.message().find("reason") != std::string::npos);
  req.set_reason("x");
  req.set_node_name("");
  CHECK(f.handler.CordonNode(f.ops, req, &resp).message() == "node_name: required");
  req.set_node_name("nope");
  CHECK(absl::IsNotFound(f.handler.CordonNode(f.ops, req, &resp)));
}

TEST_CASE("uncordon returns the node to service and marks it healthy, drain drains") {
  Fixture f;
  v1::DrainNodeRequest drain;
  drain.set_node_name("n1");
  v1::DrainNodeResponse dresp;
  REQUIRE(f.handler.DrainNode(f.ops, drain, &dresp).ok());
  CHECK(dresp.node().admin_state() == v1::NODE_ADMIN_STATE_DRAINING);
  v1::UncordonNodeRequest un;
  un.set_node_name("n1");
  un.set_reason("replaced the GPU");
  v1::UncordonNodeResponse uresp;
  REQUIRE(f.handler.UncordonNode(f.ops, un, &uresp).ok());
  CHECK(uresp.node().admin_state() == v1::NODE_ADMIN_STATE_SCHEDULABLE);
  CHECK(uresp.node().health() == v1::NODE_HEALTH_HEALTHY);
  CHECK(uresp.event().actor().kind() == v1::ACTOR_KIND_PERSON);
  auto events = f.stores.node_events->ListNodeEvents({});
  REQUIRE(events->size() == 2);
  CHECK((*events)[1].reason() == "replaced the GPU");
}

TEST_CASE("watch sends the newest past events, then new ones") {
  Fixture f;
  for (int i = 0; i < 3; ++i) {
    v1::NodeEvent e;
    e.set_node_name("n1");
    e.set_type(v1::NODE_EVENT_TYPE_GPU_FAULT);
    e.set_reason("past " + std::to_string(i));
    REQUIRE(f.stores.node_events->AppendNodeEvent(e).ok());
  }
  v1::WatchNodeEventsRequest req;
  req.mutable_filter()->set_limit(2);
  std::vector<std::string> seen;
  int polls = 0;
  REQUIRE(f.handler
              .WatchNodeEvents(
                  f.alice, req,
                  [&](const v1::NodeEvent& e) {
                    seen.push_back(e.reason());
                    return true;
                  },
                  [&] {
                    if (polls == 1) {
                      v1::CordonNodeRequest c;
                      c.set_node_name("n1");
                      c.set_reason("live");
                      v1::CordonNodeResponse r;
                      REQUIRE(f.handler.CordonNode(f.ops, c, &r).ok());
                    }
                    return ++polls > 3;
                  },
                  absl::ZeroDuration())
              .ok());
  CHECK(seen == std::vector<std::string>{"past 1", "past 2", "live"});
}

}  // namespace cordon_handler_test
}  // namespace tessera::cordon
