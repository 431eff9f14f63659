#include "worker/daemon/worker_daemon.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <filesystem>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "base/byte_size.h"
#include "base/random.h"
#include "base/status_macros.h"
#include "transport/endpoints.h"
#include "transport/metrics/must_register.h"
#include "transport/metrics/registry.h"
#include "transport/service_host.h"
#include "transport/tls/server_ssl_context.h"
#include "worker/daemon/owned_children.h"
#include "worker/daemon/state_gc.h"
#include "worker/daemon/worker_metrics.h"
#include "worker/gpu/gpu_discovery.h"
#include "worker/sandbox/gpu_access.h"

namespace tessera::worker {
namespace {

// The worker's state in the process-wide registry (one worker per process): gauges of what is
// now, counters of what happened (kept as the totals of the parts that count them).
struct WorkerMetrics {
  metrics::Gauge& running_ranks;
  metrics::Counter& lines_acked;
  metrics::Counter& log_reconnects;
  metrics::Counter& registrations;
  metrics::Counter& fences;
  metrics::Gauge& connected;
  metrics::Gauge& log_backlog;

  static WorkerMetrics& Get() {
    auto& r = metrics::Registry::Default();
    auto gauge = [&](const char* name, const char* help) -> metrics::Gauge& {
      return metrics::MustRegister(r.AddGauge(name, help))->WithLabels();
    };
    auto counter = [&](const char* name, const char* help) -> metrics::Counter& {
      return metrics::MustRegister(r.AddCounter(name, help))->WithLabels();
    };
    static WorkerMetrics m{
        gauge("tessera_worker_running_ranks", "Rank processes running on this node"),
        counter("tessera_worker_log_lines_acked_total",
                "Log lines acknowledged by the log service"),
        counter("tessera_worker_log_reconnects_total", "Times the log stream was re-established"),
        counter("tessera_worker_registrations_total", "Registrations with the scheduler"),
        counter("tessera_worker_fences_total",
                "Times the worker killed its ranks for want of a lease"),
        gauge("tessera_worker_connected", "1 while the control stream is up"),
        gauge("tessera_worker_log_backlog_bytes",
              "Bytes of rank output not yet acknowledged by the log service")};
    return m;
  }
};

// Brings a counter up to a running total counted elsewhere.
void CatchUp(metrics::Counter& counter, double total) {
  if (total > counter.Value()) counter.Increment(total - counter.Value());
}

// The uids the network walls hold: every user's (the control plane gives them from 100000 up:
// kFirstUserUid in services/store/run_store.h) and nobody's, or --rank-user's. None where ranks
// run as root or as the worker itself, whose own traffic must pass.
std::vector<std::string> RankUidsToWall(const WorkerOptions& o) {
  if (o.per_user_uids) return {"65534", "100000-4294967294"};
  if (o.rank_identity && o.rank_identity->uid != 0 && o.rank_identity->uid != ::geteuid()) {
    return {std::to_string(o.rank_identity->uid)};
  }
  return {};
}

}  // namespace

namespace {

absl::Status CheckOptions(const WorkerOptions& o) {
  if (SplitEndpoints(o.scheduler_endpoint).empty()) {
    return absl::InvalidArgumentError(
        "--scheduler-endpoint: required (host:port, or the scheduler instances' a:1,b:2)");
  }
  if (o.api_key.empty()) {
    return absl::InvalidArgumentError(
        "--api-key-file: required (a file, mode 600, holding this node's key: `mcli admin "
        "create-api-key --role node --node NAME`)");
  }
  if (o.node_name.empty()) return absl::InvalidArgumentError("--node-name: required");
  if (o.state_dir.empty()) return absl::InvalidArgumentError("--state-dir: required");
  return absl::OkStatus();
}

absl::Status PrepareStateFolder(const WorkerOptions& o) {
  std::error_code ec;
  std::filesystem::create_directories(o.state_dir, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("--state-dir: cannot create ", o.state_dir, ": ", ec.message()));
  }
  if (!o.rank_identity) return absl::OkStatus();
  // Ranks may pass through the state folder and its runs/ to their own, not list or read them.
  const std::string runs = o.state_dir + "/runs";
  std::filesystem::create_directories(runs, ec);
  if (ec) return absl::InternalError(absl::StrCat("creating ", runs, ": ", ec.message()));
  for (const auto& dir : {o.state_dir, runs}) TESSERA_RETURN_IF_ERROR(LetRankPass(dir));
  return absl::OkStatus();
}

// The sandbox with what it can know only once the GPUs are: their device minors and the ranks'
// share of the node's memory.
std::shared_ptr<const RankSandbox> SandboxForNode(std::shared_ptr<const RankSandbox> sandbox,
                                                  const GpuInventory& inventory,
                                                  int64_t node_memory) {
  if (!sandbox || (inventory.source != "nvml" && !sandbox->options().memory_by_node_share)) {
    return sandbox;
  }
  RankSandboxOptions known = sandbox->options();
  if (inventory.source == "nvml") {
    // NVML's index (Tessera's) is not always the device minor number the sandbox binds.
    const auto minors = sandbox::GpuMinorsByUuid(known.gpu.driver_gpus_dir);
    for (const auto& gpu : inventory.gpus) {
      if (auto m = minors.find(gpu.uuid()); m != minors.end()) {
        known.gpu.minor_by_index[gpu.index()] = m->second;
      }
    }
  }
  if (known.memory_by_node_share) {
    const int gpus = static_cast<int>(inventory.gpus.size());
    known.limits.memory_bytes = RankMemoryShare(node_memory, gpus);
    spdlog::info(
        "ranks' memory: {} each, the node's {} less a reserve, shared by {} GPU(s) "
        "(--rank-memory-limit to change)",
        known.limits.memory_bytes > 0 ? FormatByteSize(known.limits.memory_bytes) : "unlimited",
        FormatByteSize(node_memory), gpus);
  }
  return std::make_shared<const RankSandbox>(std::move(known));
}

// What the node registers as.
v1::Node NodeRecord(const WorkerOptions& o, const GpuInventory& inventory, int64_t node_memory,
                    const std::string& network_label) {
  v1::Node node;
  node.set_name(o.node_name);
  node.set_cluster(o.cluster);
  node.set_gpu_type(inventory.gpu_type);
  node.set_gpu_count(static_cast<int>(inventory.gpus.size()));
  for (const auto& g : inventory.gpus) *node.add_gpus() = g;
  for (const auto& [k, v] : o.labels) (*node.mutable_labels())[k] = v;
  (*node.mutable_labels())["tessera.io/network-walls"] = network_label;
  node.set_address(o.address.empty() ? o.node_name : o.address);
  node.set_cpu_count(static_cast<int>(std::thread::hardware_concurrency()));
  node.set_memory_bytes(node_memory);
  node.set_worker_version("tessera-worker 0.4");
  node.set_driver_version(inventory.driver_version);
  node.set_fault_injection_allowed(o.allow_fault_injection);
  return node;
}

}  // namespace

