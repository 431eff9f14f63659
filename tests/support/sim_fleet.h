#pragma once
// Many simulated worker nodes in one process, for the control plane's scale test and benchmark
// (bench/control_plane): each node has its own node key and its own control stream (gRPC's
// callback API, so 10,000 streams need no thread each; they share a few connections), registers,
// heartbeats at the interval the scheduler gives it, lists its attempts in every heartbeat as a
// worker does, answers each start by reporting its ranks started, pushes its log lines
// (PushLogs, with its key) and reports them finished after a set time. A node can be killed
// (its stream cut, its heartbeats stopped) to time how long the control plane takes to call it
// lost.

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <queue>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "tessera/v1/logs.grpc.pb.h"
#include "tessera/v1/worker.grpc.pb.h"

namespace tessera::testing {

// A node with `gpus` simulated GPUs in cluster "local", under switch `sw`.
v1::Node SimulatedNode(const std::string& name, int gpus = 8, const std::string& sw = "s1");

struct SimFleetOptions {
  std::string endpoint;
  // Connections the nodes' streams share (each node still has its own stream and key).
  int channels = 16;
  // How long an attempt runs before its ranks exit 0.
  absl::Duration attempt_duration = absl::Seconds(5);
  // Attempts of runs whose name starts with this (when not empty) run until they are stopped:
  // what a benchmark's followers follow.
  std::string held_run_prefix;
  // Lines each rank of an attempt prints (pushed in one batch when it ends).
  int log_lines_per_rank = 20;
  int log_line_bytes = 100;
  // Threads that push logs and report attempts' ends.
  int pusher_threads = 4;
};

// What the fleet saw of one attempt (run id, resumption).
struct SimAttempt {
  std::string run_id;
  int32_t resumption_index = 0;
  std::string node;
  absl::Time started_at;
  std::optional<absl::Time> finished_at;
  int64_t lines_pushed = 0;
  // StartAttempt messages received for it (more than one: the scheduler sent it again).
  int starts_received = 0;
};

class SimFleet {
 public:
  // `nodes`: each node's description and its node key.
  struct NodeSpec {
    v1::Node node;
    std::string key;
  };
  SimFleet(SimFleetOptions options, std::vector<NodeSpec> nodes);
  ~SimFleet();

  // Connects every node (staggered over `spread`) and waits until each has registered or
  // `timeout` passed; the error names how many did not.
  absl::Status Start(absl::Duration spread, absl::Duration timeout);
  // Cuts node i off: its stream is cancelled and it sends nothing more. Returns when its last
  // heartbeat was sent.
  absl::Time Kill(size_t i);

  // Heartbeat round trips (send to LeaseRenewed) since the last call, in microseconds.
  std::vector<int64_t> TakeHeartbeatRtts();
  // Microseconds between a node's successive heartbeats since the last call: the interval,
  // plus however late the simulator itself sent them (a gap past the lease is the bench's own
  // fault, not the control plane's).
  std::vector<int64_t> TakeHeartbeatGaps();
  // Every attempt seen so far.
  std::vector<SimAttempt> Attempts();
  // Times a node's stream ended without being killed (the control plane dropped it).
  int64_t streams_dropped() const { return streams_dropped_.load(); }
  // Why: "node: CODE: message" for each of them.
  std::vector<std::string> DropReasons();
  int64_t log_push_failures() const { return log_push_failures_.load(); }
  size_t size() const { return nodes_.size(); }
  const std::string& node_name(size_t i) const;

 private:
  class Node;    // sim_fleet_node.h
  class Stream;  // sim_fleet_node.h
  enum class TimerKind { kHeartbeat, kFinishAttempt, kConnect };
  struct Timer {
    absl::Time at = absl::InfinitePast();
    size_t node = 0;
    TimerKind kind = TimerKind::kHeartbeat;  // kConnect: (re)connects
    std::string run_id = {};
    int32_t resumption = 0;
    bool operator>(const Timer& o) const { return at > o.at; }
  };

  void TimerLoop();
  void PusherLoop();
  void Schedule(Timer t);
  void OnStart(size_t node, const v1::StartAttempt& start);
  void FinishAttempt(size_t node, const std::string& run_id, int32_t resumption);
  bool PushLogs(size_t node, const v1::StartAttempt& start);

  const SimFleetOptions options_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::vector<std::unique_ptr<v1::WorkerControl::Stub>> stubs_;
  std::vector<std::unique_ptr<v1::LogService::Stub>> log_stubs_;
  std::vector<std::unique_ptr<Node>> nodes_;

  std::mutex timers_mu_;
  std::condition_variable timers_cv_;
  std::priority_queue<Timer, std::vector<Timer>, std::greater<>> timers_;
  std::queue<Timer> due_;  // finishes for the pushers
  std::condition_variable due_cv_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;

  std::mutex attempts_mu_;
  std::map<std::pair<std::string, int32_t>, SimAttempt> attempts_;
  std::map<std::pair<std::string, int32_t>, v1::StartAttempt> start_messages_;
  std::mutex rtt_mu_;
  std::vector<int64_t> rtts_;
  std::vector<int64_t> gaps_;
  std::atomic<int64_t> streams_dropped_{0};
  std::mutex drops_mu_;
  std::vector<std::string> drop_reasons_;
  std::atomic<int64_t> log_push_failures_{0};
};

}  // namespace tessera::testing
