#include "worker/daemon/worker_flags.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/byte_size.h"
#include "base/status_macros.h"
#include "transport/service_host.h"
#include "worker/daemon/rank_environment.h"
#include "worker/daemon/rank_identity.h"

namespace tessera::worker {
namespace {

std::string Hostname() {
  char buf[256] = {};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}

// "KEY=VALUE" as a pair; the error names `flag`.
absl::StatusOr<std::pair<std::string, std::string>> KeyValue(const std::string& flag,
                                                             const std::string& entry) {
  std::pair<std::string, std::string> kv = absl::StrSplit(entry, absl::MaxSplits('=', 1));
  if (kv.first.empty() || entry.find('=') == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": expected KEY=VALUE, got \"", entry, "\""));
  }
  return kv;
}

// Plain text only to loopback: checked before any secret (a join token) is sent.
absl::Status CheckTransport(const tls::TlsFlags& tls,
                            const std::vector<tls::NamedAddress>& addresses) {
  if (tls.plaintext) return tls::CheckTlsFlags(tls, addresses);
  if (tls.ca_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls-ca is required: the cluster CA that the control plane's certificate must chain "
        "to (or --plaintext, for loopback addresses only)");
  }
  return absl::OkStatus();
}

// The certificate /metrics serves: given with TLS and --metrics-listen, a server certificate,
// never with --plaintext.
absl::Status CheckMetricsCertificate(const WorkerOptions& o) {
  const bool given = !o.metrics_tls_cert.empty() || !o.metrics_tls_key.empty();
  if (!o.tls.enabled() || o.metrics_listen.empty()) {
    if (!given) return absl::OkStatus();
    return absl::InvalidArgumentError(
        o.tls.enabled() ? "--metrics-tls-cert and --metrics-tls-key are for --metrics-listen, "
                          "which is not given"
                        : "--plaintext and --metrics-tls-cert contradict each other: choose one");
  }
  if (o.metrics_tls_cert.empty() || o.metrics_tls_key.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--metrics-listen ", o.metrics_listen,
        " over TLS needs --metrics-tls-cert and --metrics-tls-key: a server certificate for "
        "this node's name (deploy/tls-certs.sh metrics DIR ",
        o.node_name,
        "); the node's own certificate is a client certificate, for the control plane only"));
  }
  TESSERA_RETURN_IF_ERROR(tls::CheckServingCertificate("--metrics-tls-cert", o.metrics_tls_cert,
                                                       "--metrics-tls-key", o.metrics_tls_key));
  return CheckPrivateFile("--metrics-tls-key", o.metrics_tls_key);
}

// The node's key into `setup.options.api_key`: from --api-key-file, or by joining once with
// --join-token-file (its certificate too, where the control plane signs one).
absl::Status LoadCredentials(const WorkerFlags& f, WorkerSetup& setup) {
  WorkerOptions& o = setup.options;
  std::string api_key_file = f.api_key_file;
  if (api_key_file.empty()) {
    TESSERA_ASSIGN_OR_RETURN(
        CredentialFiles files,
        JoinIfNeeded({.node = o.node_name,
                      .endpoint = setup.join_endpoint,
                      .token_file = f.join_token_file,
                      .credentials_dir = f.credentials_dir.empty() ? o.state_dir + "/credentials"
                                                                   : f.credentials_dir,
                      .tls = o.tls}));
    api_key_file = files.api_key;
    if (o.tls.enabled() && o.tls.cert_file.empty()) {
      if (!std::filesystem::exists(files.certificate)) {
        return absl::FailedPreconditionError(absl::StrCat(
            "the control plane gave no certificate (it has no --tls-ca-key): give this node's "
            "certificate with --tls-cert and --tls-key (CN node:",
            o.node_name, ", deploy/tls-certs.sh node)"));
      }
      o.tls.cert_file = files.certificate;
      o.tls.key_file = files.private_key;
    }
    setup.joined = std::move(files);
  } else if (!f.join_token_file.empty()) {
    return absl::InvalidArgumentError(
        "--api-key-file and --join-token-file: give one (a joined node keeps its key in "
        "--credentials-dir)");
  }
  TESSERA_ASSIGN_OR_RETURN(o.api_key, ReadKeyFile(api_key_file));
  return absl::OkStatus();
}

}  // namespace

