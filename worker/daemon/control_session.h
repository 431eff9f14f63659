// The worker's end of the control stream: registers the node (with what it still runs),
// heartbeats under the lease, hands the commands to ControlCommands, reports what the ranks do,
// and reconnects with backoff when the stream breaks. A watchdog fences the node: when the lease
// is about to end without a renewal (the control plane is unreachable, or this process was
// frozen), every rank is killed before the control plane may start a replacement elsewhere.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/backoff.h"
#include "base/clock.h"
#include "base/random.h"
#include "tessera/v1/worker.grpc.pb.h"
#include "transport/tls/tls_flags.h"
#include "worker/daemon/attempt_manager.h"
#include "worker/daemon/canary_runner.h"
#include "worker/daemon/clock_skew.h"
#include "worker/daemon/control_commands.h"
#include "worker/daemon/fault_injector.h"
#include "worker/daemon/lease_tracker.h"
#include "worker/daemon/progress_watcher.h"
#include "worker/gpu/gpu_probe.h"

namespace tessera::worker {

struct ControlSessionOptions {
  // host:port of the scheduler, or of each of its instances separated by commas (the leader
  // and its standbys, in any order): the session goes round them until one accepts it.
  std::string endpoint;
  // With several endpoints, how long a registration may wait for its answer before the next
  // one is tried (a frozen instance accepts connections and never answers).
  absl::Duration registration_timeout = absl::Seconds(2);
  std::string api_key;  // this node's key
  tls::TlsFlags tls{};  // the node's certificate and the cluster CA, or plain text
  v1::Node node;        // name, cluster, GPUs, address ...
  std::string process_id;
  // Ranks are killed this long before the lease ends.
  absl::Duration fence_margin = absl::Milliseconds(500);
  // How often the ranks, progress and health results are looked at while something happens on
  // the node (attempts there, or a command within busy_after_command). An idle node's session
  // wakes only for its next heartbeat or GPU probe, or at once for a command.
  absl::Duration poll_interval = absl::Milliseconds(20);
  absl::Duration busy_after_command = absl::Seconds(5);
  // Training progress to forward and hangs to report (none when null).
  ProgressWatcher* progress = nullptr;
  // The health loop's parts on this node (none when null): canaries, fault injection, GPU probes.
  CanaryRunner* canaries = nullptr;
  FaultInjector* faults = nullptr;
  GpuProbe* gpu_probe = nullptr;
  // Warms the node as a hot spare when the scheduler asks (refused when null).
  SpareWarmer* spares = nullptr;
  absl::Duration gpu_probe_interval = absl::Seconds(1);
  // Measures the node's wall clock against the control plane's on every heartbeat (none: null).
  ClockSkew* clock_skew = nullptr;
  // Called with the new deadline (lease end minus margin) each time the lease is extended, for
  // the fence watchdog.
  std::function<void(absl::Time)> on_fence_deadline;
};

struct ControlSessionStats {
  int64_t registrations = 0;
  int64_t heartbeats = 0;
  int64_t fences = 0;
  bool connected = false;
};

class ControlSession {
 public:
  ControlSession(ControlSessionOptions options, AttemptManager& attempts,
                 std::shared_ptr<Clock> clock, std::shared_ptr<Random> random);
  ~ControlSession();

  void Start();
  void Stop();
  ControlSessionStats stats();
  // Fault injection's netdrop: the stream is cut and not reopened for `d`.
  void DropNetwork(absl::Duration d);

 private:
  void Loop();
  // One stream from registration until it breaks; true if registration succeeded.
  bool RunStream();
  // Registers on a new stream (its first message and reply), `sent` being when (the lease's
  // start); nullopt, said in the log, when the scheduler refused or did not answer (the stream
  // is then finished).
  std::optional<v1::Registered> Register(
      grpc::ClientReaderWriter<v1::WorkerMessage, v1::ControlMessage>& stream,
      grpc::ClientContext& ctx, absl::Time sent);
  // The attempts' updates (requeued when the stream breaks) and the ranks' progress; false when
  // the stream broke.
  bool SendAttemptNews();
  // A heartbeat carrying every local attempt, its send time noted for the lease; false when the
  // stream broke.
  bool SendHeartbeat(int64_t sequence, absl::Time now);
  void ReadLoop(grpc::ClientReaderWriter<v1::WorkerMessage, v1::ControlMessage>* stream);
  void Handle(const v1::ControlMessage& msg);
  bool Send(const v1::WorkerMessage& m);
  // Canary results, GPU faults and hangs; false when the stream broke.
  // The GPU probe is polled when it is due by `probe_due_by`.
  bool SendHealthReports(absl::Time probe_due_by);
  void FenceLoop();
  void PublishDeadline() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ControlSessionOptions options_;
  AttemptManager& attempts_;
  const std::shared_ptr<Clock> clock_;
  Backoff backoff_;
  ControlCommands commands_;  // what the control plane asks of this node
  // One per endpoint; `current_` is the one the stream uses or last used (the loop's thread).
  std::vector<std::string> endpoints_;
  std::vector<std::unique_ptr<v1::WorkerControl::Stub>> stubs_;
  std::atomic<size_t> current_{0};
  // When the registration in progress was sent (InfinitePast: none); the fence loop cancels it
  // past registration_timeout.
  absl::Time registering_since_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Duration lease_duration_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> stop_{false};
  std::thread loop_, fence_;

  // Writes to the stream come from the loop and the reader's thread (acknowledgements).
  absl::Mutex write_mu_;
  grpc::ClientReaderWriter<v1::WorkerMessage, v1::ControlMessage>* stream_
      ABSL_GUARDED_BY(write_mu_) = nullptr;

  absl::Mutex mu_;
  LeaseTracker lease_ ABSL_GUARDED_BY(mu_);
  grpc::ClientContext* ctx_ ABSL_GUARDED_BY(mu_) = nullptr;
  ControlSessionStats stats_ ABSL_GUARDED_BY(mu_);
  absl::Time network_dropped_until_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Time next_gpu_probe_ = absl::InfinitePast();  // the loop thread's
  // Wakes the loop before its pause ends (a command came, the stream ended, or Stop): an
  // eventfd, since its wait, poll(2)'s timeout, is a duration the kernel measures on the
  // monotonic clock. absl's timed waits end at a wall-clock time, which a clock step (NTP, an
  // operator) moves: an hour's step forward would keep an idle loop, and its heartbeats, asleep.
  int wake_fd_ = -1;
  absl::Mutex wake_mu_;
  absl::Time busy_until_ ABSL_GUARDED_BY(wake_mu_) = absl::InfinitePast();
  void Wake(bool busy);
  // The loop's pause: poll_interval while busy, else until `idle_until` or a wake-up.
  void Pause(absl::Time idle_until);
  std::vector<v1::GpuFault> unsent_faults_;  // the loop thread's
};

}  // namespace tessera::worker
