#pragma once
// The store conformance suite: one set of cases that every store implementation must pass.
// It is compiled into one binary per implementation; each binary defines FreshStores() and
// STORE_KIND ("memory", "postgres"), which prefixes every case's name.

#include <catch2/catch.hpp>
#include <string_view>

#include "absl/time/time.h"
#include "base/timestamps.h"
#include "services/store/stores.h"

#ifndef STORE_KIND
#error "STORE_KIND must name the store implementation under test"
#endif

#define CONFORMANCE_CASE(name) \
  TEST_CASE(STORE_KIND " store conformance: " name, "[conformance][" STORE_KIND "]")

namespace tessera::store::conformance {

// Empty stores for one test case.
Stores FreshStores();
// Another handle on the database of the last FreshStores(), as a second process has.
Stores SameDatabaseStores();
// Ends the session in which `instance` holds `role` (of the last FreshStores()' database) from
// outside, as when the holder's connection breaks: the role is free afterwards.
void EndLeaderSession(std::string_view role, std::string_view instance);

inline absl::Time T(int64_t seconds) { return absl::FromUnixSeconds(1'750'000'000 + seconds); }

inline v1::Run MakeRun(const std::string& name, int64_t created_second,
                       const std::string& user = "alice") {
  v1::Run run;
  run.set_id("id-" + name);
  run.set_name(name);
  run.set_user(user);
  run.set_status(v1::RUN_STATUS_QUEUED);
  run.mutable_spec()->set_name(name);
  run.mutable_spec()->set_command("python train.py");
  run.mutable_spec()->mutable_compute()->set_cluster("c1");
  run.mutable_spec()->mutable_compute()->set_gpu_type("h100");
  run.mutable_spec()->mutable_compute()->set_gpus(8);
  *run.mutable_created_at() = ToProtoTime(T(created_second));
  run.set_resumption_index(-1);
  return run;
}

inline v1::RunEvent MakeRunEvent(v1::RunEventType type, const std::string& message,
                                 int64_t second) {
  v1::RunEvent e;
  e.set_type(type);
  e.set_message(message);
  *e.mutable_time() = ToProtoTime(T(second));
  return e;
}

inline v1::Node MakeNode(const std::string& name, const std::string& cluster = "c1") {
  v1::Node node;
  node.set_name(name);
  node.set_cluster(cluster);
  node.set_gpu_type("h100");
  node.set_gpu_count(8);
  node.set_liveness(v1::NODE_LIVENESS_ONLINE);
  node.set_admin_state(v1::NODE_ADMIN_STATE_SCHEDULABLE);
  node.set_health(v1::NODE_HEALTH_HEALTHY);
  (*node.mutable_labels())["rack"] = "r1";
  return node;
}

inline v1::NodeEvent MakeNodeEvent(const std::string& node, v1::NodeEventType type,
                                   const std::string& reason, int64_t second) {
  v1::NodeEvent e;
  e.set_node_name(node);
  e.set_type(type);
  e.set_reason(reason);
  e.mutable_actor()->set_kind(v1::ACTOR_KIND_PERSON);
  e.mutable_actor()->set_name("ops");
  *e.mutable_time() = ToProtoTime(T(second));
  return e;
}

template <typename T>
std::vector<std::string> Names(const std::vector<T>& items) {
  std::vector<std::string> out;
  for (const auto& i : items) out.push_back(i.name());
  return out;
}

// The names of the runs `filter` lists, in the store's order.
inline std::vector<std::string> ListedNames(Stores& s, const v1::RunFilter& filter) {
  auto runs = s.runs->ListRuns(filter);
  REQUIRE(runs.ok());
  return Names(*runs);
}

}  // namespace tessera::store::conformance
