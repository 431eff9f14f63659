// Nodes and the node event log.
#include "tests/unit/store/conformance/conformance.h"

namespace tessera::store::conformance {
namespace nodes_conformance {

CONFORMANCE_CASE("nodes: create, get, list sorted with filters") {
  Stores s = FreshStores();
  v1::Node b = MakeNode("node-b");
  v1::Node a = MakeNode("node-a");
  v1::Node c = MakeNode("node-c", "c2");
  c.set_gpu_type("a100");
  c.set_liveness(v1::NODE_LIVENESS_LOST);
  c.set_admin_state(v1::NODE_ADMIN_STATE_CORDONED);
  auto* gpu = c.add_gpus();
  gpu->set_index(0);
  gpu->set_uuid("GPU-123");
  gpu->set_simulated(true);
  for (const auto& n : {b, a, c}) REQUIRE(s.nodes->CreateNode(n).ok());
  CHECK(absl::IsAlreadyExists(s.nodes->CreateNode(a).status()));

  auto got = s.nodes->GetNode("node-c");
  REQUIRE(got.ok());
  CHECK(got->version() == 1);
  CHECK(got->gpus(0).uuid() == "GPU-123");
  CHECK(got->labels().at("rack") == "r1");
  CHECK(absl::IsNotFound(s.nodes->GetNode("node-z").status()));

  using V = std::vector<std::string>;
  auto list = [&](const v1::NodeFilter& f) {
    auto r = s.nodes->ListNodes(f);
    REQUIRE(r.ok());
    return Names(*r);
  };
  v1::NodeFilter f;
  CHECK(list(f) == V{"node-a", "node-b", "node-c"});
  f.set_cluster("c1");
  CHECK(list(f) == V{"node-a", "node-b"});
  f.clear_cluster();
  f.set_gpu_type("a100");
  CHECK(list(f) == V{"node-c"});
  f.clear_gpu_type();
  f.add_liveness(v1::NODE_LIVENESS_ONLINE);
  CHECK(list(f) == V{"node-a", "node-b"});
  f.clear_liveness();
  f.add_admin_states(v1::NODE_ADMIN_STATE_CORDONED);
  CHECK(list(f) == V{"node-c"});
  f.clear_admin_states();
  f.add_names("node-b");
  f.add_names("node-c");
  CHECK(list(f) == V{"node-b", "node-c"});
  f.set_limit(1);
  CHECK(list(f) == V{"node-b"});
}

CONFORMANCE_CASE("nodes: update is compare-and-set and writes its events atomically") {
  Stores s = FreshStores();
  auto node = s.nodes->CreateNode(MakeNode("n1"));
  REQUIRE(node.ok());
  v1::Node cordoned = *node;
  cordoned.set_admin_state(v1::NODE_ADMIN_STATE_CORDONED);
  cordoned.set_status_reason("xid 79");
  auto updated = s.nodes->UpdateNode(
      cordoned, 1, {MakeNodeEvent("n1", v1::NODE_EVENT_TYPE_CORDONED, "xid 79", 5)});
  REQUIRE(updated.ok());
  CHECK(updated->version() == 2);
  CHECK(s.nodes->GetNode("n1")->admin_state() == v1::NODE_ADMIN_STATE_CORDONED);

  v1::Node stale = *node;
  stale.set_liveness(v1::NODE_LIVENESS_LOST);
  CHECK(absl::IsAborted(
      s.nodes->UpdateNode(stale, 1, {MakeNodeEvent("n1", v1::NODE_EVENT_TYPE_LOST, "x", 6)})
          .status()));
  CHECK(absl::IsNotFound(s.nodes->UpdateNode(MakeNode("ghost"), 1, {}).status()));

  auto events = s.node_events->ListNodeEvents({});
  REQUIRE(events.ok());
  REQUIRE(events->size() == 1);  // the losing writer's event was not recorded
  CHECK((*events)[0].type() == v1::NODE_EVENT_TYPE_CORDONED);
  CHECK((*events)[0].reason() == "xid 79");
  CHECK((*events)[0].actor().name() == "ops");
}

CONFORMANCE_CASE(
    "nodes: heartbeat summaries are stored together, make no version, keep the later") {
  Stores s = FreshStores();
  REQUIRE(s.nodes->CreateNode(MakeNode("node-a")).ok());
  REQUIRE(s.nodes->CreateNode(MakeNode("node-b")).ok());
  REQUIRE(s.nodes
              ->RecordHeartbeats(
                  {{"node-a", T(10), T(13)}, {"node-b", T(11), T(14)}, {"gone", T(11), T(14)}})
              .ok());
  auto a = s.nodes->GetNode("node-a");
  REQUIRE(a.ok());
  CHECK(a->version() == 1);
  CHECK(FromProtoTime(a->last_heartbeat_at()) == T(10));
  CHECK(FromProtoTime(a->lease_expires_at()) == T(13));
  auto listed = s.nodes->ListNodes({});
  REQUIRE(listed.ok());
  REQUIRE(listed->size() == 2);
  CHECK(FromProtoTime((*listed)[1].last_heartbeat_at()) == T(11));
  CHECK(absl::IsNotFound(s.nodes->GetNode("gone").status()));
  // A state change written from an older read keeps the later heartbeat, and its CAS holds.
  v1::Node cordoned = *a;
  *cordoned.mutable_last_heartbeat_at() = ToProtoTime(T(1));
  cordoned.set_admin_state(v1::NODE_ADMIN_STATE_CORDONED);
  REQUIRE(s.nodes->UpdateNode(cordoned, 1, {}).ok());
  // An older summary does not move the times back.
  REQUIRE(s.nodes->RecordHeartbeats({{"node-a", T(5), T(8)}}).ok());
  auto after = s.nodes->GetNode("node-a");
  REQUIRE(after.ok());
  CHECK(after->version() == 2);
  CHECK(after->admin_state() == v1::NODE_ADMIN_STATE_CORDONED);
  CHECK(FromProtoTime(after->last_heartbeat_at()) == T(10));
  CHECK(FromProtoTime(after->lease_expires_at()) == T(13));
  REQUIRE(s.nodes->RecordHeartbeats({}).ok());
}

CONFORMANCE_CASE("nodes: a removed node's events remain") {
  Stores s = FreshStores();
  REQUIRE(s.nodes->CreateNode(MakeNode("n1")).ok());
  REQUIRE(s.node_events
              ->AppendNodeEvent(MakeNodeEvent("n1", v1::NODE_EVENT_TYPE_REGISTERED, "hello", 1))
              .ok());
  REQUIRE(s.nodes->DeleteNode("n1").ok());
  CHECK(absl::IsNotFound(s.nodes->GetNode("n1").status()));
  CHECK(absl::IsNotFound(s.nodes->DeleteNode("n1")));
  CHECK(s.node_events->ListNodeEvents({})->size() == 1);
}

CONFORMANCE_CASE("node events: ids increase; filter by node, type, after id and limit") {
  Stores s = FreshStores();
  std::vector<int64_t> ids;
  const std::vector<std::pair<std::string, v1::NodeEventType>> spec = {
      {"n1", v1::NODE_EVENT_TYPE_REGISTERED}, {"n2", v1::NODE_EVENT_TYPE_REGISTERED},
      {"n1", v1::NODE_EVENT_TYPE_CORDONED},   {"n2", v1::NODE_EVENT_TYPE_GPU_FAULT},
      {"n1", v1::NODE_EVENT_TYPE_UNCORDONED},
  };
  int second = 0;
  for (const auto& [node, type] : spec) {
    v1::NodeEvent e = MakeNodeEvent(node, type, "r" + std::to_string(second), second);
    e.mutable_evidence()->mutable_fields()->operator[]("busbw_gbps").set_number_value(12.5);
    auto stored = s.node_events->AppendNodeEvent(e);
    REQUIRE(stored.ok());
    ids.push_back(stored->id());
    ++second;
  }
  CHECK(std::is_sorted(ids.begin(), ids.end()));
  CHECK(std::adjacent_find(ids.begin(), ids.end()) == ids.end());

  auto list = [&](const v1::NodeEventFilter& f) {
    auto r = s.node_events->ListNodeEvents(f);
    REQUIRE(r.ok());
    std::vector<std::string> reasons;
    for (const auto& e : *r) reasons.push_back(e.reason());
    return reasons;
  };
  using V = std::vector<std::string>;
  v1::NodeEventFilter f;
  CHECK(list(f) == V{"r0", "r1", "r2", "r3", "r4"});
  f.add_node_names("n1");
  CHECK(list(f) == V{"r0", "r2", "r4"});
  f.add_types(v1::NODE_EVENT_TYPE_CORDONED);
  f.add_types(v1::NODE_EVENT_TYPE_UNCORDONED);
  CHECK(list(f) == V{"r2", "r4"});
  f.clear_node_names();
  f.clear_types();
  f.set_after_id(ids[2]);
  CHECK(list(f) == V{"r3", "r4"});
  f.set_limit(1);
  CHECK(list(f) == V{"r3"});

  auto all = s.node_events->ListNodeEvents({});
  REQUIRE(all.ok());
  CHECK((*all)[3].evidence().fields().at("busbw_gbps").number_value() == 12.5);
  CHECK((*all)[3].time().seconds() == absl::ToUnixSeconds(T(3)));
}

}  // namespace nodes_conformance
}  // namespace tessera::store::conformance
