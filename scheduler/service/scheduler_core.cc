// The leader's placement cycle.
#include "scheduler/service/scheduler_core.h"

#include <spdlog/spdlog.h>

#include "absl/hash/hash.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"
#include "scheduler/placement/placer.h"
#include "scheduler/placement/proto_convert.h"
#include "services/common/status_util.h"

namespace tessera::scheduler {
namespace {

v1::Attempt AttemptOf(const v1::Run& run) {
  v1::Attempt a;
  a.set_run_id(run.id());
  a.set_resumption_index(run.resumption_index());
  *a.mutable_nodes() = run.nodes();
  return a;
}

std::string HostOf(const std::string& address) {
  if (address.empty()) return "127.0.0.1";
  const auto colon = address.rfind(':');
  return colon == std::string::npos ? address : address.substr(0, colon);
}

}  // namespace

SchedulerCore::SchedulerCore(std::shared_ptr<store::NodeStore> nodes,
                             std::shared_ptr<RunsClient> runs,
                             std::shared_ptr<WorkerRegistry> workers, std::shared_ptr<Clock> clock,
                             SchedulerConfig config, std::shared_ptr<HealthClient> health)
    : nodes_(std::move(nodes)),
      runs_(std::move(runs)),
      workers_(std::move(workers)),
      clock_(std::move(clock)),
      config_(config),
      health_(std::move(health)) {}

void SchedulerCore::NodeDrained(const std::string& run_id, int resumption,
                                const std::string& node) {
  absl::MutexLock lock(&mu_);
  auto it = draining_.find(run_id);
  if (it == draining_.end() || it->second.run.resumption_index() != resumption) return;
  auto* nodes = it->second.run.mutable_nodes();
  for (int i = 0; i < nodes->size(); ++i) {
    if (nodes->Get(i).node_name() == node) {
      nodes->DeleteSubrange(i, 1);
      break;
    }
  }
  if (nodes->empty()) draining_.erase(it);
}

void SchedulerCore::NodeLostWhileDraining(const std::string& node) {
  std::vector<std::pair<std::string, int>> affected;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, d] : draining_) affected.emplace_back(id, d.run.resumption_index());
  }
  for (const auto& [id, k] : affected) NodeDrained(id, k, node);
}

std::string SchedulerCore::NextCommandId() {
  absl::MutexLock lock(&mu_);
  return absl::StrCat("cmd-", next_command_++);
}

int64_t SchedulerCore::placements_total() const {
  absl::MutexLock lock(&mu_);
  return placements_total_;
}

absl::StatusOr<CycleStats> SchedulerCore::RunCycle() {
  CycleStats stats;
  // One read of the runs and one of the nodes per cycle; what the cycle changes it learns from
  // the answers to its own writes.
  auto runs =
      runs_->ListRuns({v1::RUN_STATUS_PENDING, v1::RUN_STATUS_QUEUED, v1::RUN_STATUS_STARTING,
                       v1::RUN_STATUS_RUNNING, v1::RUN_STATUS_TERMINATING});
  if (!runs.ok()) return runs.status();
  auto nodes = nodes_->ListNodes({});
  if (!nodes.ok()) return nodes.status();
  std::vector<v1::Run> pending, queued, active;
  for (auto& r : *runs) {
    if (r.status() == v1::RUN_STATUS_PENDING) {
      pending.push_back(std::move(r));
    } else if (r.status() == v1::RUN_STATUS_QUEUED) {
      queued.push_back(std::move(r));
    } else {
      active.push_back(std::move(r));
    }
  }
  {
    absl::MutexLock lock(&mu_);
    active_.clear();
    for (const auto& r : active) active_[r.id()] = r;
    // Forget what we tracked for attempts that are no longer active.
    std::erase_if(attempts_, [&](const auto& kv) {
      auto it = active_.find(kv.first.first);
      return it == active_.end() || it->second.resumption_index() != kv.first.second;
    });
  }
  TESSERA_RETURN_IF_ERROR(AdmitPending(pending, stats, queued));
  TESSERA_RETURN_IF_ERROR(ExpireLeases(*nodes, active, stats, queued));
  SendStops(active, stats);

  // Attempts that ended above (lost nodes) hold nothing any more, and their runs may be back
  // in the queue: place against what is still active.
  std::vector<v1::Run> still_active;
  {
    absl::MutexLock lock(&mu_);
    for (auto& r : active) {
      if (active_.count(r.id())) still_active.push_back(std::move(r));
    }
  }
  if (!queued.empty()) TESSERA_RETURN_IF_ERROR(Place(queued, still_active, *nodes, stats));
  return stats;
}