void AddWorkerFlags(CLI::App& app, WorkerFlags& f) {
  WorkerOptions& o = f.options;
  o.node_name = Hostname();
  o.state_dir = "/var/lib/tessera-worker";
  app.add_option("--scheduler-endpoint", o.scheduler_endpoint,
                 "host:port of the scheduler; with standbys, every instance (a:1,b:2): the "
                 "worker finds the leader and follows a failover")
      ->required();
  app.add_option("--log-endpoint", o.log_endpoint,
                 "host:port of the log service, or several (default: the scheduler's)");
  app.add_option("--api-key-file", f.api_key_file,
                 "a file holding this node's key (mode 600; a node key, made with `mcli admin "
                 "create-api-key --role node --node NAME`); or join with --join-token-file");
  app.add_option("--join-token-file", f.join_token_file,
                 "a file (mode 600) holding a one-time join token (`mcli admin "
                 "create-join-token --node NAME`): the worker joins with it once and keeps the "
                 "node key and certificate it gets in --credentials-dir");
  app.add_option("--credentials-dir", f.credentials_dir,
                 "where a joined node keeps its credentials (default: STATE_DIR/credentials)");
  app.add_option("--join-endpoint", f.join_endpoint,
                 "host:port of the run manager, where nodes join and renew their certificates "
                 "(default: the scheduler's)");
  app.add_option("--rank-user", f.rank_user,
                 "run ranks as this unprivileged user (required when the worker runs as root; "
                 "'root' runs them as root, for a single-user development machine only)");
  app.add_option("--node-name", o.node_name, "this node's name")->capture_default_str();
  app.add_option("--cluster", o.cluster, "the cluster this node belongs to")->capture_default_str();
  app.add_option("--address", o.address,
                 "host where this node's ranks are reachable (MASTER_ADDR; default: node name)");
  app.add_option("--simulate-gpus", o.simulate_gpus,
                 "report N simulated GPUs instead of asking NVML (0: a CPU-only node)")
      ->check(CLI::Range(0, 64));
  app.add_option("--procs-per-node", f.procs_per_node,
                 "ranks per node for runs that use no GPUs here (default: the run's, else 1)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--state-dir", o.state_dir, "run folders, spooled logs, attempt records")
      ->capture_default_str();
  app.add_option("--keep-finished-hours", f.keep_finished_hours,
                 "remove a finished attempt's folder (work dir, shipped logs) after this long")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 24.0 * 365));
  app.add_option("--label", f.labels, "KEY=VALUE node label (rack, switch ...), repeatable");
  app.add_option("--preflight-check", o.preflight.scripts,
                 "an executable run before each attempt's ranks start here; a non-zero exit "
                 "cordons the node and the run goes elsewhere (repeatable)");
  app.add_option("--preflight-timeout-seconds", f.preflight_timeout_seconds,
                 "a --preflight-check script still running after this long fails")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  app.add_option("--preflight-min-free-disk", f.min_free_disk,
                 "free space the state and shared folders need before ranks start (e.g. 1GiB)")
      ->capture_default_str();
  app.add_option("--preflight-min-shm", f.min_shm,
                 "free space /dev/shm needs before ranks start (e.g. 64MiB)")
      ->capture_default_str();
  app.add_option("--rank-env", f.rank_env,
                 "KEY=VALUE for every rank on this node (a shared folder, NCCL settings ...); "
                 "a run's own env_variables win; repeatable");
  app.add_option("--fence-margin-ms", f.fence_margin_ms,
                 "kill ranks this long before an unrenewed lease ends")
      ->capture_default_str()
      ->check(CLI::Range(50, 60000));
  app.add_option("--rank-nice", o.rank_nice,
                 "the nice value ranks run at: where every core is busy, the worker's heartbeats "
                 "and log shipping run first (0: the worker's own priority)")
      ->capture_default_str()
      ->check(CLI::Range(0, 19));
  app.add_option("--finish-log-wait-ms", f.finish_log_wait_ms,
                 "an attempt's end is reported once its ranks' last lines are in the log "
                 "service, or after this long at most")
      ->capture_default_str()
      ->check(CLI::Range(0, 60000));
  app.add_flag("!--no-fence-watchdog", o.fence_watchdog,
               "do not start the separate fencing process");
  app.add_option("--metrics-listen", o.metrics_listen, "host:port for /metrics (empty: none)");
  app.add_option("--metrics-tls-cert", o.metrics_tls_cert,
                 "PEM server certificate /metrics serves HTTPS with (with TLS and "
                 "--metrics-listen; deploy/tls-certs.sh metrics): the node's own certificate is "
                 "a client certificate (reloaded when the file changes)");
  app.add_option("--metrics-tls-key", o.metrics_tls_key, "PEM private key of --metrics-tls-cert");
  app.add_flag("--allow-fault-injection", o.allow_fault_injection,
               "let admins inject faults here (mcli admin inject-fault): for testing only");
  app.add_option("--canary-binary", o.canary_binary,
                 "the tessera-canary program (default: next to tessera-worker)");
  app.add_option("--network-walls", o.network_walls,
                 "walls around the ranks' network traffic (iptables rules on their uids): auto "
                 "(where the node can, else a loud warning and the node labelled "
                 "tessera.io/network-walls=unenforced), on (or the worker does not start), off")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "on", "off"}));
  app.add_option("--network-wall", f.network_walls,
                 "ADDRESS[/PREFIX][:PORT] no rank may reach (the control plane's database, say), "
                 "besides the cloud's metadata address and this worker's ports; repeatable");
  app.add_option("--log-level", f.log_level, "trace, debug, info, warn, error")
      ->capture_default_str();
  metrics::AddScrapeFlags(app, o.scrape);
  tls::AddTlsFlags(app, o.tls);
  AddSandboxFlags(app, f.sandbox);
}

