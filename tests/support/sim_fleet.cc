#include "tests/support/sim_fleet.h"

#include <algorithm>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/timestamps.h"
#include "tests/support/sim_fleet_node.h"

namespace tessera::testing {

v1::Node SimulatedNode(const std::string& name, int gpus, const std::string& sw) {
  v1::Node node;
  node.set_name(name);
  node.set_cluster("local");
  node.set_gpu_type("sim");
  node.set_gpu_count(gpus);
  node.set_address("127.0.0.1");
  (*node.mutable_labels())["switch"] = sw;
  for (int i = 0; i < gpus; ++i) {
    auto* g = node.add_gpus();
    g->set_index(i);
    g->set_simulated(true);
    g->set_model("simulated");
  }
  return node;
}

SimFleet::SimFleet(SimFleetOptions options, std::vector<NodeSpec> nodes)
    : options_(std::move(options)) {
  for (int i = 0; i < std::max(options_.channels, 1); ++i) {
    grpc::ChannelArguments args;
    // Distinct arguments: each channel its own connection.
    args.SetInt("tessera.sim_channel", i);
    args.SetInt(GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, 64 << 20);
    channels_.push_back(
        grpc::CreateCustomChannel(options_.endpoint, grpc::InsecureChannelCredentials(), args));
    stubs_.push_back(v1::WorkerControl::NewStub(channels_.back()));
    log_stubs_.push_back(v1::LogService::NewStub(channels_.back()));
  }
  for (auto& spec : nodes) nodes_.push_back(std::make_unique<Node>(std::move(spec)));
}

SimFleet::~SimFleet() {
  {
    std::lock_guard<std::mutex> lock(timers_mu_);
    stopping_ = true;
  }
  timers_cv_.notify_all();
  due_cv_.notify_all();
  for (auto& t : threads_) t.join();
  for (auto& n : nodes_) {
    std::vector<Stream*> streams;
    {
      std::lock_guard<std::mutex> lock(n->mu);
      n->killed = true;
      for (auto& s : n->streams) streams.push_back(s.get());
    }
    for (Stream* s : streams) s->Cancel();
    for (Stream* s : streams) s->WaitDone();
  }
}

const std::string& SimFleet::node_name(size_t i) const { return nodes_[i]->name(); }

absl::Status SimFleet::Start(absl::Duration spread, absl::Duration timeout) {
  threads_.emplace_back([this] { TimerLoop(); });
  for (int i = 0; i < options_.pusher_threads; ++i) threads_.emplace_back([this] { PusherLoop(); });
  const absl::Time begin = absl::Now();
  for (size_t i = 0; i < nodes_.size(); ++i) {
    Schedule({begin + spread * (static_cast<double>(i) / static_cast<double>(nodes_.size())), i,
              TimerKind::kConnect});
  }
  const absl::Time deadline = begin + spread + timeout;
  size_t missing = nodes_.size();
  while (absl::Now() < deadline) {
    missing = 0;
    for (auto& n : nodes_) {
      std::lock_guard<std::mutex> lock(n->mu);
      if (!n->registered) ++missing;
    }
    if (missing == 0) return absl::OkStatus();
    absl::SleepFor(absl::Milliseconds(100));
  }
  return absl::DeadlineExceededError(
      absl::StrCat(missing, " of ", nodes_.size(), " simulated nodes did not register"));
}

absl::Time SimFleet::Kill(size_t i) {
  Node& n = *nodes_[i];
  Stream* s;
  absl::Time last;
  {
    std::lock_guard<std::mutex> lock(n.mu);
    n.killed = true;
    s = n.stream;
    last = n.last_heartbeat_sent;
  }
  if (s != nullptr) s->Cancel();
  return last;
}

void SimFleet::Schedule(Timer t) {
  {
    std::lock_guard<std::mutex> lock(timers_mu_);
    timers_.push(std::move(t));
  }
  timers_cv_.notify_one();
}

void SimFleet::TimerLoop() {
  std::unique_lock<std::mutex> lock(timers_mu_);
  while (!stopping_) {
    if (timers_.empty()) {
      timers_cv_.wait(lock);
      continue;
    }
    const absl::Time now = absl::Now();
    if (timers_.top().at > now) {
      timers_cv_.wait_for(lock, absl::ToChronoNanoseconds(timers_.top().at - now));
      continue;
    }
    Timer t = timers_.top();
    timers_.pop();
    if (t.kind == TimerKind::kFinishAttempt) {
      due_.push(std::move(t));
      due_cv_.notify_one();
      continue;
    }
    lock.unlock();
    Node& n = *nodes_[t.node];
    if (t.kind == TimerKind::kConnect) {
      std::lock_guard<std::mutex> node_lock(n.mu);
      if (!n.killed && n.stream == nullptr) {
        n.streams.push_back(std::make_unique<Stream>(
            this, t.node, stubs_[t.node % stubs_.size()].get(), n.key(), n.Registration()));
        n.stream = n.streams.back().get();
      }
    } else {  // a heartbeat, listing what the node's ranks do
      v1::WorkerMessage hb;
      Stream* s = nullptr;
      absl::Duration interval;
      {
        std::lock_guard<std::mutex> node_lock(n.mu);
        interval = n.heartbeat_interval;
        if (!n.killed) {
          s = n.stream;
          hb.mutable_heartbeat()->set_sequence(++n.sequence);
          n.sent[n.sequence] = now;
          while (n.sent.size() > 8) n.sent.erase(n.sent.begin());
          if (n.last_heartbeat_sent != absl::Time()) {
            std::lock_guard<std::mutex> gap_lock(rtt_mu_);
            gaps_.push_back(absl::ToInt64Microseconds(now - n.last_heartbeat_sent));
          }
          n.last_heartbeat_sent = now;
          for (const auto& [key, ranks] : n.running) {
            auto* a = hb.mutable_heartbeat()->add_attempts();
            a->set_run_id(key.first);
            a->set_resumption_index(key.second);
            for (const auto& r : ranks) a->add_running_ranks(r.rank());
          }
          for (auto it = n.ended.begin(); it != n.ended.end();) {
            if (it->second.second < now) {
              it = n.ended.erase(it);
              continue;
            }
            auto* a = hb.mutable_heartbeat()->add_attempts();
            a->set_run_id(it->first.first);
            a->set_resumption_index(it->first.second);
            for (const auto& r : it->second.first) *a->add_exited_ranks() = r;
            ++it;
          }
        }
      }
      if (s != nullptr) s->Send(hb);
      if (!n.killed) Schedule({now + interval, t.node, TimerKind::kHeartbeat});
    }
    lock.lock();
  }
}

void SimFleet::OnStart(size_t node, const v1::StartAttempt& start) {
  Node& n = *nodes_[node];
  const auto key = std::make_pair(start.run_id(), start.resumption_index());
  {
    std::lock_guard<std::mutex> lock(attempts_mu_);
    SimAttempt& a = attempts_[key];
    ++a.starts_received;
    if (a.starts_received > 1) return;  // a start sent again: the ranks already run
    a.run_id = start.run_id();
    a.resumption_index = start.resumption_index();
    a.node = n.name();
    a.started_at = absl::Now();
    start_messages_[key] = start;
  }
  std::vector<v1::RankExit> ranks;
  for (int i = 0; i < std::max(1, start.local_world_size()); ++i) {
    v1::RankExit r;
    r.set_rank(start.first_rank() + i);
    r.set_node_rank(start.node_rank());
    r.set_node_name(n.name());
    ranks.push_back(r);
  }
  Stream* s;
  {
    std::lock_guard<std::mutex> lock(n.mu);
    n.running[key] = ranks;
    s = n.stream;
  }
  v1::WorkerMessage started;
  started.mutable_attempt_update()->set_run_id(start.run_id());
  started.mutable_attempt_update()->set_resumption_index(start.resumption_index());
  started.mutable_attempt_update()->set_phase(v1::ATTEMPT_PHASE_STARTED);
  if (s != nullptr) s->Send(started);
  if (!options_.held_run_prefix.empty() &&
      absl::StartsWith(start.run_name(), options_.held_run_prefix)) {
    return;
  }
  Schedule({absl::Now() + options_.attempt_duration, node, TimerKind::kFinishAttempt,
            start.run_id(), start.resumption_index()});
}

void SimFleet::PusherLoop() {
  while (true) {
    Timer t;
    {
      std::unique_lock<std::mutex> lock(timers_mu_);
      due_cv_.wait(lock, [this] { return stopping_ || !due_.empty(); });
      if (stopping_) return;
      t = std::move(due_.front());
      due_.pop();
    }
    FinishAttempt(t.node, t.run_id, t.resumption);
  }
}

void SimFleet::FinishAttempt(size_t node, const std::string& run_id, int32_t resumption) {
  Node& n = *nodes_[node];
  const auto key = std::make_pair(run_id, resumption);
  v1::StartAttempt start;
  {
    std::lock_guard<std::mutex> lock(attempts_mu_);
    auto it = start_messages_.find(key);
    if (it == start_messages_.end()) return;
    start = it->second;
    start_messages_.erase(it);  // once: a stop and the end may race
  }
  const bool pushed = options_.log_lines_per_rank > 0 && PushLogs(node, start);
  if (options_.log_lines_per_rank > 0 && !pushed) log_push_failures_.fetch_add(1);
  std::vector<v1::RankExit> exits;
  Stream* s;
  {
    std::lock_guard<std::mutex> lock(n.mu);
    exits = n.running[key];
    n.running.erase(key);
    n.ended[key] = {exits, absl::Now() + absl::Seconds(10)};
    s = n.stream;
  }
  {
    std::lock_guard<std::mutex> lock(attempts_mu_);
    attempts_[key].finished_at = absl::Now();
    if (pushed) {
      attempts_[key].lines_pushed =
          static_cast<int64_t>(exits.size()) * options_.log_lines_per_rank;
    }
  }
  v1::WorkerMessage done;
  auto* u = done.mutable_attempt_update();
  u->set_run_id(run_id);
  u->set_resumption_index(resumption);
  u->set_phase(v1::ATTEMPT_PHASE_FINISHED);
  for (const auto& e : exits) *u->add_rank_exits() = e;
  if (s != nullptr) s->Send(done);
}

bool SimFleet::PushLogs(size_t node, const v1::StartAttempt& start) {
  Node& n = *nodes_[node];
  v1::LogBatch batch;
  batch.set_node_name(n.name());
  batch.set_idempotency_key(
      absl::StrCat("sim/", start.run_id(), "/", start.resumption_index(), "/", n.name()));
  const std::string filler(static_cast<size_t>(std::max(options_.log_line_bytes - 40, 0)), 'x');
  const int ranks = std::max(1, start.local_world_size());
  for (int r = 0; r < ranks; ++r) {
    for (int seq = 0; seq < options_.log_lines_per_rank; ++seq) {
      v1::LogLine* l = batch.add_lines();
      l->set_run_id(start.run_id());
      l->set_resumption_index(start.resumption_index());
      l->set_node_rank(start.node_rank());
      l->set_node_name(n.name());
      l->set_rank(start.first_rank() + r);
      l->set_stream(v1::LOG_STREAM_STDOUT);
      l->set_sequence(seq);
      *l->mutable_time() = ToProtoTime(absl::Now());
      l->set_text(absl::StrCat("rank ", start.first_rank() + r, " line ", seq, " ", filler));
    }
  }
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Bearer " + n.key());
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  auto stream = log_stubs_[node % log_stubs_.size()]->PushLogs(&ctx);
  v1::LogAck ack;
  const bool exchanged = stream->Write(batch) && stream->WritesDone() && stream->Read(&ack);
  const grpc::Status st = stream->Finish();
  if (!exchanged || !st.ok()) return false;
  std::set<int32_t> complete;
  for (const auto& w : ack.watermarks()) {
    if (w.durable_sequence() == options_.log_lines_per_rank - 1) complete.insert(w.rank());
  }
  return static_cast<int>(complete.size()) == ranks;
}

std::vector<int64_t> SimFleet::TakeHeartbeatRtts() {
  std::lock_guard<std::mutex> lock(rtt_mu_);
  std::vector<int64_t> out;
  out.swap(rtts_);
  return out;
}

std::vector<std::string> SimFleet::DropReasons() {
  std::lock_guard<std::mutex> lock(drops_mu_);
  return drop_reasons_;
}

std::vector<int64_t> SimFleet::TakeHeartbeatGaps() {
  std::lock_guard<std::mutex> lock(rtt_mu_);
  std::vector<int64_t> out;
  out.swap(gaps_);
  return out;
}

std::vector<SimAttempt> SimFleet::Attempts() {
  std::lock_guard<std::mutex> lock(attempts_mu_);
  std::vector<SimAttempt> out;
  for (const auto& [key, a] : attempts_) out.push_back(a);
  return out;
}

}  // namespace tessera::testing
