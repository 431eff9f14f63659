// What a registering node may say of itself: the terms of its node key or join token hold its
// cluster, GPU type, GPU count and labels; what they leave open is its first word, kept; a
// scheduler that requires terms refuses a node without them. Memory stores, a fake clock.
#include <catch2/catch.hpp>

#include "base/timestamps.h"
#include "tests/unit/scheduler_service/scheduler_fixture.h"

namespace tessera::scheduler {
namespace node_terms_test {

// n1 joins with a token `id` whose terms are `terms` (made and used now); the scheduler then
// holds it to them.
void JoinWithTerms(Fixture& f, const v1::NodeTerms& terms, const std::string& id = "jt-1") {
  store::JoinTokenRecord token;
  token.token.set_id(id);
  token.token.set_node("n1");
  *token.token.mutable_created_at() = ToProtoTime(f.clock->Now());
  *token.token.mutable_expires_at() = ToProtoTime(f.clock->Now() + absl::Hours(1));
  *token.token.mutable_terms() = terms;
  token.secret_hash = "hash-" + id;
  REQUIRE(f.stores.join_tokens->CreateJoinToken(token).ok());
  store::ApiKeyRecord key;
  key.key.set_id("key-" + id);
  key.key.set_user("node:n1");
  key.key.set_role(v1::ROLE_NODE);
  key.key.set_node("n1");
  key.secret_hash = "key-hash-" + id;
  REQUIRE(f.stores.join_tokens->RedeemJoinToken("hash-" + id, "n1", f.clock->Now(), key).ok());
}

TEST_CASE("a node that joined with a token cannot register into another cluster or pool") {
  Fixture f;
  v1::NodeTerms terms;
  terms.set_cluster("local");
  terms.set_gpu_type("sim");
  terms.set_max_gpus(8);
  (*terms.mutable_labels())["pool"] = "team-a";
  JoinWithTerms(f, terms);
  v1::RegisterWorker reg;
  reg.mutable_node()->set_name("n1");
  reg.mutable_node()->set_cluster("local");
  reg.mutable_node()->set_gpu_type("sim");
  reg.mutable_node()->set_gpu_count(8);
  (*reg.mutable_node()->mutable_labels())["pool"] = "team-b";  // where another team's runs go
  (*reg.mutable_node()->mutable_labels())["rack"] = "r7";
  REQUIRE(f.core->sessions->RegisterWorker(reg).ok());
  auto node = f.stores.nodes->GetNode("n1");
  REQUIRE(node.ok());
  CHECK(node->labels().at("pool") == "team-a");  // the token's word, not the node's
  CHECK(node->labels().at("rack") == "r7");      // what the terms leave to the node

  v1::RegisterWorker other_cluster = reg;
  other_cluster.mutable_node()->set_cluster("premium");
  const absl::Status moved = f.core->sessions->RegisterWorker(other_cluster).status();
  CHECK(absl::IsPermissionDenied(moved));
  CHECK(moved.message() ==
        "node n1 is held to the terms of join token jt-1, which allow cluster local; it "
        "registered with cluster premium (an admin makes a new token or key to change them)");
  v1::RegisterWorker other_gpu = reg;
  other_gpu.mutable_node()->set_gpu_type("h200");
  CHECK(absl::IsPermissionDenied(f.core->sessions->RegisterWorker(other_gpu).status()));
  v1::RegisterWorker more_gpus = reg;
  more_gpus.mutable_node()->set_gpu_count(64);
  const absl::Status grown = f.core->sessions->RegisterWorker(more_gpus).status();
  CHECK(absl::IsPermissionDenied(grown));
  CHECK_THAT(std::string(grown.message()),
             Catch::Contains("allow at most 8 GPUs; it registered with 64 GPUs"));
  // None of the refused registrations changed the node.
  node = f.stores.nodes->GetNode("n1");
  CHECK(node->cluster() == "local");
  CHECK(node->gpu_count() == 8);
  CHECK(node->incarnation() == 1);

  // A node that joined with no token (a key made otherwise) says what it is at first.
  f.Register("n2");
  CHECK(f.stores.nodes->GetNode("n2")->cluster() == "local");

  // A new token whose terms name another cluster moves n1 there: the terms are the admin's word.
  v1::NodeTerms premium = terms;
  premium.set_cluster("premium");
  f.clock->Advance(absl::Seconds(2));
  JoinWithTerms(f, premium, "jt-2");
  REQUIRE(f.core->sessions->RegisterWorker(other_cluster).ok());
  CHECK(f.stores.nodes->GetNode("n1")->cluster() == "premium");
}

TEST_CASE("a node is held to the terms of the key it calls with, before any token's") {
  Fixture f;
  v1::NodeTerms token_terms;
  token_terms.set_cluster("local");
  JoinWithTerms(f, token_terms);  // an older join, whose token said "local"
  v1::NodeTerms key_terms;
  key_terms.set_cluster("pool-a");
  key_terms.set_gpu_type("sim");
  (*key_terms.mutable_labels())["pool"] = "team-a";
  v1::RegisterWorker reg;
  reg.mutable_node()->set_name("n1");
  reg.mutable_node()->set_cluster("local");
  reg.mutable_node()->set_gpu_type("sim");
  reg.mutable_node()->set_gpu_count(8);
  (*reg.mutable_node()->mutable_labels())["pool"] = "team-b";
  // Its first registration already: the key's word, not the node's.
  const absl::Status first = f.core->sessions->RegisterWorker(reg, key_terms).status();
  CHECK(absl::IsPermissionDenied(first));
  CHECK(first.message() ==
        "node n1 is held to the terms of its node key, which allow cluster pool-a; it registered "
        "with cluster local (an admin makes a new token or key to change them)");
  CHECK(absl::IsNotFound(f.stores.nodes->GetNode("n1").status()));
  reg.mutable_node()->set_cluster("pool-a");
  REQUIRE(f.core->sessions->RegisterWorker(reg, key_terms).ok());
  auto node = f.stores.nodes->GetNode("n1");
  REQUIRE(node.ok());
  CHECK(node->cluster() == "pool-a");
  CHECK(node->labels().at("pool") == "team-a");
}

TEST_CASE("with require_node_terms, a node whose terms leave its pool open is refused") {
  Fixture f;
  f.config.require_node_terms = true;
  f.core = f.NewCore();
  v1::RegisterWorker reg;
  reg.mutable_node()->set_name("n1");
  reg.mutable_node()->set_cluster("local");
  reg.mutable_node()->set_gpu_type("sim");
  reg.mutable_node()->set_gpu_count(8);
  const absl::Status bare = f.core->sessions->RegisterWorker(reg).status();
  CHECK(absl::IsPermissionDenied(bare));
  CHECK(bare.message() ==
        "node n1 has no terms fixing its cluster and GPU type, and this scheduler takes no node's "
        "own word for them (--require-node-terms): an admin gives it a join token or node key "
        "with --cluster and --gpu-type");
  v1::NodeTerms half;
  half.set_cluster("local");  // the GPU type still the node's word
  const absl::Status open = f.core->sessions->RegisterWorker(reg, half).status();
  CHECK(absl::IsPermissionDenied(open));
  CHECK_THAT(std::string(open.message()), Catch::Contains("(its node key leaves them open)"));
  CHECK(absl::IsNotFound(f.stores.nodes->GetNode("n1").status()));
  v1::NodeTerms whole = half;
  whole.set_gpu_type("sim");
  REQUIRE(f.core->sessions->RegisterWorker(reg, whole).ok());
  CHECK(f.stores.nodes->GetNode("n1")->cluster() == "local");
}

TEST_CASE("a node without terms stays in the cluster and GPU type it first registered with") {
  Fixture f;
  f.Register("n1");  // cluster local, GPU type sim, 8 GPUs: its own word, no token
  v1::RegisterWorker reg;
  reg.mutable_node()->set_name("n1");
  reg.mutable_node()->set_cluster("premium");
  reg.mutable_node()->set_gpu_type("sim");
  reg.mutable_node()->set_gpu_count(8);
  const absl::Status moved = f.core->sessions->RegisterWorker(reg).status();
  CHECK(absl::IsPermissionDenied(moved));
  CHECK(
      moved.message() ==
      "node n1 registered with cluster premium; it is in cluster local since it first "
      "registered, and a node cannot move itself (an operator removes it while it is offline, "
      "`mcli admin remove-node n1`, or gives it a join token or node key whose terms say where it "
      "belongs)");
  reg.mutable_node()->set_cluster("local");
  reg.mutable_node()->set_gpu_type("h200");
  CHECK(absl::IsPermissionDenied(f.core->sessions->RegisterWorker(reg).status()));
  auto node = f.stores.nodes->GetNode("n1");
  CHECK(node->cluster() == "local");
  CHECK(node->gpu_type() == "sim");
  CHECK(node->incarnation() == 1);  // the refusals changed nothing
  // Its GPU count is its own (a GPU fails, or is mended).
  reg.mutable_node()->set_gpu_type("sim");
  reg.mutable_node()->set_gpu_count(7);
  REQUIRE(f.core->sessions->RegisterWorker(reg).ok());
  CHECK(f.stores.nodes->GetNode("n1")->gpu_count() == 7);

  // Removed while offline (as RemoveNode does), it registers anew where it says.
  REQUIRE(f.stores.nodes->DeleteNode("n1").ok());
  reg.mutable_node()->set_cluster("premium");
  REQUIRE(f.core->sessions->RegisterWorker(reg).ok());
  CHECK(f.stores.nodes->GetNode("n1")->cluster() == "premium");
}

}  // namespace node_terms_test
}  // namespace tessera::scheduler
