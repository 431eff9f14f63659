#include "scheduler/service/node_api.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "scheduler/placement/placer.h"
#include "scheduler/placement/proto_convert.h"
#include "scheduler/placement/quota_fit.h"
#include "scheduler/placement/validate.h"
#include "scheduler/placement/wait_text.h"
#include "scheduler/service/spare_nodes.h"
#include "scheduler/service/spare_placement.h"
#include "scheduler/service/utilization.h"
#include "services/common/node_labels.h"
#include "services/common/rpc.h"
#include "services/store/cas_retry.h"

namespace tessera::scheduler {
namespace {

// Why a waiting run does not take the hot spares that could hold it (the queue's dry run, as
// the cycle, sees spares as unschedulable); empty when no spare could.
std::string SpareNote(const QueuedRun& run, const v1::Run& queued,
                      const std::vector<v1::Node>& nodes) {
  int gpus = 0;
  int spares = 0;
  for (const v1::Node& n : nodes) {
    if (!n.spare()) continue;
    if (!run.request.cluster.empty() && n.cluster() != run.request.cluster) continue;
    if (!run.request.gpu_type.empty() && n.gpu_type() != run.request.gpu_type) continue;
    gpus += n.gpu_count();
    ++spares;
  }
  if (spares == 0) return "";
  if (ResumesAfterNodeFault(queued)) {
    return "; it resumes after a node fault, so the next cycle tries the hot spares first";
  }
  return absl::StrCat("; ", spares, spares == 1 ? " node" : " nodes", " (", gpus,
                      " GPUs) kept as hot spares for runs resuming after a node fault");
}

}  // namespace

NodeApi::NodeApi(std::shared_ptr<store::NodeStore> nodes, std::shared_ptr<RunsClient> runs,
                 std::shared_ptr<IdempotentCalls> idem, std::shared_ptr<TeamPolicy> teams,
                 std::shared_ptr<Clock> clock, absl::Duration shrink_after)
    : nodes_(std::move(nodes)),
      runs_(std::move(runs)),
      idem_(std::move(idem)),
      teams_(std::move(teams)),
      clock_(std::move(clock)),
      resizing_(clock_, shrink_after) {}

absl::Status NodeApi::ListNodes(const Who&, const v1::ListNodesRequest& req,
                                v1::ListNodesResponse* resp) {
  if (req.filter().limit() < 0)
    return absl::InvalidArgumentError("filter.limit: must not be negative");
  auto nodes = nodes_->ListNodes(req.filter());
  if (!nodes.ok()) return nodes.status();
  for (auto& n : *nodes) *resp->add_nodes() = std::move(n);
  return absl::OkStatus();
}

absl::Status NodeApi::GetNode(const Who& who, const v1::GetNodeRequest& req,
                              v1::GetNodeResponse* resp) {
  if (req.name().empty()) return absl::InvalidArgumentError("name: required");
  auto node = nodes_->GetNode(req.name());
  if (!node.ok()) return node.status();
  *resp->mutable_node() = *std::move(node);
  auto active = runs_->ListRuns(
      {v1::RUN_STATUS_STARTING, v1::RUN_STATUS_RUNNING, v1::RUN_STATUS_TERMINATING});
  if (!active.ok()) return active.status();
  for (const auto& run : *active) {
    if (!who.may_see(run.user())) continue;
    for (const auto& n : run.nodes()) {
      if (n.node_name() == req.name()) {
        resp->add_run_names(run.name());
        break;
      }
    }
  }
  return absl::OkStatus();
}

absl::Status NodeApi::SetNodeLabels(const Who& who, const v1::SetNodeLabelsRequest& req,
                                    v1::SetNodeLabelsResponse* resp) {
  TESSERA_RETURN_IF_ERROR(RequireOperator(who, "labelling a node"));
  if (req.name().empty()) return absl::InvalidArgumentError("name: required");
  TESSERA_RETURN_IF_ERROR(ValidateNodeLabels(req.labels(), "labels"));
  return idem_->Run(absl::StrCat("SetNodeLabels/", who.user), req.idempotency_key(), req, resp,
                    [&] { return SetLabels(req, resp); });
}

absl::Status NodeApi::SetLabels(const v1::SetNodeLabelsRequest& req,
                                v1::SetNodeLabelsResponse* resp) {
  auto updated = store::UpdateNodeWithRetry(
      *nodes_, req.name(),
      [&](v1::Node& next, std::vector<v1::NodeEvent>&) -> absl::StatusOr<store::NodeChange> {
        std::set<std::string> set_by_people = OperatorLabelKeys(next.labels());
        for (const auto& [k, v] : req.labels()) {
          if (v.empty()) {
            next.mutable_labels()->erase(k);
            set_by_people.erase(k);
          } else {
            (*next.mutable_labels())[k] = v;
            set_by_people.insert(k);
          }
        }
        TESSERA_RETURN_IF_ERROR(RecordOperatorLabelKeys(set_by_people, *next.mutable_labels()));
        return store::NodeChange::kWrite;
      });
  if (!updated.ok()) return updated.status();
  *resp->mutable_node() = *std::move(updated);
  return absl::OkStatus();
}

absl::Status NodeApi::RemoveNode(const Who& who, const v1::RemoveNodeRequest& req,
                                 v1::RemoveNodeResponse* resp) {
  TESSERA_RETURN_IF_ERROR(RequireOperator(who, "removing a node"));
  if (req.name().empty()) return absl::InvalidArgumentError("name: required");
  return idem_->Run(absl::StrCat("RemoveNode/", who.user), req.idempotency_key(), req, resp,
                    [&] { return Remove(req); });
}

absl::Status NodeApi::Remove(const v1::RemoveNodeRequest& req) {
  auto node = nodes_->GetNode(req.name());
  if (!node.ok()) return node.status();
  if (node->liveness() == v1::NODE_LIVENESS_ONLINE) {
    return absl::FailedPreconditionError(
        absl::StrCat("node ", req.name(),
                     " is online; stop its worker (or wait for its lease to expire) first"));
  }
  return nodes_->DeleteNode(req.name());
}

absl::Status NodeApi::GetQueue(const Who& who, const v1::GetQueueRequest& req,
                               v1::GetQueueResponse* resp) {
  if (req.limit() < 0) return absl::InvalidArgumentError("limit: must not be negative");
  auto queued = runs_->ListRuns({v1::RUN_STATUS_QUEUED});
  if (!queued.ok()) return queued.status();
  auto active = runs_->ListRuns(
      {v1::RUN_STATUS_STARTING, v1::RUN_STATUS_RUNNING, v1::RUN_STATUS_TERMINATING});
  if (!active.ok()) return active.status();
  auto nodes = nodes_->ListNodes({});
  if (!nodes.ok()) return nodes.status();
  // A dry run of the next cycle tells each queued run's position and why it waits.
  ClusterState state;
  if (teams_) state.quotas = teams_->Quotas();
  for (const auto& n : *nodes) {
    state.nodes.push_back(NodeInfoFromProto(n));
    // As in the cycle's ordinary pass: only resumptions go to a spare (SparePlacement).
    if (n.spare()) state.nodes.back().schedulable = false;
  }
  for (const auto& r : *active) {
    v1::Attempt a;
    a.set_run_id(r.id());
    a.set_resumption_index(r.resumption_index());
    *a.mutable_nodes() = r.nodes();
    if (r.nodes_size() > 0) state.running.push_back(AllocationFromProto(r, a));
  }
  std::vector<QueuedRun> queue;
  std::vector<const v1::Run*> runs;
  for (const auto& r : *queued) {
    if (!req.cluster().empty() && r.spec().compute().cluster() != req.cluster()) continue;
    queue.push_back(QueuedRunFromProto(r, absl::ToUnixMicros(clock_->Now())));
    queue.back().min_nodes = resizing_.MinNodesNow(r);  // as the cycle does
    runs.push_back(&r);
  }
  if (teams_) teams_->AssignShareRanks(runs, queue);
  Placer placer(state);
  const PlacementDecision decision = placer.PlaceQueue(queue);
  // As the cycle's last pass: preemptible runs left waiting may borrow the spares' idle GPUs.
  std::set<std::string> placed;
  for (const auto& p : decision.placements) placed.insert(p.run_id);
  const std::set<std::string> no_suspects;  // the cycle's; the dry run does not know them
  const PlacementDecision on_spares =
      SparePlacement(*nodes, no_suspects, absl::ToUnixMicros(clock_->Now()))
          .Preemptible(MayBorrowSpares(queue, *queued, placed), state, decision, {});
  std::map<std::string, size_t> index_of;
  for (size_t i = 0; i < queue.size(); ++i) index_of[queue[i].run_id] = i;
  int position = 0;
  auto add = [&](size_t i, const std::string& why) {
    if (req.limit() > 0 && resp->entries_size() >= req.limit()) return;
    v1::QueueEntry* e = resp->add_entries();
    if (who.may_see(runs[i]->user())) {
      *e->mutable_run() = *runs[i];
    } else {
      // Other users' runs show their place in the queue and what they ask for, nothing that
      // names them or their owner.
      v1::Run& shown = *e->mutable_run();
      shown.set_name("(another user's run)");
      shown.set_status(runs[i]->status());
      shown.set_team(runs[i]->team());
      *shown.mutable_created_at() = runs[i]->created_at();
      *shown.mutable_spec()->mutable_compute() = runs[i]->spec().compute();
      shown.mutable_spec()->mutable_scheduling()->set_priority(
          runs[i]->spec().scheduling().priority());
    }
    e->set_position(position++);
    e->set_waiting_reason(why);
  };
  for (const auto& p : decision.placements) {
    const size_t i = index_of[p.run_id];
    std::string why = "placed in the next cycle";
    const std::string on = RunResizing::PlacedOn(*runs[i], static_cast<int>(p.nodes.size()));
    if (!on.empty()) absl::StrAppend(&why, ", ", on);
    if (p.borrowed) absl::StrAppend(&why, ", on borrowed GPUs");
    add(i, why);
  }
  for (const auto& p : on_spares.placements) {
    add(index_of[p.run_id],
        "placed in the next cycle, on a hot spare's idle GPUs (stopped if a run resuming after a "
        "node fault needs them)");
  }
  std::set<std::string> borrowing;
  for (const auto& p : on_spares.placements) borrowing.insert(p.run_id);
  std::map<std::string, const v1::Run*> by_id;
  for (const v1::Run* r : runs) by_id[r->id()] = r;
  for (const Waiting& w : decision.waiting) {
    if (borrowing.count(queue[w.queue_index].run_id)) continue;
    std::string holder_name;
    if (w.reservation >= 0) {
      // The run holding the reservation, by name when the caller may see it.
      auto holder = by_id.find(decision.reservations[w.reservation].run_id);
      holder_name = holder == by_id.end() ? std::string("a run ahead of it")
                    : who.may_see(holder->second->user())
                        ? absl::StrCat("run ", holder->second->name())
                        : std::string("another user's run");
    }
    const bool for_capacity = w.reason == WaitReason::kWaitingForCapacity ||
                              w.reason == WaitReason::kHoldsReservation ||
                              w.reason == WaitReason::kNotEnoughSchedulableNodes;
    add(w.queue_index,
        DescribeWaiting(w, queue[w.queue_index], placer, holder_name) +
            (for_capacity ? SpareNote(queue[w.queue_index], *runs[w.queue_index], *nodes) : "") +
            resizing_.QueueNote(*runs[w.queue_index]));
  }
  return absl::OkStatus();
}

absl::Status NodeApi::CheckFit(const Who&, const v1::CheckFitRequest& req,
                               v1::CheckFitResponse* resp) {
  auto nodes = nodes_->ListNodes({});
  if (!nodes.ok()) return nodes.status();
  std::vector<NodeInfo> infos;
  for (const auto& n : *nodes) infos.push_back(NodeInfoFromProto(n));
  const ResourceRequest request = RequestFromProto(req.compute());
  TESSERA_RETURN_IF_ERROR(ValidateFits(request, Inventory(infos)));
  if (teams_ == nullptr || req.user().empty()) return absl::OkStatus();
  TESSERA_ASSIGN_OR_RETURN(std::string team, teams_->TeamOfUser(req.user()));
  TESSERA_RETURN_IF_ERROR(
      ValidateQuotaFits(request, team, req.preemptible(), infos, teams_->Quotas()));
  resp->set_team(team);
  return absl::OkStatus();
}

absl::Status NodeApi::GetUtilization(const Who&, const v1::GetUtilizationRequest& req,
                                     v1::GetUtilizationResponse* resp) {
  TESSERA_ASSIGN_OR_RETURN(auto nodes, nodes_->ListNodes({}));
  TESSERA_ASSIGN_OR_RETURN(
      auto runs,
      runs_->ListRuns({v1::RUN_STATUS_PENDING, v1::RUN_STATUS_QUEUED, v1::RUN_STATUS_STARTING,
                       v1::RUN_STATUS_RUNNING, v1::RUN_STATUS_TERMINATING}));
  *resp = Utilization(runs, nodes, clock_->Now(), req.cluster());
  return absl::OkStatus();
}

}  // namespace tessera::scheduler