absl::Status SchedulerCore::AdmitPending(const std::vector<v1::Run>& pending, CycleStats& stats,
                                         std::vector<v1::Run>& queued) {
  for (const auto& run : pending) {
    v1::Attempt a;
    a.set_run_id(run.id());
    a.set_resumption_index(run.resumption_index() + 1);
    a.set_status(v1::RUN_STATUS_QUEUED);
    auto admitted = runs_->RecordAttempt(a);
    if (absl::IsUnavailable(admitted.status())) return admitted.status();
    if (!admitted.ok()) continue;
    ++stats.admitted;
    queued.push_back(*std::move(admitted));
  }
  return absl::OkStatus();
}

absl::Status SchedulerCore::ExpireLeases(std::vector<v1::Node>& nodes,
                                         const std::vector<v1::Run>& active, CycleStats& stats,
                                         std::vector<v1::Run>& queued) {
  const absl::Time now = clock_->Now();
  for (v1::Node& node : nodes) {
    if (node.liveness() != v1::NODE_LIVENESS_ONLINE || !node.has_lease_expires_at() ||
        FromProtoTime(node.lease_expires_at()) > now) {
      continue;
    }
    v1::Node lost = node;
    lost.set_liveness(v1::NODE_LIVENESS_LOST);
    v1::NodeEvent event;
    event.set_node_name(node.name());
    event.set_type(v1::NODE_EVENT_TYPE_LOST);
    *event.mutable_time() = ToProtoTime(now);
    event.mutable_actor()->set_kind(v1::ACTOR_KIND_SYSTEM);
    event.mutable_actor()->set_name("scheduler");
    event.set_reason(absl::StrCat("no heartbeat since ",
                                  absl::FormatTime(FromProtoTime(node.last_heartbeat_at())),
                                  "; lease expired"));
    auto updated = nodes_->UpdateNode(lost, node.version(), {event});
    if (!updated.ok()) continue;  // a heartbeat won the race: the node is alive
    node = *std::move(updated);
    ++stats.lost_nodes;
    spdlog::warn("node {} lost: lease expired", node.name());
    NodeLostWhileDraining(node.name());
    for (const auto& run : active) {
      bool on_node = false;
      for (const auto& n : run.nodes()) on_node = on_node || n.node_name() == node.name();
      if (!on_node) continue;
      AttemptState state;
      {
        absl::MutexLock lock(&mu_);
        state = attempts_[{run.id(), run.resumption_index()}];
      }
      state.first_failed_node = node.name();
      // The other nodes stop their ranks; the lost node's worker fences itself.
      StopAttemptOn(run, v1::ATTEMPT_END_REASON_NODE_FAILURE, "a node of the run was lost");
      v1::Run ended;
      TESSERA_RETURN_IF_ERROR(EndAttempt(run.id(), run.resumption_index(), state,
                                         run.stop_requested() ? v1::ATTEMPT_END_REASON_STOPPED
                                                              : v1::ATTEMPT_END_REASON_NODE_FAILURE,
                                         v1::DETECTION_METHOD_LEASE_EXPIRY,
                                         absl::StrCat("node ", node.name(), " was lost"), &ended));
      if (ended.status() == v1::RUN_STATUS_QUEUED) queued.push_back(std::move(ended));
    }
    NodeLostWhileDraining(node.name());  // its worker fenced itself: nothing runs there
  }
  return absl::OkStatus();
}

void SchedulerCore::SendStops(const std::vector<v1::Run>& active, CycleStats& stats) {
  const absl::Time now = clock_->Now();
  for (const auto& run : active) {
    if (run.status() != v1::RUN_STATUS_TERMINATING) continue;
    AttemptState state;
    {
      absl::MutexLock lock(&mu_);
      state = attempts_[{run.id(), run.resumption_index()}];
    }
    if (state.stop_sent_at == absl::InfinitePast()) {
      StopAttemptOn(run, v1::ATTEMPT_END_REASON_STOPPED, run.status_reason());
      ++stats.stops_sent;
    } else if (now - state.stop_sent_at > config_.stop_grace + 2 * config_.lease) {
      // The workers never confirmed: their leases would have expired had they been gone, so
      // they are alive but silent. Record the stop; fencing keeps the ranks from overlapping.
      (void)EndAttempt(run.id(), run.resumption_index(), state, v1::ATTEMPT_END_REASON_STOPPED,
                       v1::DETECTION_METHOD_OPERATOR, "stop not confirmed by the workers");
    }
  }
}

