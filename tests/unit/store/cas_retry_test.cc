#include "services/store/cas_retry.h"

#include <catch2/catch.hpp>

#include "services/store/memory/memory_database.h"

namespace tessera::store {
namespace cas_retry_test {

v1::Node MakeNode(const std::string& name) {
  v1::Node node;
  node.set_name(name);
  node.set_admin_state(v1::NODE_ADMIN_STATE_SCHEDULABLE);
  return node;
}

v1::NodeEvent MakeEvent(const std::string& node, const std::string& reason) {
  v1::NodeEvent e;
  e.set_node_name(node);
  e.set_type(v1::NODE_EVENT_TYPE_CORDONED);
  e.set_reason(reason);
  return e;
}

// A node store where another writer moves the node just before each of the first `races`
// updates, so that they lose the compare-and-set.
class RacingNodeStore final : public NodeStore {
 public:
  RacingNodeStore(std::shared_ptr<NodeStore> inner, int races)
      : inner_(std::move(inner)), races_left_(races) {}

  absl::StatusOr<v1::Node> CreateNode(const v1::Node& node,
                                      const std::optional<WriteFence>& fence) override {
    ++creations;
    if (create_first) {  // another writer creates the node just before this one
      create_first = false;
      v1::Node other = node;
      (*other.mutable_labels())["racer"] = "created first";
      REQUIRE(inner_->CreateNode(other).ok());
    }
    return inner_->CreateNode(node, fence);
  }
  absl::StatusOr<v1::Node> GetNode(std::string_view name) override {
    ++reads;
    return inner_->GetNode(name);
  }
  absl::StatusOr<std::vector<v1::Node>> ListNodes(const v1::NodeFilter& filter) override {
    return inner_->ListNodes(filter);
  }
  absl::StatusOr<v1::Node> UpdateNode(const v1::Node& node, int64_t expected_version,
                                      const std::vector<v1::NodeEvent>& events,
                                      const std::optional<WriteFence>& fence) override {
    if (races_left_ > 0) {
      --races_left_;
      auto other = inner_->GetNode(node.name());
      REQUIRE(other.ok());
      (*other->mutable_labels())["racer"] = std::to_string(races_left_);
      REQUIRE(inner_->UpdateNode(*other, other->version(), {}).ok());
    }
    return inner_->UpdateNode(node, expected_version, events, fence);
  }
  absl::Status RecordHeartbeats(const std::vector<HeartbeatSummary>& beats) override {
    return inner_->RecordHeartbeats(beats);
  }
  absl::Status DeleteNode(std::string_view name) override { return inner_->DeleteNode(name); }

  int reads = 0;
  int creations = 0;
  bool create_first = false;

