#pragma once
// ZeRO-3 (FULL_SHARD; HYBRID_SHARD within each shard group): between steps a rank holds only
// its shard of the flat parameter buffer. The model's parameters are grouped into units (each
// block; the embedding with the final norm, which a step uses first and last); a unit's
// parameters are views into a buffer of its own whose memory is released when the unit is not
// in use and allocated again, in place, when it is gathered: autograd's saved references to
// the parameters stay valid across a release and a gather.
//
// A step: BeginStep gathers the embedding unit. Block b's forward gathers b (b + 1's gather
// already started, so it overlaps b's compute) and frees it after; backward gathers b again
// (b - 1's gather started), and once b's backward is done reduces b's gradients to the ranks
// that own them (overlapping b - 1's backward) and frees b's parameters and gradients.
// ReduceGradients reduces the embedding unit's gradients, frees it, and (hybrid) sums the
// shards across replicas.
//
// Each element has one owner, the rank whose shard holds it, so a unit's gather is one
// broadcast from each owner of part of it, and its reduction one reduce to each.

#include <torch/torch.h>

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "worker/engine/dist/communicator.h"
#include "worker/engine/model/gpt.h"
#include "worker/engine/train/parameter_sharding.h"
#include "worker/engine/train/shard_groups.h"

namespace tessera::engine {

class BlockParameterSharding final : public ParameterSharding, private BlockParameterHooks {
 public:
  // Takes this rank's shard from `model`'s current parameters (the same on every rank), frees
  // the rest, and hooks the model's blocks until destroyed.
  BlockParameterSharding(Gpt& model, ShardGroups& groups, int64_t numel);
  ~BlockParameterSharding() override;

  torch::Tensor ParamShard() override { return shard_params_; }
  torch::Tensor DecayShard() override { return decay_; }
  void BeginStep() override;
  void MicrobatchDone() override;
  torch::Tensor ReduceGradients() override;
  void ShardUpdated() override {}
  int64_t held_bytes() const override { return held_bytes_; }
  int64_t peak_held_bytes() const override { return peak_held_bytes_; }

 private:
  // Elements [unit_offset, unit_offset + count) of a unit are elements
  // [shard_offset, shard_offset + count) of rank `owner`'s shard.
  struct Piece {
    int owner = 0;
    int64_t shard_offset = 0, unit_offset = 0, count = 0;
  };
  struct Unit {
    std::string name;
    torch::Tensor params, grads;  // the unit's elements; memory only while present
    int64_t bytes = 0;
    std::vector<Piece> pieces;
    bool params_present = false, grads_present = false;
    std::vector<std::unique_ptr<PendingCollective>> gathering, reducing;
  };

  static void AddPiece(std::vector<Piece>& pieces, Piece piece);

  void BeforeForward(int64_t block) override;
  void AfterForward(int64_t block, bool backward_follows) override;
  void BeforeBackward(int64_t block) override;
  void AfterBackward(int64_t block) override;

  Unit& BlockUnit(int64_t block) { return units_[static_cast<size_t>(block + 1)]; }
  int64_t blocks() const { return static_cast<int64_t>(units_.size()) - 1; }
  // Allocates the unit's parameters and starts their broadcasts (no-op if present or started).
  void StartGather(Unit& unit);
  // Waits for the unit's parameters, starting their gather first if need be.
  void Gather(Unit& unit);
  void ReleaseParams(Unit& unit);
  // Allocates the unit's gradients, zeroed, for backward to accumulate into.
  void PrepareGrads(Unit& unit);
  void StartReduce(Unit& unit);
  // Waits for the unit's reduction, adds the owned part to the shard's gradients, frees them.
  void FinishReduce(Unit& unit);
  void FinishReductions();

  Gpt model_;
  ShardGroups& groups_;
  Communicator& group_;  // the shard group
  int rank_ = 0;
  torch::Tensor shard_params_, shard_grads_, decay_;
  std::vector<Unit> units_;     // the rest first, then the blocks
  std::deque<Unit*> reducing_;  // units whose gradients are being reduced, oldest first
  int64_t held_bytes_ = 0, peak_held_bytes_ = 0;
};

}  // namespace tessera::engine