void SchedulerCore::StopAttemptOn(const v1::Run& run, v1::AttemptEndReason why,
                                  const std::string& reason) {
  {
    absl::MutexLock lock(&mu_);
    auto& state = attempts_[{run.id(), run.resumption_index()}];
    if (state.stop_sent_at != absl::InfinitePast()) return;
    state.stop_sent_at = clock_->Now();
    if (why == v1::ATTEMPT_END_REASON_STOPPED || why == v1::ATTEMPT_END_REASON_PREEMPTED) {
      state.stop_reason = why;
    }
  }
  for (const auto& n : run.nodes()) {
    v1::ControlMessage msg;
    msg.set_command_id(NextCommandId());
    auto* stop = msg.mutable_stop_attempt();
    stop->set_run_id(run.id());
    stop->set_resumption_index(run.resumption_index());
    stop->mutable_grace_period()->set_seconds(absl::ToInt64Seconds(config_.stop_grace));
    stop->set_reason(reason);
    workers_->Send(n.node_name(), msg);
  }
}

absl::Status SchedulerCore::EndAttempt(const std::string& run_id, int resumption,
                                       const AttemptState& state, v1::AttemptEndReason reason,
                                       v1::DetectionMethod how, const std::string& detail,
                                       v1::Run* result) {
  v1::Attempt a;
  a.set_run_id(run_id);
  a.set_resumption_index(resumption);
  a.set_status(reason == v1::ATTEMPT_END_REASON_SUCCEEDED ? v1::RUN_STATUS_COMPLETED
               : reason == v1::ATTEMPT_END_REASON_STOPPED ? v1::RUN_STATUS_STOPPED
                                                          : v1::RUN_STATUS_FAILED);
  a.set_end_reason(reason);
  a.set_detection_method(how);
  a.set_reason(detail);
  for (const auto& e : state.exits) *a.add_rank_exits() = e;
  a.set_first_failed_rank(state.first_failed_rank);
  a.set_first_failed_node(state.first_failed_node);
  auto recorded = runs_->RecordAttempt(a);
  {
    absl::MutexLock lock(&mu_);
    // Reports may have arrived since `state` was copied (a stop answered at once).
    std::set<std::string> finished = state.finished;
    if (auto st = attempts_.find({run_id, resumption}); st != attempts_.end()) {
      finished.insert(st->second.finished.begin(), st->second.finished.end());
    }
    attempts_.erase({run_id, resumption});
    if (auto it = active_.find(run_id);
        it != active_.end() && reason != v1::ATTEMPT_END_REASON_SUCCEEDED) {
      Draining d{it->second, clock_->Now() + config_.stop_grace + config_.lease};
      d.run.clear_nodes();
      for (const auto& n : it->second.nodes()) {
        if (!finished.count(n.node_name())) *d.run.add_nodes() = n;
      }
      if (d.run.nodes_size() > 0) draining_[run_id] = std::move(d);
    }
    active_.erase(run_id);
  }
  if (recorded.ok() && result != nullptr) *result = *recorded;
  const absl::Status st = recorded.status();
  if (absl::IsFailedPrecondition(st)) return absl::OkStatus();  // already recorded
  return st;
}

v1::ControlMessage SchedulerCore::StartMessage(const v1::Run& run, const v1::Attempt& attempt,
                                               const v1::AttemptNode& node, int world_size,
                                               int local_size, int first_rank) {
  v1::ControlMessage msg;
  msg.set_command_id(NextCommandId());
  auto* s = msg.mutable_start_attempt();
  s->set_run_id(run.id());
  s->set_run_name(run.name());
  s->set_resumption_index(attempt.resumption_index());
  s->set_command(run.spec().command());
  for (const auto& e : run.spec().env_variables()) (*s->mutable_env())[e.key()] = e.value();
  google::protobuf::util::JsonPrintOptions opts;
  opts.preserve_proto_field_names = true;
  // MessageToJsonString appends to its output: start from an empty string.
  std::string json;
  if (run.spec().has_parameters()) {
    (void)google::protobuf::util::MessageToJsonString(run.spec().parameters(), &json, opts);
  }
  if (json.empty()) json = "{}";
  s->set_parameters_json(json);
  s->set_node_rank(node.node_rank());
  s->set_num_nodes(attempt.nodes_size());
  s->set_world_size(world_size);
  s->set_first_rank(first_rank);
  s->set_local_world_size(local_size);
  s->set_master_addr(attempt.master_addr());
  s->set_master_port(attempt.master_port());
  *s->mutable_gpu_indices() = node.gpu_indices();
  s->mutable_stop_grace_period()->set_seconds(absl::ToInt64Seconds(config_.stop_grace));
  s->set_hang_timeout_seconds(run.spec().scheduling().hang_timeout_seconds());
  return msg;
}

