#include "worker/engine/train/block_parameter_sharding.h"

#include <c10/core/StorageImpl.h>

#include <algorithm>
#include <unordered_map>

namespace tessera::engine {
namespace {

// Gives `t`'s storage `bytes` of fresh memory, in place: every tensor viewing that storage (the
// parameters, autograd's saved references to them) sees the new memory.
void Allocate(torch::Tensor& t, int64_t bytes) {
  c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
  storage->set_data_ptr_noswap(storage->allocator()->allocate(static_cast<size_t>(bytes)));
  storage->set_nbytes(static_cast<size_t>(bytes));
}

// Frees `t`'s storage's memory, keeping the storage (and every view of it) for the next Allocate.
void Free(torch::Tensor& t) {
  c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
  storage->set_data_ptr_noswap(at::DataPtr(nullptr, t.device()));
  storage->set_nbytes(0);
}

}  // namespace

// Consecutive pieces of one owner that continue each other become one collective.
void BlockParameterSharding::AddPiece(std::vector<Piece>& pieces, Piece p) {
  if (!pieces.empty()) {
    auto& last = pieces.back();
    if (last.owner == p.owner && last.shard_offset + last.count == p.shard_offset &&
        last.unit_offset + last.count == p.unit_offset) {
      last.count += p.count;
      return;
    }
  }
  pieces.push_back(p);
}

BlockParameterSharding::BlockParameterSharding(Gpt& model, ShardGroups& groups, int64_t numel)
    : ParameterSharding(numel, groups.shard_group_size(), groups.shard_index()),
      model_(model),
      groups_(groups),
      group_(groups.shard_group()),
      rank_(groups.shard_index()) {
  torch::NoGradGuard no_grad;
  const auto all = model_->parameters();
  const auto options = all.front().options().requires_grad(false);
  // The flat buffer's order is the module's (flat_parameters.h): a parameter's offset there.
  std::unordered_map<const void*, int64_t> offset_of;
  int64_t offset = 0;
  for (const auto& p : all) {
    offset_of[p.unsafeGetTensorImpl()] = offset;
    offset += p.numel();
  }
  const int64_t size = shard_size(), mine_begin = rank_ * size;
  shard_params_ = torch::zeros({size}, options);
  shard_grads_ = torch::zeros({size}, options);
  decay_ = torch::zeros({size}, options);
  held_bytes_ = peak_held_bytes_ = size * static_cast<int64_t>(shard_params_.element_size());

  for (ParameterUnit& described : model_->ParameterUnits()) {
    Unit unit;
    unit.name = described.name;
    int64_t unit_numel = 0;
    for (const auto& p : described.parameters) unit_numel += p.numel();
    unit.params = torch::empty({unit_numel}, options);
    unit.grads = torch::empty({unit_numel}, options);
    unit.bytes = unit_numel * static_cast<int64_t>(unit.params.element_size());
    int64_t in_unit = 0;
    for (auto& p : described.parameters) {
      const int64_t begin = offset_of.at(p.unsafeGetTensorImpl()), n = p.numel();
      const auto flat = p.detach().reshape({n});
      for (int64_t owner = begin / size; owner * size < begin + n; ++owner) {
        const int64_t lo = std::max(begin, owner * size),
                      hi = std::min(begin + n, (owner + 1) * size);
        AddPiece(unit.pieces, Piece{static_cast<int>(owner), lo - owner * size,
                                    in_unit + (lo - begin), hi - lo});
        if (owner == rank_) {
          shard_params_.narrow(0, lo - mine_begin, hi - lo)
              .copy_(flat.narrow(0, lo - begin, hi - lo));
          if (p.dim() >= 2) decay_.narrow(0, lo - mine_begin, hi - lo).fill_(1.0);
        }
      }
      p.set_data(unit.params.narrow(0, in_unit, n).view(p.sizes()));
      p.mutable_grad() = unit.grads.narrow(0, in_unit, n).view(p.sizes());
      in_unit += n;
    }
    Free(unit.params);
    Free(unit.grads);
    units_.push_back(std::move(unit));
  }
  model_->SetParameterHooks(this);
}

BlockParameterSharding::~BlockParameterSharding() {
  model_->SetParameterHooks(nullptr);
  for (auto& unit : units_) {
    for (auto& pending : unit.gathering) pending->Wait();
    for (auto& pending : unit.reducing) pending->Wait();
  }
}

void BlockParameterSharding::StartGather(Unit& unit) {
  if (unit.params_present) return;
  Allocate(unit.params, unit.bytes);
  unit.params_present = true;
  held_bytes_ += unit.bytes;
  peak_held_bytes_ = std::max(peak_held_bytes_, held_bytes_);
  torch::NoGradGuard no_grad;
  for (const Piece& piece : unit.pieces) {
    auto part = unit.params.narrow(0, piece.unit_offset, piece.count);
    if (piece.owner == rank_) part.copy_(shard_params_.narrow(0, piece.shard_offset, piece.count));
    unit.gathering.push_back(group_.StartBroadcast(part, piece.owner));
  }
}

void BlockParameterSharding::Gather(Unit& unit) {
  StartGather(unit);
  for (auto& pending : unit.gathering) pending->Wait();
  unit.gathering.clear();
}

void BlockParameterSharding::ReleaseParams(Unit& unit) {
  if (!unit.params_present) return;
  for (auto& pending : unit.gathering) pending->Wait();
  unit.gathering.clear();
  Free(unit.params);
  unit.params_present = false;
  held_bytes_ -= unit.bytes;
}

void BlockParameterSharding::PrepareGrads(Unit& unit) {
  if (unit.grads_present) return;
  Allocate(unit.grads, unit.bytes);
  unit.grads.zero_();
  unit.grads_present = true;
}

void BlockParameterSharding::StartReduce(Unit& unit) {
  for (const Piece& piece : unit.pieces) {
    auto part = unit.grads.narrow(0, piece.unit_offset, piece.count);
    unit.reducing.push_back(group_.StartReduceSum(part, piece.owner));
  }
}

void BlockParameterSharding::FinishReduce(Unit& unit) {
  for (auto& pending : unit.reducing) pending->Wait();
  unit.reducing.clear();
  torch::NoGradGuard no_grad;
  for (const Piece& piece : unit.pieces) {
    if (piece.owner != rank_) continue;
    shard_grads_.narrow(0, piece.shard_offset, piece.count)
        .add_(unit.grads.narrow(0, piece.unit_offset, piece.count));
  }
  Free(unit.grads);
  unit.grads_present = false;
}

void BlockParameterSharding::FinishReductions() {
  while (!reducing_.empty()) {
    FinishReduce(*reducing_.front());
    reducing_.pop_front();
  }
}

void BlockParameterSharding::BeginStep() {
  shard_grads_.zero_();
  Gather(units_.front());
  PrepareGrads(units_.front());
}

void BlockParameterSharding::BeforeForward(int64_t block) {
  Gather(BlockUnit(block));
  if (block + 1 < blocks()) StartGather(BlockUnit(block + 1));
}

void BlockParameterSharding::AfterForward(int64_t block, bool backward_follows) {
  // Backward starts with the last block: keep it rather than free it and gather it again.
  if (backward_follows && block + 1 == blocks()) return;
  ReleaseParams(BlockUnit(block));
}

void BlockParameterSharding::BeforeBackward(int64_t block) {
  Unit& unit = BlockUnit(block);
  Gather(unit);
  PrepareGrads(unit);
  if (block > 0) StartGather(BlockUnit(block - 1));
}

void BlockParameterSharding::AfterBackward(int64_t block) {
  Unit& unit = BlockUnit(block);
  ReleaseParams(unit);
  StartReduce(unit);
  reducing_.push_back(&unit);
  // One reduction in flight behind the next block's backward.
  while (reducing_.size() > 1) {
    FinishReduce(*reducing_.front());
    reducing_.pop_front();
  }
}

void BlockParameterSharding::MicrobatchDone() {
  FinishReductions();
  // A forward without its backward (none in training) leaves nothing gathered either.
  for (int64_t b = 0; b < blocks(); ++b) ReleaseParams(BlockUnit(b));
}

torch::Tensor BlockParameterSharding::ReduceGradients() {
  MicrobatchDone();
  Unit& rest = units_.front();
  StartReduce(rest);
  FinishReduce(rest);
  ReleaseParams(rest);
  if (groups_.replicas() > 1) groups_.replica_group().AllReduceSum(shard_grads_);
  return shard_grads_;
}

}  // namespace tessera::engine