absl::StatusOr<std::unique_ptr<WorkerDaemon>> WorkerDaemon::Start(const WorkerOptions& o) {
  TESSERA_RETURN_IF_ERROR(CheckOptions(o));
  TESSERA_RETURN_IF_ERROR(PrepareStateFolder(o));
  TESSERA_ASSIGN_OR_RETURN(const GpuInventory inventory, DiscoverGpus(o.simulate_gpus));
  const int64_t node_memory =
      static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
  const auto sandbox = SandboxForNode(o.sandbox, inventory, node_memory);
  // Descendants of ranks whose parents exit are reparented here instead of to init (which in a
  // container may not reap them), so a rank's group is always fully accounted for.
  prctl(PR_SET_CHILD_SUBREAPER, 1);

  std::unique_ptr<WorkerDaemon> d(new WorkerDaemon());
  d->options_ = o;
  d->clock_ = SystemClock::Shared();
  if (d->options_.log_endpoint.empty()) d->options_.log_endpoint = o.scheduler_endpoint;
  TESSERA_RETURN_IF_ERROR(d->StartRanks(inventory, sandbox));
  d->lease_file_ = std::make_unique<LeaseFile>(o.state_dir);
  if (o.fence_watchdog) {
    TESSERA_ASSIGN_OR_RETURN(d->watchdog_, SpawnFenceWatchdog(o.state_dir, absl::ZeroDuration()));
  }
  TESSERA_RETURN_IF_ERROR(d->StartMetricsEndpoint());
  // Before the node registers: no attempt may start unwalled, and the label says how it is.
  TESSERA_ASSIGN_OR_RETURN(const std::string network_label, d->RaiseNetworkWalls());
  spdlog::info("node {}: {} GPU(s) ({}), state in {}", o.node_name, inventory.gpus.size(),
               inventory.source, o.state_dir);
  d->StartHealthParts(inventory);
  d->StartControlSession(NodeRecord(o, inventory, node_memory, network_label));
  // mcli connect: shells in the runs' containers (only where ranks have one).
  if (sandbox) d->StartShells(*sandbox);
  d->StartMetricsRunner();
  return d;
}

