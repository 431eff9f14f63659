#include "worker/engine/train/memory_checkpointer.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "base/status_macros.h"

namespace tessera::engine {

MemoryCheckpointer::MemoryCheckpointer(MemoryCheckpointStore store, Communicator& world,
                                       const RankContext& ctx, SaveRole role, torch::Device device)
    : store_(std::move(store)), world_(world), ctx_(ctx), role_(role), device_(device) {}

int MemoryCheckpointer::buddy() const {
  const int world = ctx_.world_size, per_node = ctx_.local_world_size;
  if (world <= per_node || world % per_node != 0) return ctx_.rank;
  return (ctx_.rank + per_node) % world;
}

absl::Status MemoryCheckpointer::Keep(const CheckpointManifest& manifest, int index,
                                      const torch::Tensor& flat, int64_t offset,
                                      int64_t count) const {
  ShardPayload payload;
  payload.offset = offset;
  payload.count = count;
  const int arrays = static_cast<int>(manifest.arrays.size());
  for (int a = 0; a < arrays; ++a) payload.arrays.push_back(flat.data_ptr<float>() + a * count);
  return store_.Put(manifest, index, role_.shard_count, payload);
}

absl::Status MemoryCheckpointer::Snapshot(const CheckpointManifest& manifest,
                                          const std::vector<torch::Tensor>& arrays,
                                          int64_t offset) {
  absl::Status status = KeepEverywhere(manifest, arrays, offset);
  if (!status.ok() && !warned_) {
    warned_ = true;
    spdlog::warn("in-memory checkpoint of step {} incomplete (said once): {}", manifest.step,
                 std::string(status.message()));
  }
  return status;
}

absl::Status MemoryCheckpointer::KeepEverywhere(const CheckpointManifest& manifest,
                                                const std::vector<torch::Tensor>& arrays,
                                                int64_t offset) {
  const int64_t count = arrays.front().numel();
  // The snapshot before stays until this one is whole on every node; older ones go.
  if (ctx_.local_rank == 0) store_.DropAllBut({last_step_, manifest.step});
  last_step_ = manifest.step;
  const torch::Tensor flat = torch::cat(arrays).contiguous();
  absl::Status status;
  if (role_.writes_shard) {
    status.Update(Keep(manifest, role_.shard_index, flat.to(torch::kCPU), offset, count));
  }
  const int to = buddy();
  if (to == ctx_.rank) return status;
  // What the buddy receives (whether to keep it, which shard, where it starts, its length),
  // then the shard itself: every rank sends to its buddy and receives from the rank whose
  // buddy it is.
  const int from = (ctx_.rank - ctx_.local_world_size + ctx_.world_size) % ctx_.world_size;
  const auto ints = torch::TensorOptions().dtype(torch::kInt64).device(device_);
  torch::Tensor meta =
      torch::tensor({int64_t{role_.writes_shard}, int64_t{role_.shard_index}, offset, count},
                    torch::kInt64)
          .to(device_);
  torch::Tensor their_meta = torch::empty({4}, ints);
  std::vector<int64_t> send(static_cast<size_t>(ctx_.world_size), 0), receive(send);
  send[static_cast<size_t>(to)] = 4;
  receive[static_cast<size_t>(from)] = 4;
  world_.AllToAll(their_meta, meta, receive, send);
  const torch::Tensor got = their_meta.to(torch::kCPU);
  const bool their_writes = got[0].item<int64_t>() != 0;
  const int their_index = static_cast<int>(got[1].item<int64_t>());
  const int64_t their_offset = got[2].item<int64_t>(), their_count = got[3].item<int64_t>();
  const int64_t arrays_n = static_cast<int64_t>(arrays.size());
  torch::Tensor sent = role_.writes_shard ? flat : flat.narrow(0, 0, 0);
  torch::Tensor theirs =
      torch::empty({their_writes ? arrays_n * their_count : 0},
                   torch::TensorOptions().dtype(torch::kFloat32).device(device_));
  send[static_cast<size_t>(to)] = sent.numel();
  receive[static_cast<size_t>(from)] = theirs.numel();
  world_.AllToAll(theirs, sent, receive, send);
  if (their_writes) {
    status.Update(Keep(manifest, their_index, theirs.to(torch::kCPU), their_offset, their_count));
  }
  return status;
}

std::vector<std::string> MemoryCheckpointer::AllGatherText(const std::string& mine) {
  const int world = ctx_.world_size;
  auto lengths = torch::zeros({world}, torch::TensorOptions().dtype(torch::kInt64));
  lengths[ctx_.rank] = static_cast<int64_t>(mine.size());
  lengths = lengths.to(device_);
  world_.AllGather(lengths);
  const torch::Tensor sizes = lengths.to(torch::kCPU);
  const int64_t longest = sizes.max().item<int64_t>();
  std::vector<std::string> texts(static_cast<size_t>(world));
  if (longest == 0) return texts;
  auto bytes = torch::zeros({world * longest}, torch::TensorOptions().dtype(torch::kUInt8));
  std::copy(mine.begin(), mine.end(), bytes.data_ptr<uint8_t>() + ctx_.rank * longest);
  bytes = bytes.to(device_);
  world_.AllGather(bytes);
  const torch::Tensor all = bytes.to(torch::kCPU);
  for (int r = 0; r < world; ++r) {
    const auto* begin = reinterpret_cast<const char*>(all.data_ptr<uint8_t>() + r * longest);
    texts[static_cast<size_t>(r)].assign(begin, static_cast<size_t>(sizes[r].item<int64_t>()));
  }
  return texts;
}

absl::StatusOr<bool> MemoryCheckpointer::Recover(const CheckpointFolder& folder,
                                                 const CheckpointFolder::Compatible& compatible) {
  // Each node's first rank speaks for the node's memory.
  const std::vector<std::string> texts =
      AllGatherText(ctx_.local_rank == 0 ? EncodeInventory(store_.Inventory()) : std::string());
  std::vector<std::vector<MemoryShard>> inventories;
  std::vector<int> speakers;
  for (int r = 0; r < ctx_.world_size; ++r) {
    if (texts[static_cast<size_t>(r)].empty()) continue;
    auto inventory = DecodeInventory(texts[static_cast<size_t>(r)]);
    if (!inventory.ok()) {
      if (ctx_.rank == 0) {
        spdlog::warn("rank {}'s in-memory checkpoints passed over: {}", r,
                     std::string(inventory.status().message()));
      }
      continue;
    }
    inventories.push_back(*std::move(inventory));
    speakers.push_back(r);
  }
  // Every rank chooses alike from the same inventories; rank 0, which reads the save folder,
  // says whether the choice is newer than the disk's newest.
  std::vector<std::string> refused;
  const auto choice = ChooseMemoryCheckpoint(inventories, -1, compatible, &refused);
  auto use = torch::zeros({1}, torch::TensorOptions().dtype(torch::kInt64).device(device_));
  if (ctx_.rank == 0) {
    const std::vector<int64_t> committed = folder.CommittedSteps();
    const int64_t on_disk = committed.empty() ? -1 : committed.front();
    for (const auto& why : refused) spdlog::warn("in-memory checkpoint refused: {}", why);
    if (choice && choice->manifest.step > on_disk) {
      use.fill_(1);
    } else if (choice) {
      spdlog::info("in-memory checkpoint of step {} not used: the save folder has step {}",
                   choice->manifest.step, on_disk);
    }
  }
  world_.Broadcast(use, 0);
  if (use.to(torch::kCPU).item<int64_t>() == 0) return false;

  const CheckpointManifest& manifest = choice->manifest;
  absl::Status copied;
  std::vector<int> holders;
  for (size_t k = 0; k < manifest.shards.size(); ++k) {
    const int holder = speakers[static_cast<size_t>(choice->holders[k])];
    holders.push_back(holder / std::max(1, ctx_.local_world_size));
    if (holder != ctx_.rank) continue;
    copied.Update(folder.PrepareStep(manifest.step));
    copied.Update(CopyShardDurably(store_.ShardPath(manifest.step, manifest.shards[k].file),
                                   folder.StepFolder(manifest.step)));
  }
  if (!copied.ok())
    spdlog::warn("an in-memory checkpoint's shard not copied: {}", std::string(copied.message()));
  auto failed = torch::full({1}, int64_t{copied.ok() ? 0 : 1},
                            torch::TensorOptions().dtype(torch::kInt64).device(device_));
  world_.AllReduceSum(failed);
  if (failed.to(torch::kCPU).item<int64_t>() > 0) return false;
  auto committed = torch::zeros({1}, torch::TensorOptions().dtype(torch::kInt64).device(device_));
  if (ctx_.rank == 0) {
    if (absl::Status st = folder.Commit(manifest); st.ok()) {
      committed.fill_(1);
      std::sort(holders.begin(), holders.end());
      holders.erase(std::unique(holders.begin(), holders.end()), holders.end());
      spdlog::info(
          "recovered step {} from the memory of node{} {} of this attempt ({} shards): "
          "committed in {}",
          manifest.step, holders.size() == 1 ? "" : "s", absl::StrJoin(holders, ", "),
          manifest.shards.size(), folder.StepFolder(manifest.step));
    } else {
      spdlog::warn("in-memory checkpoint of step {} not committed: {}", manifest.step,
                   std::string(st.message()));
    }
  }
  world_.Broadcast(committed, 0);
  return committed.to(torch::kCPU).item<int64_t>() != 0;
}

}  // namespace tessera::engine