 private:
  std::shared_ptr<NodeStore> inner_;
  int races_left_;
};

struct Fixture {
  explicit Fixture(int races = 0)
      : db(std::make_shared<MemoryDatabase>()),
        stores(MakeMemoryStores(db)),
        nodes(stores.nodes, races) {
    REQUIRE(stores.nodes->CreateNode(MakeNode("n1")).ok());
  }
  std::vector<v1::NodeEvent> Events() {
    auto events = stores.node_events->ListNodeEvents({});
    REQUIRE(events.ok());
    return *events;
  }
  std::shared_ptr<MemoryDatabase> db;
  Stores stores;
  RacingNodeStore nodes;
};

NodeMutation Cordon(const std::string& reason) {
  return [reason](v1::Node& node, std::vector<v1::NodeEvent>& events) {
    node.set_admin_state(v1::NODE_ADMIN_STATE_CORDONED);
    node.set_status_reason(reason);
    events.push_back(MakeEvent(node.name(), reason));
    return NodeChange::kWrite;
  };
}

TEST_CASE("a mutation is written with its events under compare-and-set", "[cas]") {
  Fixture f;
  auto updated = UpdateNodeWithRetry(f.nodes, "n1", Cordon("bad gpu"));
  REQUIRE(updated.ok());
  CHECK(updated->admin_state() == v1::NODE_ADMIN_STATE_CORDONED);
  CHECK(updated->version() == 2);
  CHECK(f.stores.nodes->GetNode("n1")->status_reason() == "bad gpu");
  auto events = f.Events();
  REQUIRE(events.size() == 1);
  CHECK(events[0].reason() == "bad gpu");
}

TEST_CASE("a lost race starts again from a fresh read", "[cas]") {
  Fixture f(/*races=*/3);
  std::vector<std::string> seen_racer;
  auto updated =
      UpdateNodeWithRetry(f.nodes, "n1", [&](v1::Node& node, std::vector<v1::NodeEvent>& events) {
        seen_racer.push_back(node.labels().count("racer") ? node.labels().at("racer") : "");
        node.set_admin_state(v1::NODE_ADMIN_STATE_CORDONED);
        events.push_back(MakeEvent("n1", "attempt"));
        return NodeChange::kWrite;
      });
  REQUIRE(updated.ok());
  // Each attempt saw the other writer's latest change, and the write kept it.
  CHECK(seen_racer == std::vector<std::string>{"", "2", "1", "0"});
  CHECK(updated->labels().at("racer") == "0");
  CHECK(updated->admin_state() == v1::NODE_ADMIN_STATE_CORDONED);
  CHECK(updated->version() == 5);
  // The events of lost attempts were not written.
  CHECK(f.Events().size() == 1);
}

TEST_CASE("a node that never stops changing is ABORTED after kMaxCasAttempts", "[cas]") {
  Fixture f(/*races=*/1000);
  int calls = 0;
  auto updated =
      UpdateNodeWithRetry(f.nodes, "n1", [&](v1::Node& node, std::vector<v1::NodeEvent>& events) {
        ++calls;
        return Cordon("x")(node, events);
      });
  CHECK(absl::IsAborted(updated.status()));
  CHECK(updated.status().message() == "node n1 is changing too often; try again");
  CHECK(calls == kMaxCasAttempts);
  CHECK(f.nodes.reads == kMaxCasAttempts);
  CHECK(f.Events().empty());
}

TEST_CASE("nothing to change writes nothing and returns the node as read", "[cas]") {
  Fixture f;
  auto updated =
      UpdateNodeWithRetry(f.nodes, "n1", [](v1::Node& node, std::vector<v1::NodeEvent>& events) {
        node.set_status_reason("an edit that must not be kept");
        events.push_back(MakeEvent("n1", "not recorded"));
        return NodeChange::kNone;
      });
  REQUIRE(updated.ok());
  CHECK(updated->version() == 1);
  CHECK(updated->status_reason().empty());
  CHECK(f.stores.nodes->GetNode("n1")->version() == 1);
  CHECK(f.Events().empty());
}

TEST_CASE("a mutation's error stops at once and writes nothing", "[cas]") {
  Fixture f(/*races=*/1);
  int calls = 0;
  auto updated = UpdateNodeWithRetry(
      f.nodes, "n1", [&](v1::Node&, std::vector<v1::NodeEvent>&) -> absl::StatusOr<NodeChange> {
        ++calls;
        // Even an ABORTED of the mutation's own is not a lost race.
        return absl::AbortedError("the node was declared lost");
      });
  CHECK(updated.status() == absl::AbortedError("the node was declared lost"));
  CHECK(calls == 1);
  CHECK(f.stores.nodes->GetNode("n1")->version() == 1);
}

TEST_CASE("read and write errors are returned as they are, without retries", "[cas]") {
  Fixture f;
  int calls = 0;
  auto count = [&](v1::Node& node, std::vector<v1::NodeEvent>& events) {
    ++calls;
    return Cordon("x")(node, events);
  };
  CHECK(absl::IsNotFound(UpdateNodeWithRetry(f.nodes, "missing", count).status()));
  CHECK(calls == 0);

  f.db->SetUnavailable(true);
  CHECK(absl::IsUnavailable(UpdateNodeWithRetry(f.nodes, "n1", count).status()));
  CHECK(f.nodes.reads == 2);  // one read each

  // The node disappears between the read and the write.
  f.db->SetUnavailable(false);
  auto deleted =
      UpdateNodeWithRetry(f.nodes, "n1", [&](v1::Node& node, std::vector<v1::NodeEvent>&) {
        REQUIRE(f.stores.nodes->DeleteNode(node.name()).ok());
        return NodeChange::kWrite;
      });
  CHECK(absl::IsNotFound(deleted.status()));
  CHECK(f.nodes.reads == 3);
}

// Creates a node labelled "by" = who, with a REGISTERED event.
NodeCreation Fresh(const std::string& name, const std::string& who, int* calls = nullptr) {
  return [=](std::vector<v1::NodeEvent>& events) -> absl::StatusOr<v1::Node> {
    if (calls) ++*calls;
    v1::Node node = MakeNode(name);
    (*node.mutable_labels())["by"] = who;
    v1::NodeEvent e = MakeEvent(name, "created by " + who);
    e.set_type(v1::NODE_EVENT_TYPE_REGISTERED);
    events.push_back(e);
    return node;
  };
}

TEST_CASE("an upsert creates a missing node and records its events on it", "[cas]") {
  Fixture f;
  int mutations = 0;
  auto count = [&](v1::Node& node, std::vector<v1::NodeEvent>& events) {
    ++mutations;
    return Cordon("x")(node, events);
  };
  auto stored = UpsertNodeWithRetry(f.nodes, "n2", Fresh("n2", "me"), count);
  REQUIRE(stored.ok());
  CHECK(stored->labels().at("by") == "me");
  CHECK(stored->version() == 2);  // created, then its event recorded
  CHECK(mutations == 0);
  auto events = f.Events();
  REQUIRE(events.size() == 1);
  CHECK(events[0].reason() == "created by me");
  CHECK(events[0].node_name() == "n2");

  // An existing node is mutated, never created.
  int creations = 0;
  auto updated = UpsertNodeWithRetry(f.nodes, "n1", Fresh("n1", "me", &creations), count);
  REQUIRE(updated.ok());
  CHECK(updated->admin_state() == v1::NODE_ADMIN_STATE_CORDONED);
  CHECK(creations == 0);
  CHECK(mutations == 1);
}

TEST_CASE("an upsert that loses the creation race mutates what the winner wrote", "[cas]") {
  Fixture f;
  f.nodes.create_first = true;
  std::vector<std::string> seen;
  auto stored = UpsertNodeWithRetry(f.nodes, "n2", Fresh("n2", "me"),
                                    [&](v1::Node& node, std::vector<v1::NodeEvent>& events) {
                                      seen.push_back(node.labels().at("racer"));
                                      (*node.mutable_labels())["by"] = "me, after";
                                      events.push_back(MakeEvent("n2", "registered again"));
                                      return NodeChange::kWrite;
                                    });
  REQUIRE(stored.ok());
  CHECK(seen == std::vector<std::string>{"created first"});
  CHECK(stored->labels().at("racer") == "created first");  // the winner's write is kept
  CHECK(stored->labels().at("by") == "me, after");
  CHECK(f.nodes.creations == 1);
  // Only what was written is recorded: the lost creation's event is not.
  auto events = f.Events();
  REQUIRE(events.size() == 1);
  CHECK(events[0].reason() == "registered again");
}

TEST_CASE("an upsert's creation events survive a writer in between", "[cas]") {
  Fixture f(/*races=*/2);  // the first two updates lose: both are the event's recording
  auto stored = UpsertNodeWithRetry(f.nodes, "n2", Fresh("n2", "me"), Cordon("unused"));
  REQUIRE(stored.ok());
  CHECK(stored->labels().at("racer") == "0");  // the other writer's change is kept
  CHECK(stored->admin_state() == v1::NODE_ADMIN_STATE_SCHEDULABLE);
  auto events = f.Events();
  REQUIRE(events.size() == 1);
  CHECK(events[0].reason() == "created by me");

  // Errors: the creation's own is returned at once, and nothing is stored.
  auto refused = UpsertNodeWithRetry(
      f.nodes, "n3",
      [](std::vector<v1::NodeEvent>&) -> absl::StatusOr<v1::Node> {
        return absl::PermissionDeniedError("not this node");
      },
      Cordon("unused"));
  CHECK(refused.status() == absl::PermissionDeniedError("not this node"));
  CHECK(absl::IsNotFound(f.stores.nodes->GetNode("n3").status()));
  f.db->SetUnavailable(true);
  CHECK(absl::IsUnavailable(
      UpsertNodeWithRetry(f.nodes, "n4", Fresh("n4", "me"), Cordon("unused")).status()));
}

}  // namespace cas_retry_test
}  // namespace tessera::store