absl::Status WorkerDaemon::StartRanks(const GpuInventory& inventory,
                                      std::shared_ptr<const RankSandbox> sandbox) {
  const WorkerOptions& o = options_;
  // The log service is stateless: with several instances the channel goes to any that answers.
  TESSERA_ASSIGN_OR_RETURN(const std::string log_target,
                           GrpcTarget("--log-endpoint", o.log_endpoint));
  shipper_ = std::make_unique<LogShipper>(
      LogShipperOptions{
          .node_name = o.node_name, .endpoint = log_target, .api_key = o.api_key, .tls = o.tls},
      clock_, MonotonicClock::Shared());
  LogShipper* shipper = shipper_.get();
  // Hang detection measures time without progress: on the monotonic clock.
  progress_ = std::make_unique<ProgressWatcher>(MonotonicClock::Shared());
  ProgressWatcher* progress = progress_.get();
  // The files are the ranks': read apart from the heartbeat thread.
  progress->StartReader(absl::Milliseconds(200));
  const bool simulated = inventory.source == "simulated";
  // The pre-flight checks: the clock against the control plane's as the heartbeats measure it,
  // the GPUs found again at each start, the operator's scripts as owned children.
  clock_skew_ = std::make_unique<ClockSkew>(clock_);
  PreflightConfig preflight = o.preflight;
  preflight.node_name = o.node_name;
  preflight.state_dir = o.state_dir;
  preflight.shared_dir = o.shared_dir;
  preflight_ = std::make_unique<PreflightChecker>(
      std::move(preflight), [simulate = o.simulate_gpus] { return DiscoverGpus(simulate); },
      clock_skew_.get(),
      std::make_shared<image::ProcessToolRunner>(
          image::ProcessToolRunner::ForkHooks{ForkOwnedChild, ReleaseOwnedChild}),
      MonotonicClock::Shared());
  PreflightChecker* checker = preflight_.get();
  if (o.network_walls != "off") {
    // A runner of its own: the pre-flight checks' is cancelled as the worker stops, before the
    // walls are taken down.
    walls_runner_ = std::make_shared<image::ProcessToolRunner>(
        image::ProcessToolRunner::ForkHooks{ForkOwnedChild, ReleaseOwnedChild});
    NetworkWallsOptions walls{.state_dir = std::filesystem::absolute(o.state_dir).string(),
                              .rank_uids = RankUidsToWall(o),
                              .walled = MetadataDestinations()};
    walls.walled.insert(walls.walled.end(), o.walled.begin(), o.walled.end());
    walls_ = std::make_shared<NetworkWalls>(std::move(walls), *walls_runner_);
  }
  attempts_ = std::make_unique<AttemptManager>(
      AttemptManagerOptions{
          .state_dir = o.state_dir,
          .node_name = o.node_name,
          .simulated_gpus = simulated,
          .gpu_model = simulated || inventory.gpus.empty() ? "" : inventory.gpus[0].model(),
          .rank_env = o.rank_env,
          .rank_identity = o.rank_identity,
          .sandbox = std::move(sandbox),
          .images = o.images,
          .walls = walls_,
          .per_user_uids = o.per_user_uids,
          .shared_dir = o.shared_dir,
          .memory_checkpoints = o.memory_checkpoints,
          .preflight = [checker](const v1::StartAttempt& s) { return checker->Run(s); },
          .output_shipped = [shipper](const RankOutput& out) { return shipper->Shipped(out); },
          .rank_nice = o.rank_nice,
          .finish_waits_for_logs = o.finish_log_wait},
      clock_, [shipper](const RankOutput& out) { shipper->Watch(out); },
      [shipper, progress](const RankOutput& out) {
        shipper->RankDone(out);
        progress->RankDone(out);
      },
      [progress](const RankOutput& out) { progress->Watch(out); });

  spare_warmer_ = std::make_unique<SpareWarmer>(SpareWarmerOptions{
      .state_dir = o.state_dir,
      .preflight = [checker](const v1::StartAttempt& s) { return checker->Run(s); },
      .images = o.images});

  // What a previous incarnation left: kill its watchdog and its ranks, ship their output.
  StopPreviousWatchdog(o.state_dir);
  const int killed = attempts_->CleanUpPreviousIncarnation();
  if (killed > 0) spdlog::warn("killed {} rank(s) left by the previous worker", killed);
  shipper_->RecoverSpools(o.state_dir);
  shipper_->Start();
  return absl::OkStatus();
}

