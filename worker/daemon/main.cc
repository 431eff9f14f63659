// tessera-worker: the node daemon. See worker_daemon.h.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include "absl/strings/str_split.h"
#include "base/byte_size.h"
#include "services/common/service_host.h"
#include "worker/daemon/fence_watchdog.h"
#include "worker/daemon/node_credentials.h"
#include "worker/daemon/rank_environment.h"
#include "worker/daemon/rank_identity.h"
#include "worker/daemon/sandbox_flags.h"
#include "worker/daemon/worker_daemon.h"
#include "worker/gpu/gpu_discovery.h"

namespace {

int Fail(const std::string& message) {
  std::cerr << "tessera-worker: " << message << "\n";
  return 2;
}

std::string Hostname() {
  char buf[256] = {};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  // The fence watchdog is this same binary, started by the worker (see fence_watchdog.h).
  if (argc == 5 && std::string(argv[1]) == "fence-watchdog") {
    return tessera::worker::FenceWatchdogMain(argv[2], absl::Milliseconds(std::atoll(argv[3])),
                                              static_cast<pid_t>(std::atoll(argv[4])));
  }
  // What an operator runs on a new node: the GPUs the worker would register, and a probe.
  if (argc >= 2 && std::string(argv[1]) == "gpus") {
    if (argc == 2) return tessera::worker::PrintGpusMain(-1);
    if (argc == 4 && std::string(argv[2]) == "--simulate-gpus") {
      return tessera::worker::PrintGpusMain(std::atoi(argv[3]));
    }
    std::cerr << "usage: tessera-worker gpus [--simulate-gpus N]\n";
    return 2;
  }
  tessera::BlockTerminationSignals();
  tessera::TurnOffLockOrderChecks();
  CLI::App app{"tessera-worker: registers this node, starts and stops ranks, ships their logs"};
  tessera::worker::WorkerOptions o;
  o.node_name = Hostname();
  o.state_dir = "/var/lib/tessera-worker";
  std::string api_key_file, log_level = "info";
  std::vector<std::string> labels;
  int fence_margin_ms = 500;
  app.add_option("--scheduler-endpoint", o.scheduler_endpoint,
                 "host:port of the scheduler; with standbys, every instance (a:1,b:2): the "
                 "worker finds the leader and follows a failover")
      ->required();
  app.add_option("--log-endpoint", o.log_endpoint,
                 "host:port of the log service, or several (default: the scheduler's)");
  app.add_option("--api-key-file", api_key_file,
                 "a file holding this node's key (mode 600; a node key, made with `mcli admin "
                 "create-api-key --role node --node NAME`); or join with --join-token-file");
  std::string join_token_file, credentials_dir, join_endpoint;
  app.add_option("--join-token-file", join_token_file,
                 "a file (mode 600) holding a one-time join token (`mcli admin "
                 "create-join-token --node NAME`): the worker joins with it once and keeps the "
                 "node key and certificate it gets in --credentials-dir");
  app.add_option("--credentials-dir", credentials_dir,
                 "where a joined node keeps its credentials (default: STATE_DIR/credentials)");
  app.add_option("--join-endpoint", join_endpoint,
                 "host:port of the run manager, where nodes join and renew their certificates "
                 "(default: the scheduler's)");
  std::string rank_user;
  app.add_option("--rank-user", rank_user,
                 "run ranks as this unprivileged user (required when the worker runs as root; "
                 "'root' runs them as root, for a single-user development machine only)");
  app.add_option("--node-name", o.node_name, "this node's name")->capture_default_str();
  app.add_option("--cluster", o.cluster, "the cluster this node belongs to")->capture_default_str();
  app.add_option("--address", o.address,
                 "host where this node's ranks are reachable (MASTER_ADDR; default: node name)");
  app.add_option("--simulate-gpus", o.simulate_gpus,
                 "report N simulated GPUs instead of asking NVML (0: a CPU-only node)")
      ->check(CLI::Range(0, 64));
  int procs_per_node = 0;
  app.add_option("--procs-per-node", procs_per_node,
                 "ranks per node for runs that use no GPUs here (default: the run's, else 1)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--state-dir", o.state_dir, "run folders, spooled logs, attempt records")
      ->capture_default_str();
  double keep_finished_hours = 24;
  app.add_option("--keep-finished-hours", keep_finished_hours,
                 "remove a finished attempt's folder (work dir, shipped logs) after this long")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 24.0 * 365));
  app.add_option("--label", labels, "KEY=VALUE node label (rack, switch ...), repeatable");
  std::string min_free_disk = "1GiB", min_shm = "64MiB";
  double preflight_timeout_seconds = 30;
  app.add_option("--preflight-check", o.preflight.scripts,
                 "an executable run before each attempt's ranks start here; a non-zero exit "
                 "cordons the node and the run goes elsewhere (repeatable)");
  app.add_option("--preflight-timeout-seconds", preflight_timeout_seconds,
                 "a --preflight-check script still running after this long fails")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  app.add_option("--preflight-min-free-disk", min_free_disk,
                 "free space the state and shared folders need before ranks start (e.g. 1GiB)")
      ->capture_default_str();
  app.add_option("--preflight-min-shm", min_shm,
                 "free space /dev/shm needs before ranks start (e.g. 64MiB)")
      ->capture_default_str();
  std::vector<std::string> rank_env;
  app.add_option("--rank-env", rank_env,
                 "KEY=VALUE for every rank on this node (a shared folder, NCCL settings ...); "
                 "a run's own env_variables win; repeatable");
  app.add_option("--fence-margin-ms", fence_margin_ms,
                 "kill ranks this long before an unrenewed lease ends")
      ->capture_default_str()
      ->check(CLI::Range(50, 60000));
  app.add_flag("!--no-fence-watchdog", o.fence_watchdog,
               "do not start the separate fencing process");
  app.add_option("--metrics-listen", o.metrics_listen, "host:port for /metrics (empty: none)");
  app.add_flag("--allow-fault-injection", o.allow_fault_injection,
               "let admins inject faults here (mcli admin inject-fault): for testing only");
  app.add_option("--canary-binary", o.canary_binary,
                 "the tessera-canary program (default: next to tessera-worker)");
  std::vector<std::string> network_walls;
  app.add_option("--network-walls", o.network_walls,
                 "walls around the ranks' network traffic (iptables rules on their uids): auto "
                 "(where the node can, else a loud warning and the node labelled "
                 "tessera.io/network-walls=unenforced), on (or the worker does not start), off")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "on", "off"}));
  app.add_option("--network-wall", network_walls,
                 "ADDRESS[/PREFIX][:PORT] no rank may reach (the control plane's database, say), "
                 "besides the cloud's metadata address and this worker's ports; repeatable");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error")
      ->capture_default_str();
  tessera::metrics::AddScrapeFlags(app, o.scrape);
  tessera::tls::AddTlsFlags(app, o.tls);
  tessera::worker::SandboxFlags sandbox_flags;
  tessera::worker::AddSandboxFlags(app, sandbox_flags);
  CLI11_PARSE(app, argc, argv);

  if (auto st = tessera::ConfigureLogging(log_level); !st.ok())
    return Fail(std::string(st.message()));
  if (join_endpoint.empty()) join_endpoint = o.scheduler_endpoint;
  const std::vector<tessera::tls::NamedAddress> addresses = {
      {"--scheduler-endpoint", o.scheduler_endpoint},
      {"--log-endpoint", o.log_endpoint},
      {"--join-endpoint", join_endpoint},
      {"--metrics-listen", o.metrics_listen}};
  // Plain text only to loopback: checked before any secret (a join token) is sent.
  if (o.tls.plaintext) {
    if (auto st = tessera::tls::CheckTlsFlags(o.tls, addresses); !st.ok()) {
      return Fail(std::string(st.message()));
    }
  } else if (o.tls.ca_file.empty()) {
    return Fail(
        "--tls-ca is required: the cluster CA that the control plane's certificate "
        "must chain to (or --plaintext, for loopback addresses only)");
  }
  std::optional<tessera::worker::CredentialFiles> joined;
  if (api_key_file.empty()) {
    auto files = tessera::worker::JoinIfNeeded(
        {.node = o.node_name,
         .endpoint = join_endpoint,
         .token_file = join_token_file,
         .credentials_dir =
             credentials_dir.empty() ? o.state_dir + "/credentials" : credentials_dir,
         .tls = o.tls});
    if (!files.ok()) return Fail(std::string(files.status().message()));
    api_key_file = files->api_key;
    joined = *files;
    if (o.tls.enabled() && o.tls.cert_file.empty()) {
      if (!std::filesystem::exists(files->certificate)) {
        return Fail(
            "the control plane gave no certificate (it has no --tls-ca-key): give this "
            "node's certificate with --tls-cert and --tls-key (CN node:" +
            o.node_name + ", deploy/tls-certs.sh node)");
      }
      o.tls.cert_file = files->certificate;
      o.tls.key_file = files->private_key;
    }
  } else if (!join_token_file.empty()) {
    return Fail(
        "--api-key-file and --join-token-file: give one (a joined node keeps its key in "
        "--credentials-dir)");
  }
  if (o.tls.enabled()) {
    if (auto st = tessera::tls::CheckTlsFlags(o.tls, addresses); !st.ok()) {
      return Fail(std::string(st.message()));
    }
    if (auto st = tessera::worker::CheckPrivateFile("--tls-key", o.tls.key_file); !st.ok()) {
      return Fail(std::string(st.message()));
    }
  }
  auto key = tessera::worker::ReadKeyFile(api_key_file);
  if (!key.ok()) return Fail(std::string(key.status().message()));
  o.api_key = *std::move(key);
  if (!rank_user.empty() || ::geteuid() != 0) {
    auto identity = tessera::worker::ResolveRankUser(rank_user, ::geteuid());
    if (!identity.ok()) return Fail(std::string(identity.status().message()));
    o.rank_identity = *identity;
  }
  for (const auto& label : labels) {
    std::pair<std::string, std::string> kv = absl::StrSplit(label, absl::MaxSplits('=', 1));
    if (kv.first.empty() || label.find('=') == std::string::npos) {
      return Fail("--label: expected KEY=VALUE, got \"" + label + "\"");
    }
    o.labels[kv.first] = kv.second;
  }
  for (const auto& entry : rank_env) {
    std::pair<std::string, std::string> kv = absl::StrSplit(entry, absl::MaxSplits('=', 1));
    if (kv.first.empty() || entry.find('=') == std::string::npos) {
      return Fail("--rank-env: expected KEY=VALUE, got \"" + entry + "\"");
    }
    if (tessera::worker::IsReservedRankVariable(kv.first)) {
      return Fail("--rank-env: " + kv.first + " is set by Tessera for every rank");
    }
    o.rank_env[kv.first] = kv.second;
  }
  if (auto st = tessera::worker::ApplySandboxFlags(sandbox_flags, rank_user, o); !st.ok()) {
    return Fail(std::string(st.message()));
  }
  for (const auto& wall : network_walls) {
    auto d = tessera::worker::ParseWalledDestination(wall);
    if (!d.ok()) return Fail("--network-wall: " + std::string(d.status().message()));
    o.walled.push_back(*d);
  }
  o.fence_margin = absl::Milliseconds(fence_margin_ms);
  {
    auto disk = tessera::ParseByteSize(min_free_disk);
    if (!disk.ok())
      return Fail("--preflight-min-free-disk: " + std::string(disk.status().message()));
    auto shm = tessera::ParseByteSize(min_shm);
    if (!shm.ok()) return Fail("--preflight-min-shm: " + std::string(shm.status().message()));
    o.preflight.min_free_disk_bytes = *disk;
    o.preflight.min_shm_bytes = *shm;
    o.preflight.script_timeout = absl::Seconds(preflight_timeout_seconds);
    if (auto st = tessera::worker::ValidatePreflightConfig(o.preflight); !st.ok()) {
      return Fail(std::string(st.message()));
    }
  }
  o.keep_finished = absl::Seconds(keep_finished_hours * 3600);
  if (procs_per_node > 0) o.labels["tessera.io/procs-per-node"] = std::to_string(procs_per_node);

  if (o.canary_binary.empty() || o.canary_binary == "tessera-canary") {
    o.canary_binary =
        (std::filesystem::canonical("/proc/self/exe").parent_path() / "tessera-canary").string();
  }
  auto daemon = tessera::worker::WorkerDaemon::Start(o);
  if (!daemon.ok()) return Fail(std::string(daemon.status().message()));
  // A certificate the control plane signed is renewed by it before it expires.
  std::unique_ptr<tessera::worker::NodeCertificateRenewal> renewal;
  if (joined && o.tls.enabled() && o.tls.cert_file == joined->certificate) {
    renewal = std::make_unique<tessera::worker::NodeCertificateRenewal>(
        *joined, join_endpoint, o.api_key, o.tls, tessera::SystemClock::Shared());
  }
  std::cout << "tessera-worker " << o.node_name << " running; metrics=" << (*daemon)->metrics_port()
            << std::endl;
  tessera::WaitForTerminationSignal();
  spdlog::info("stopping");
  renewal.reset();
  daemon->reset();
  return 0;
}