absl::Status SchedulerCore::Place(const std::vector<v1::Run>& queued,
                                  const std::vector<v1::Run>& active,
                                  const std::vector<v1::Node>& nodes, CycleStats& stats) {
  ClusterState state;
  std::map<std::string, const v1::Node*> by_name;
  for (const auto& n : nodes) {
    state.nodes.push_back(NodeInfoFromProto(n));
    by_name[n.name()] = &n;
  }
  for (const auto& run : active) {
    if (run.nodes_size() == 0) continue;
    RunningAllocation alloc = AllocationFromProto(run, AttemptOf(run));
    absl::MutexLock lock(&mu_);
    auto it = attempts_.find({run.id(), run.resumption_index()});
    // A run already being stopped cannot be chosen as a victim again.
    if (it != attempts_.end() && it->second.stop_sent_at != absl::InfinitePast()) {
      alloc.preemptible = false;
    }
    state.running.push_back(std::move(alloc));
  }
  std::set<std::string> waiting_for_drain;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = clock_->Now();
    for (auto it = draining_.begin(); it != draining_.end();) {
      if (now >= it->second.give_up) {
        spdlog::warn("run {}: nodes never confirmed that attempt {} stopped; placing it again",
                     it->first, it->second.run.resumption_index());
        it = draining_.erase(it);
        continue;
      }
      RunningAllocation alloc = AllocationFromProto(it->second.run, AttemptOf(it->second.run));
      alloc.preemptible = false;
      state.running.push_back(std::move(alloc));
      waiting_for_drain.insert(it->first);
      ++it;
    }
  }
  std::vector<QueuedRun> queue;
  std::map<std::string, const v1::Run*> queued_by_id;
  for (const auto& r : queued) {
    if (waiting_for_drain.count(r.id())) continue;  // its previous attempt is still exiting
    queue.push_back(QueuedRunFromProto(r));
    queued_by_id[r.id()] = &r;
  }
  Placer placer(state);
  const PlacementDecision decision =
      placer.PlaceQueue(queue, {.now_micros = absl::ToUnixMicros(clock_->Now())});

  std::map<std::string, const v1::Run*> active_by_id;
  for (const auto& r : active) active_by_id[r.id()] = &r;
  for (const auto& p : decision.preemptions) {
    auto it = active_by_id.find(p.victim_run_id);
    if (it == active_by_id.end()) continue;
    spdlog::info("preempting run {} for run {}", it->second->name(), p.for_run_id);
    StopAttemptOn(*it->second, v1::ATTEMPT_END_REASON_PREEMPTED,
                  absl::StrCat("preempted for a higher-priority run"));
    ++stats.preempted;
  }
  for (const auto& p : decision.placements) {
    // A placement that needs victims to leave first starts in a later cycle, once they have.
    if (p.after_preemption) continue;
    const v1::Run& run = *queued_by_id.at(p.run_id);
    v1::Attempt attempt;
    attempt.set_run_id(run.id());
    attempt.set_resumption_index(run.resumption_index());
    attempt.set_status(v1::RUN_STATUS_STARTING);
    PlacementToAttemptNodes(p, attempt.mutable_nodes());
    const v1::Node* head =
        by_name.count(p.nodes.front().node) ? by_name[p.nodes.front().node] : nullptr;
    attempt.set_master_addr(HostOf(head ? head->address() : ""));
    attempt.set_master_port(config_.master_port_base +
                            static_cast<int>(absl::HashOf(run.id(), run.resumption_index()) %
                                             static_cast<size_t>(config_.master_port_span)));
    auto placed = runs_->RecordAttempt(attempt);
    if (absl::IsUnavailable(placed.status())) return placed.status();
    if (!placed.ok()) {
      spdlog::warn("could not record the placement of run {}: {}", run.name(),
                   placed.status().ToString());
      continue;
    }
    {
      absl::MutexLock lock(&mu_);
      active_[run.id()] = *placed;
      ++placements_total_;
    }
    ++stats.placed;
    // One rank per GPU; without GPUs, the run's procs_per_node, else the node's own
    // (tessera-worker --procs-per-node), else one.
    auto local_size = [&](const v1::AttemptNode& n) {
      if (n.gpu_indices_size() > 0) return n.gpu_indices_size();
      if (run.spec().compute().procs_per_node() > 0) return run.spec().compute().procs_per_node();
      int procs = 1;
      if (auto node = by_name.find(n.node_name()); node != by_name.end()) {
        auto label = node->second->labels().find(std::string(kProcsPerNodeLabel));
        if (label != node->second->labels().end() && !absl::SimpleAtoi(label->second, &procs)) {
          procs = 1;
        }
      }
      return std::max(1, procs);
    };
    int world = 0;
    for (const auto& n : attempt.nodes()) world += local_size(n);
    int first_rank = 0;
    for (const auto& n : attempt.nodes()) {
      const int local = local_size(n);
      if (!workers_->Send(n.node_name(), StartMessage(run, attempt, n, world, local, first_rank))) {
        spdlog::warn("node {} has no worker stream here; its lease decides", n.node_name());
      }
      first_rank += local;
    }
    spdlog::info("placed run {} (attempt {}) on {} node(s)", run.name(), run.resumption_index(),
                 attempt.nodes_size());
  }
  return absl::OkStatus();
}

}  // namespace tessera::scheduler
