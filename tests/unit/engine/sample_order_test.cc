#include "worker/engine/data/sample_order.h"

#include <catch2/catch.hpp>
#include <set>

#include "tests/support/temp_dir.h"
#include "worker/engine/data/deterministic_random.h"
#include "worker/engine/data/streaming_dataset.h"
#include "worker/engine/data/tokenizer.h"

namespace tessera::engine {
namespace sample_order_test {
using tessera::testing::TempDir;

bool IsPermutation(std::vector<int64_t> order, int64_t n) {
  std::sort(order.begin(), order.end());
  for (int64_t i = 0; i < n; ++i) {
    if (order[static_cast<size_t>(i)] != i) return false;
  }
  return static_cast<int64_t>(order.size()) == n;
}

TEST_CASE("the deterministic generator is fixed by its seed and unbiased in range") {
  DeterministicRandom a(42), b(42), c(43);
  const uint64_t first = a.Next();
  CHECK(first == b.Next());
  CHECK(first != c.Next());
  // Pinned: a change here would reorder every dataset and break exact resumption.
  DeterministicRandom pinned(1);
  CHECK(pinned.Next() == 0xb3f2af6d0fc710c5ull);
  std::vector<int> counts(5);
  DeterministicRandom r(7);
  for (int i = 0; i < 50000; ++i) ++counts[r.Below(5)];
  for (int c5 : counts) CHECK(std::abs(c5 - 10000) < 500);
}

TEST_CASE("an epoch's order is a permutation, fixed by seed and epoch") {
  const std::vector<int64_t> shards = {100, 37, 250, 13};
  ShuffleOptions o;
  o.seed = 5;
  o.num_canonical_nodes = 3;
  o.shuffle_block_size = 64;
  const auto e0 = EpochSampleOrder(shards, o, 0);
  CHECK(IsPermutation(e0, 400));
  CHECK(EpochSampleOrder(shards, o, 0) == e0);
  const auto e1 = EpochSampleOrder(shards, o, 1);
  CHECK(IsPermutation(e1, 400));
  CHECK(e1 != e0);
  o.seed = 6;
  CHECK(EpochSampleOrder(shards, o, 0) != e0);
  o.shuffle = false;
  const auto plain = EpochSampleOrder(shards, o, 3);
  CHECK(plain.front() == 0);
  CHECK(plain.back() == 399);
  CHECK(std::is_sorted(plain.begin(), plain.end()));
}

TEST_CASE("canonical nodes interleave: consecutive samples come from different spans") {
  ShuffleOptions o;
  o.num_canonical_nodes = 4;
  o.shuffle_block_size = 1 << 20;
  const auto order = EpochSampleOrder({64, 64, 64, 64}, o, 0);
  // Each span covers one shard here (shards are shuffled whole), so any 4 consecutive samples
  // come from 4 different shards.
  for (size_t i = 0; i + 4 <= order.size(); i += 4) {
    std::set<int64_t> shards;
    for (size_t k = i; k < i + 4; ++k) shards.insert(order[k] / 64);
    CHECK(shards.size() == 4);
  }
}

struct DatasetFixture {
  TempDir tmp;
  std::unique_ptr<StreamingDataset> Open(int64_t global_batch, uint64_t seed = 1) {
    ShuffleOptions o;
    o.seed = seed;
    o.num_canonical_nodes = 2;
    auto reader = TokenShardReader::Open(tmp.path);
    REQUIRE(reader.ok());
    auto ds = StreamingDataset::Create(*std::move(reader), o, global_batch);
    REQUIRE(ds.ok());
    return *std::move(ds);
  }
  DatasetFixture() {
    ShardWriter w(tmp.path, 3, 2, 7);
    for (uint32_t i = 0; i < 50; ++i) REQUIRE(w.Add({i, i, i}).ok());
    REQUIRE(w.Finish(MakeByteTokenizer()->ToJson(), 150).ok());
  }
};

TEST_CASE("the global batch is the same whatever the number of ranks reading it") {
  DatasetFixture f;
  auto ds = f.Open(8);
  DataState state;
  for (int step = 0; step < 9; ++step) {
    auto whole = ds->BatchSliceIds(state, 0, 8);
    REQUIRE(whole.ok());
    for (int ranks : {2, 4, 8}) {
      std::vector<int64_t> joined;
      for (int r = 0; r < ranks; ++r) {
        auto part = ds->BatchSliceIds(state, r * (8 / ranks), 8 / ranks);
        REQUIRE(part.ok());
        joined.insert(joined.end(), part->begin(), part->end());
      }
      CHECK(joined == *whole);
    }
    // Samples hold their id: reading gives the tokens of the ids.
    std::vector<int64_t> tokens(8 * 3);
    REQUIRE(ds->ReadBatchSlice(state, 0, 8, tokens.data()).ok());
    for (int i = 0; i < 8; ++i)
      CHECK(tokens[static_cast<size_t>(i * 3)] == (*whole)[static_cast<size_t>(i)]);
    state = ds->Advance(state);
  }
}

TEST_CASE("the state resumes at the exact sample and wraps epochs, skipping a partial batch") {
  DatasetFixture f;
  auto ds = f.Open(8);
  CHECK(ds->batches_per_epoch() == 6);  // 50 samples: 6 batches, 2 samples skipped
  DataState s;
  std::vector<std::vector<int64_t>> seen;
  for (int step = 0; step < 14; ++step) {
    CHECK(ds->StateAfter(step) == s);
    seen.push_back(*ds->BatchSliceIds(s, 0, 8));
    s = ds->Advance(s);
  }
  CHECK(ds->StateAfter(6) == DataState{1, 0});
  CHECK(ds->StateAfter(13) == DataState{2, 8});
  // No sample twice within an epoch.
  std::set<int64_t> epoch0;
  for (int step = 0; step < 6; ++step)
    epoch0.insert(seen[static_cast<size_t>(step)].begin(), seen[static_cast<size_t>(step)].end());
  CHECK(epoch0.size() == 48);
  // A new reader (a resumed run) at a saved state sees what the first one saw.
  auto resumed = f.Open(8);
  CHECK(*resumed->BatchSliceIds(DataState{1, 16}, 0, 8) == seen[8]);
  CHECK(resumed->BatchSliceIds(DataState{0, 48}, 0, 8).status().code() ==
        absl::StatusCode::kOutOfRange);
}

TEST_CASE("a dataset smaller than one global batch is refused") {
  DatasetFixture f;
  auto reader = TokenShardReader::Open(f.tmp.path);
  REQUIRE(reader.ok());
  auto ds = StreamingDataset::Create(*std::move(reader), ShuffleOptions{}, 64);
  CHECK(ds.status().message().find("has 50 samples, fewer than one global batch of 64") !=
        std::string::npos);
}

}  // namespace sample_order_test
}  // namespace tessera::engine