absl::Status WorkerDaemon::StartMetricsEndpoint() {
  const WorkerOptions& o = options_;
  if (o.metrics_listen.empty()) return absl::OkStatus();
  TESSERA_ASSIGN_OR_RETURN(const auto addr,
                           ParseListenAddress("--metrics-listen", o.metrics_listen));
  // Served with its own server certificate: the node's is a client certificate.
  tls::TlsFlags served = o.tls;
  served.cert_file = o.metrics_tls_cert;
  served.key_file = o.metrics_tls_key;
  TESSERA_ASSIGN_OR_RETURN(auto https, tls::ServerSslContext::ForListener(served));
  TESSERA_ASSIGN_OR_RETURN(auto scrape, metrics::ScrapeAccess::Load(o.scrape));
  TESSERA_ASSIGN_OR_RETURN(
      endpoint_, metrics::MetricsEndpoint::Start(addr.first, addr.second, std::move(scrape),
                                                 metrics::Registry::Default(), https));
  return absl::OkStatus();
}

absl::StatusOr<std::string> WorkerDaemon::RaiseNetworkWalls() {
  if (!walls_) return std::string("off");
  std::vector<WalledDestination> own;
  if (metrics_port() > 0) own.push_back({.address = "", .port = metrics_port()});
  const absl::Status st = walls_->Install(own);
  if (st.ok()) {
    spdlog::info("network walls up (iptables chain {})", walls_->chain());
    return std::string("on");
  }
  if (options_.network_walls == "on") {
    return absl::FailedPreconditionError(absl::StrCat("--network-walls on: ", st.message()));
  }
  spdlog::error(
      "NETWORK WALLS ARE DOWN on this node: its ranks can reach the cloud's metadata address, "
      "this worker's ports, other runs' rendezvous ports and every --network-wall ({}); "
      "labelled tessera.io/network-walls=unenforced",
      std::string(st.message()));
  walls_->Remove();  // what it did build; the attempts' copy then walls nothing
  walls_.reset();
  return std::string("unenforced");
}

void WorkerDaemon::StartHealthParts(const GpuInventory& inventory) {
  const WorkerOptions& o = options_;
  // GPU probes, canaries, fault injection (which throttles ranks and canaries alike).
  if (inventory.source == "simulated") {
    auto sim = std::make_unique<SimulatedGpuProbe>();
    simulated_gpus_ = sim.get();
    gpu_probe_ = std::move(sim);
  } else if (!inventory.gpus.empty()) {
    if (auto api = LoadNvmlApi(static_cast<int>(inventory.gpus.size()))) {
      gpu_probe_ = std::make_unique<NvmlGpuProbe>(
          *std::move(api), static_cast<int>(inventory.gpus.size()), o.node_name);
    }
  }
  canaries_ = std::make_unique<CanaryRunner>(o.canary_binary, o.node_name, o.state_dir, clock_,
                                             absl::Seconds(30), walls_);
  throttle_ = std::make_unique<ProcessThrottle>([this] {
    auto groups = attempts_->RankProcessGroups();
    for (pid_t g : canaries_->ProcessGroups()) groups.push_back(g);
    return groups;
  });
  faults_ = std::make_unique<FaultInjector>(
      o.allow_fault_injection, o.node_name,
      FaultTargets{.simulated_gpus = simulated_gpus_,
                   .gpu_count = static_cast<int>(inventory.gpus.size()),
                   .throttle = throttle_.get(),
                   .drop_network = [this](absl::Duration t) { session_->DropNetwork(t); },
                   .link_down = [this](absl::Duration down) { canaries_->SetLinkDown(down); },
                   .crash = [this] { Crash(); }});
}

void WorkerDaemon::StartControlSession(const v1::Node& node) {
  const WorkerOptions& o = options_;
  LeaseFile* lease_file = lease_file_.get();
  session_ = std::make_unique<ControlSession>(
      ControlSessionOptions{
          .endpoint = o.scheduler_endpoint,
          .api_key = o.api_key,
          .tls = o.tls,
          .node = node,
          .process_id = absl::StrCat(o.node_name, "-", getpid(), "-",
                                     absl::Hex(SystemRandom::Shared()->Next() & 0xffffffff)),
          .fence_margin = o.fence_margin,
          .progress = progress_.get(),
          .canaries = canaries_.get(),
          .faults = faults_.get(),
          .gpu_probe = gpu_probe_.get(),
          .spares = spare_warmer_.get(),
          .clock_skew = clock_skew_.get(),
          .on_fence_deadline = [lease_file](absl::Time t) { lease_file->Write(t); }},
      // Leases and fencing on the monotonic clock: a step of the wall clock neither fences a
      // healthy node early nor delays a fence. The fence watchdog reads the same clock.
      *attempts_, MonotonicClock::Shared(), SystemRandom::Shared());
  session_->Start();
}

