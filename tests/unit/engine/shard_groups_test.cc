// The trainer's process groups, joined for real: four ranks as threads of this process meet
// through rank 0's TCPStore on loopback and talk over Gloo, as tessera-train's ranks do across
// processes. What each group holds is read from the sums its all-reduces give.
#include "worker/engine/train/shard_groups.h"

#include <atomic>
#include <future>
#include <thread>
#include <vector>

// LibTorch brings glog, whose CHECK aborts instead of recording a failure: use Catch's.
#undef CHECK
#include <catch2/catch.hpp>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include "tests/support/free_port.h"
#include "worker/engine/dist/store_commit_channel.h"

namespace tessera::engine {
namespace shard_groups_test {

struct Joined {
  absl::Status status;
  int shard_index = -1, shard_group_size = 0, replicas = 0;
  bool writes_shard = false;
  float world_sum = 0, shard_sum = 0;
  std::vector<float> reduced;
};

// Joins `world` ranks with `config`'s sharding; each all-reduces its rank over the world and
// over its shard group, then reduces a gradient buffer of [rank, 10 * rank].
std::vector<Joined> JoinAll(const TrainConfig& config, int world, int local_world) {
  const int port = testing::FreePort();
  std::vector<Joined> out(static_cast<size_t>(world));
  std::vector<std::thread> ranks;
  for (int r = 0; r < world; ++r) {
    ranks.emplace_back([&, r] {
      RankContext ctx;
      ctx.rank = r;
      ctx.world_size = world;
      ctx.local_world_size = local_world;
      ctx.master_port = port;
      Joined& j = out[static_cast<size_t>(r)];
      auto groups = ShardGroups::Join(config, ctx, /*cuda=*/false);
      j.status = groups.status();
      if (!groups.ok()) return;
      ShardGroups& g = **groups;
      j.shard_index = g.shard_index();
      j.shard_group_size = g.shard_group_size();
      j.replicas = g.replicas();
      j.writes_shard = g.writes_shard();
      torch::Tensor mine = torch::full({1}, static_cast<float>(r));
      torch::Tensor in_shard = mine.clone();
      g.world().AllReduceSum(mine);
      g.shard_group().AllReduceSum(in_shard);
      j.world_sum = mine.item<float>();
      j.shard_sum = in_shard.item<float>();
      torch::Tensor grads = torch::tensor({static_cast<float>(r), 10.0f * r});
      torch::Tensor grad_shard = torch::zeros({1});
      g.ReduceGradients(grads, grad_shard);
      j.reduced = {grads[0].item<float>(), grads[1].item<float>()};
      g.world().Barrier();  // rank 0 serves the store: it leaves last
    });
  }
  for (auto& t : ranks) t.join();
  return out;
}

TEST_CASE("HYBRID_SHARD: shard groups of a node's ranks, replicas across them") {
  TrainConfig config;
  config.sharding = Sharding::kHybridShard;  // shard_group_size 0: the local world, 2
  const std::vector<Joined> joined = JoinAll(config, 4, 2);
  for (int r = 0; r < 4; ++r) {
    const Joined& j = joined[static_cast<size_t>(r)];
    INFO("rank " << r << ": " << j.status.ToString());
    REQUIRE(j.status.ok());
    CHECK(j.shard_group_size == 2);
    CHECK(j.replicas == 2);
    CHECK(j.shard_index == r % 2);
    CHECK(j.writes_shard == (r < 2));  // the first replica keeps the checkpoint's shards
    CHECK(j.world_sum == 0 + 1 + 2 + 3);
    CHECK(j.shard_sum == (r < 2 ? 0 + 1 : 2 + 3));  // ranks 0-1 and 2-3
    // Gloo: the whole buffer summed over the world; each rank reads its shard of it.
    CHECK(j.reduced == std::vector<float>{6, 60});
  }
}

TEST_CASE("FULL_SHARD is one group of the world, NO_SHARD a group of one per rank") {
  TrainConfig config;
  config.sharding = Sharding::kFullShard;
  for (const Joined& j : JoinAll(config, 3, 1)) {
    REQUIRE(j.status.ok());
    CHECK(j.shard_group_size == 3);
    CHECK(j.replicas == 1);
    CHECK(j.shard_sum == 0 + 1 + 2);
  }
  config.sharding = Sharding::kNoShard;
  const std::vector<Joined> alone = JoinAll(config, 2, 2);
  for (int r = 0; r < 2; ++r) {
    const Joined& j = alone[static_cast<size_t>(r)];
    REQUIRE(j.status.ok());
    CHECK(j.shard_group_size == 1);
    CHECK(j.replicas == 2);
    CHECK(j.shard_index == 0);
    CHECK(j.shard_sum == static_cast<float>(r));
    CHECK(j.world_sum == 1);
  }
}

TEST_CASE(
    "a shard group or expert group size that does not divide the world is refused before anyone "
    "is met") {
  TrainConfig config;
  config.sharding = Sharding::kHybridShard;
  config.shard_group_size = 3;
  RankContext ctx;
  ctx.world_size = 4;
  ctx.master_port = 1;  // nothing is reached: the check comes first
  auto groups = ShardGroups::Join(config, ctx, false);
  REQUIRE_FALSE(groups.ok());
  CHECK(groups.status().message() == "fsdp.shard_group_size: 3 does not divide the world size 4");
  // Nor does an expert group of 8 experts over 4 ranks each fit a world of 6.
  TrainConfig experts;
  experts.model.moe_num_experts = 8;
  experts.model.moe_world_size = 4;
  ctx.world_size = 6;
  auto refused = ShardGroups::Join(experts, ctx, false);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message() == "model.moe_world_size: 4 does not divide the world size 6");
}

TEST_CASE("a world of one talks to no one") {
  TrainConfig config;
  RankContext ctx;
  ctx.master_port = 1;
  auto groups = ShardGroups::Join(config, ctx, false);
  REQUIRE(groups.ok());
  CHECK((*groups)->shard_group_size() == 1);
  CHECK((*groups)->writes_shard());
  torch::Tensor t = torch::ones({2});
  (*groups)->world().AllReduceSum(t);
  CHECK(t.sum().item<float>() == 2);
}

// Records, for each call, whether the rank was marked waiting on its peers during it.
class WaitRecordingCommunicator final : public Communicator {
 public:
  explicit WaitRecordingCommunicator(PeerWaits& waits) : waits_(waits) {}
  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::string backend() const override { return "recording"; }
  void AllReduceSum(torch::Tensor&) override { Record("AllReduceSum"); }
  void AllReduceSumParts(std::vector<torch::Tensor>&) override { Record("AllReduceSumParts"); }
  void AllGather(torch::Tensor&) override { Record("AllGather"); }
  void ReduceScatterSum(torch::Tensor&, torch::Tensor&) override { Record("ReduceScatterSum"); }
  void Broadcast(torch::Tensor&, int) override { Record("Broadcast"); }
  void ReduceSum(torch::Tensor&, int) override { Record("ReduceSum"); }
  void Barrier() override { Record("Barrier"); }
  void AllToAll(torch::Tensor&, torch::Tensor&, const std::vector<int64_t>&,
                const std::vector<int64_t>&) override {
    Record("AllToAll");
  }
  std::unique_ptr<PendingCollective> StartBroadcast(torch::Tensor&, int) override {
    Record("StartBroadcast");
    return std::make_unique<RecordingPending>(*this, "Wait (broadcast)");
  }
  std::unique_ptr<PendingCollective> StartReduceSum(torch::Tensor&, int) override {
    Record("StartReduceSum");
    return std::make_unique<RecordingPending>(*this, "Wait (reduce)");
  }
  std::vector<std::pair<std::string, bool>> calls;