absl::Status ApplyNodeFlags(const WorkerFlags& f, WorkerOptions& o) {
  for (const auto& label : f.labels) {
    TESSERA_ASSIGN_OR_RETURN(auto kv, KeyValue("--label", label));
    o.labels[kv.first] = kv.second;
  }
  for (const auto& entry : f.rank_env) {
    TESSERA_ASSIGN_OR_RETURN(auto kv, KeyValue("--rank-env", entry));
    if (IsReservedRankVariable(kv.first)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--rank-env: ", kv.first, " is set by Tessera for every rank"));
    }
    o.rank_env[kv.first] = kv.second;
  }
  for (const auto& wall : f.network_walls) {
    auto d = ParseWalledDestination(wall);
    if (!d.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--network-wall: ", d.status().message()));
    }
    o.walled.push_back(*d);
  }
  o.fence_margin = absl::Milliseconds(f.fence_margin_ms);
  o.finish_log_wait = absl::Milliseconds(f.finish_log_wait_ms);
  auto disk = ParseByteSize(f.min_free_disk);
  if (!disk.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--preflight-min-free-disk: ", disk.status().message()));
  }
  auto shm = ParseByteSize(f.min_shm);
  if (!shm.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--preflight-min-shm: ", shm.status().message()));
  }
  o.preflight.min_free_disk_bytes = *disk;
  o.preflight.min_shm_bytes = *shm;
  o.preflight.script_timeout = absl::Seconds(f.preflight_timeout_seconds);
  TESSERA_RETURN_IF_ERROR(ValidatePreflightConfig(o.preflight));
  o.keep_finished = absl::Seconds(f.keep_finished_hours * 3600);
  if (f.procs_per_node > 0) o.labels["tessera.io/procs-per-node"] = absl::StrCat(f.procs_per_node);
  if (!f.rank_user.empty() || ::geteuid() != 0) {
    TESSERA_ASSIGN_OR_RETURN(o.rank_identity, ResolveRankUser(f.rank_user, ::geteuid()));
  }
  TESSERA_RETURN_IF_ERROR(ApplySandboxFlags(f.sandbox, f.rank_user, o));
  if (o.canary_binary.empty() || o.canary_binary == "tessera-canary") {
    o.canary_binary =
        (std::filesystem::canonical("/proc/self/exe").parent_path() / "tessera-canary").string();
  }
  return absl::OkStatus();
}

absl::StatusOr<WorkerSetup> FinishWorkerFlags(WorkerFlags f) {
  WorkerSetup setup;
  setup.options = std::move(f.options);
  WorkerOptions& o = setup.options;
  setup.join_endpoint = f.join_endpoint.empty() ? o.scheduler_endpoint : f.join_endpoint;
  const std::vector<tls::NamedAddress> addresses = {{"--scheduler-endpoint", o.scheduler_endpoint},
                                                    {"--log-endpoint", o.log_endpoint},
                                                    {"--join-endpoint", setup.join_endpoint},
                                                    {"--metrics-listen", o.metrics_listen}};
  TESSERA_RETURN_IF_ERROR(CheckTransport(o.tls, addresses));
  TESSERA_RETURN_IF_ERROR(CheckMetricsCertificate(o));
  TESSERA_RETURN_IF_ERROR(LoadCredentials(f, setup));
  if (o.tls.enabled()) {
    TESSERA_RETURN_IF_ERROR(tls::CheckTlsFlags(o.tls, addresses));
    TESSERA_RETURN_IF_ERROR(CheckPrivateFile("--tls-key", o.tls.key_file));
  }
  TESSERA_RETURN_IF_ERROR(ApplyNodeFlags(f, o));
  return setup;
}

}  // namespace tessera::worker