void WorkerDaemon::StartShells(const RankSandbox& sandbox) {
  AttemptManager* attempts = attempts_.get();
  shells_ =
      std::make_unique<ShellSessions>(ShellSessionsOptions{.endpoint = options_.scheduler_endpoint,
                                                           .api_key = options_.api_key,
                                                           .tls = options_.tls,
                                                           .seccomp = sandbox.seccomp_program()},
                                      [attempts](const std::string& run_id, int resumption) {
                                        return attempts->SandboxOf(run_id, resumption);
                                      });
  shells_->Start();
}

void WorkerDaemon::StartMetricsRunner() {
  // Every family is on /metrics from the first scrape, not only after the first refresh or the
  // first rank.
  WorkerEventMetrics::Default();
  RefreshMetrics();
  // On the monotonic clock: a step of the wall clock neither stops nor hurries it.
  metrics_runner_ = std::make_unique<PeriodicRunner>(MonotonicClock::Shared(), absl::Seconds(1),
                                                     [this, tick = 0]() mutable {
                                                       RefreshMetrics();
                                                       if (tick++ % 60 == 0) CollectGarbage();
                                                     });
}

void WorkerDaemon::Crash() {
  // As a power loss would: the ranks, the canaries and the fence watchdog die with the worker,
  // nothing is reported, and the control plane finds out when the lease lapses.
  spdlog::error("injected crash: node {} goes down now", options_.node_name);
  // SIGKILL straight to the groups: no SIGTERM a rank could answer, and no exit the attempt
  // manager could report before this process is gone.
  auto groups = attempts_->RankProcessGroups();
  for (pid_t g : canaries_->ProcessGroups()) groups.push_back(g);
  for (pid_t g : groups) ::kill(-g, SIGKILL);
  if (watchdog_ > 0) ::kill(watchdog_, SIGKILL);
  ::_exit(137);
}

void WorkerDaemon::CollectGarbage() {
  std::set<std::pair<std::string, int>> active;
  for (const auto& a : attempts_->LocalAttempts()) active.emplace(a.run_id(), a.resumption_index());
  const int removed =
      CollectFinishedAttempts(options_.state_dir, active, options_.keep_finished, clock_->Now());
  if (removed > 0) spdlog::info("removed {} finished attempt folder(s)", removed);
}

void WorkerDaemon::RefreshMetrics() {
  auto& m = WorkerMetrics::Get();
  const auto ship = shipper_->stats();
  const auto control = session_->stats();
  m.running_ranks.Set(attempts_->running_ranks());
  CatchUp(m.lines_acked, static_cast<double>(ship.lines_acked));
  CatchUp(m.log_reconnects, static_cast<double>(ship.reconnects));
  CatchUp(m.registrations, static_cast<double>(control.registrations));
  CatchUp(m.fences, static_cast<double>(control.fences));
  m.connected.Set(control.connected ? 1 : 0);
  m.log_backlog.Set(static_cast<double>(ship.backlog_bytes));
}

WorkerDaemon::~WorkerDaemon() {
  // Order: no new commands; the ranks stop (their exits are not reported, since the node goes
  // away and the control plane ends its attempts when the lease lapses); their last lines are
  // shipped if the log service takes them within a few seconds.
  metrics_runner_.reset();
  spare_warmer_.reset();  // its answer goes through the session
  session_.reset();
  shells_.reset();    // hangs up every shell before the ranks stop
  throttle_.reset();  // lets stopped ranks run again, so that they can be stopped
  canaries_.reset();
  if (preflight_) preflight_->CancelScripts();  // a start waiting on one must not hold us up
  attempts_.reset();
  if (walls_) walls_->Remove();
  for (int i = 0; i < 300 && !shipper_->Drained(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  shipper_.reset();
  if (watchdog_ > 0) {
    ::kill(watchdog_, SIGKILL);
    std::filesystem::remove(std::filesystem::path(options_.state_dir) / "watchdog.pid");
  }
}

}  // namespace tessera::worker