 private:
  class RecordingPending final : public PendingCollective {
   public:
    RecordingPending(WaitRecordingCommunicator& c, std::string what) : c_(c), what_(what) {}
    void Wait() override { c_.Record(what_); }

   private:
    WaitRecordingCommunicator& c_;
    std::string what_;
  };
  void Record(const std::string& what) { calls.emplace_back(what, waits_.waiting()); }
  PeerWaits& waits_;
};

TEST_CASE("every call that may block on a peer is marked as a wait, and only while it runs") {
  std::vector<bool> marks;
  PeerWaits waits([&](bool waiting) { marks.push_back(waiting); });
  auto recording = std::make_unique<WaitRecordingCommunicator>(waits);
  WaitRecordingCommunicator& seen = *recording;
  std::unique_ptr<Communicator> marked = MarkPeerWaits(std::move(recording), waits);
  CHECK(marked->backend() == "recording");
  CHECK(marked->size() == 2);
  torch::Tensor t = torch::zeros({2}), part = torch::zeros({1});
  std::vector<torch::Tensor> parts{t};
  marked->AllReduceSum(t);
  marked->AllReduceSumParts(parts);
  marked->AllGather(t);
  marked->ReduceScatterSum(t, part);
  marked->Broadcast(t, 1);
  marked->ReduceSum(t, 0);
  marked->Barrier();
  marked->AllToAll(t, t, {1, 1}, {1, 1});
  auto broadcast = marked->StartBroadcast(t, 0);
  auto reduce = marked->StartReduceSum(t, 0);
  CHECK_FALSE(waits.waiting());  // computing between starting and waiting is no wait
  broadcast->Wait();
  reduce->Wait();
  CHECK_FALSE(waits.waiting());
  REQUIRE(seen.calls.size() == 12);
  for (const auto& [what, waiting] : seen.calls) {
    INFO(what);
    CHECK(waiting);
  }
  // Each call a wait of its own: marked, then cleared.
  REQUIRE(marks.size() == 24);
  for (size_t i = 0; i < marks.size(); ++i) CHECK(marks[i] == (i % 2 == 0));
}

TEST_CASE("nested waits mark once: the outermost begins and ends it") {
  std::vector<bool> marks;
  PeerWaits waits([&](bool waiting) { marks.push_back(waiting); });
  {
    PeerWaits::Scope outer(waits);
    {
      PeerWaits::Scope inner(waits);
      CHECK(waits.waiting());
    }
    CHECK(waits.waiting());
  }
  CHECK_FALSE(waits.waiting());
  CHECK(marks == std::vector<bool>{true, false});
}

TEST_CASE("the time spent waiting is summed once however the waits nest, the open one included") {
  double now = 100;
  PeerWaits waits([](bool) {}, [&] { return now; });
  CHECK(waits.waited_seconds() == 0);
  {
    PeerWaits::Scope outer(waits);
    now += 2;
    {
      PeerWaits::Scope inner(waits);  // another thread's, say: the same wall time, once
      now += 1;
    }
    CHECK(waits.waited_seconds() == 3);  // in progress
    now += 0.5;
  }
  now += 10;  // computing: no wait
  CHECK(waits.waited_seconds() == 3.5);
  {
    PeerWaits::Scope again(waits);
    now += 0.25;
  }
  CHECK(waits.waited_seconds() == 3.75);
}

TEST_CASE(
    "a rank blocked in a parameter gather for a peer that has not come is marked waiting until "
    "the peer comes") {
  const int port = testing::FreePort();
  std::atomic<bool> rank0_waiting{false};
  std::atomic<int> rank0_marks{0};
  PeerWaits waits0([&](bool waiting) {
    rank0_waiting = waiting;
    ++rank0_marks;
  });
  std::promise<void> peer_may_go;
  std::shared_future<void> go = peer_may_go.get_future().share();
  std::vector<absl::Status> joined(2);
  std::vector<torch::Tensor> gathered(2);
  TrainConfig config;  // FULL_SHARD: one shard group of the world
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      RankContext ctx;
      ctx.rank = r;
      ctx.world_size = 2;
      ctx.local_world_size = 1;
      ctx.master_port = port;
      auto groups = ShardGroups::Join(config, ctx, false, r == 0 ? &waits0 : nullptr);
      joined[static_cast<size_t>(r)] = groups.status();
      if (!groups.ok()) return;
      if (r == 1) go.wait();  // a hung peer: it comes only when let
      torch::Tensor full = torch::zeros({2});
      full[r] = static_cast<float>(r + 1);
      (*groups)->shard_group().AllGather(full);
      gathered[static_cast<size_t>(r)] = full;
      (*groups)->world().Barrier();  // rank 0 serves the store: it leaves last
    });
  }
  // Rank 0 is in the gather once it is marked; it stays there, marked, until rank 1 comes.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
  while (!rank0_waiting && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  CHECK(rank0_waiting);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  CHECK(rank0_waiting);
  CHECK(rank0_marks == 1);
  peer_may_go.set_value();
  for (auto& t : ranks) t.join();
  REQUIRE(joined[0].ok());
  REQUIRE(joined[1].ok());
  CHECK(gathered[0].equal(torch::tensor({1.0f, 2.0f})));
  CHECK(gathered[1].equal(torch::tensor({1.0f, 2.0f})));
  CHECK_FALSE(rank0_waiting);
  CHECK(rank0_marks == 4);  // the gather's wait and the barrier's, each marked and cleared
}

TEST_CASE("rank 0 awaiting a peer's checkpoint shard is marked waiting until the shard comes") {
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::atomic<int> begun{0}, ended{0};
  PeerWaits waits([&](bool waiting) { ++(waiting ? begun : ended); });
  StoreCommitChannel channel(store, &waits);
  ShardRecord record;
  record.index = 1;
  record.file = "shard-1-of-2.bin";
  record.offset = 512;
  record.count = 512;
  record.bytes = 4096;
  record.hash = "00112233445566778899aabbccddeeff";
  // The peer's shard comes once rank 0 is seen waiting for it.
  std::thread peer([&] {
    while (!waits.waiting()) std::this_thread::yield();
    CHECK(StoreCommitChannel(store).Publish(25, record).ok());
  });
  auto got = channel.Await(25, 1, absl::Minutes(1));
  peer.join();
  REQUIRE(got.ok());
  CHECK(*got == record);
  CHECK(begun == 1);
  CHECK(ended == 1);
  CHECK_FALSE(waits.waiting());
  // A shard that never comes: waiting until the timeout, then not.
  CHECK(absl::IsDeadlineExceeded(channel.Await(50, 1, absl::Milliseconds(20)).status()));
  CHECK(begun == 2);
  CHECK(ended == 2);
}

}  // namespace shard_groups_test
}  // namespace tessera::engine
