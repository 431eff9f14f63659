// tessera-worker: the node daemon. See worker_daemon.h; its flags are worker_flags.h's.
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <iostream>
#include <optional>

#include "transport/service_host.h"
#include "worker/daemon/fence_watchdog.h"
#include "worker/daemon/worker_flags.h"
#include "worker/gpu/gpu_discovery.h"

namespace {

int Fail(const absl::Status& status) {
  std::cerr << "tessera-worker: " << status.message() << "\n";
  return 2;
}

// The subcommands that are not the daemon: the fence watchdog (this same binary, started by the
// worker: fence_watchdog.h) and `gpus` (what an operator runs on a new node: the GPUs the worker
// would register, and a probe). nullopt for the daemon itself.
std::optional<int> RunSubcommand(int argc, char** argv) {
  if (argc == 5 && std::string(argv[1]) == "fence-watchdog") {
    return tessera::worker::FenceWatchdogMain(argv[2], absl::Milliseconds(std::atoll(argv[3])),
                                              static_cast<pid_t>(std::atoll(argv[4])));
  }
  if (argc < 2 || std::string(argv[1]) != "gpus") return std::nullopt;
  if (argc == 2) return tessera::worker::PrintGpusMain(-1);
  if (argc == 4 && std::string(argv[2]) == "--simulate-gpus") {
    return tessera::worker::PrintGpusMain(std::atoi(argv[3]));
  }
  std::cerr << "usage: tessera-worker gpus [--simulate-gpus N]\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (auto code = RunSubcommand(argc, argv)) return *code;
  tessera::BlockTerminationSignals();
  tessera::TurnOffLockOrderChecks();
  CLI::App app{"tessera-worker: registers this node, starts and stops ranks, ships their logs"};
  tessera::worker::WorkerFlags flags;
  tessera::worker::AddWorkerFlags(app, flags);
  CLI11_PARSE(app, argc, argv);
  if (auto st = tessera::ConfigureLogging(flags.log_level); !st.ok()) return Fail(st);
  auto setup = tessera::worker::FinishWorkerFlags(std::move(flags));
  if (!setup.ok()) return Fail(setup.status());
  const tessera::worker::WorkerOptions& o = setup->options;

  auto daemon = tessera::worker::WorkerDaemon::Start(o);
  if (!daemon.ok()) return Fail(daemon.status());
  // A certificate the control plane signed is renewed by it before it expires.
  std::unique_ptr<tessera::worker::NodeCertificateRenewal> renewal;
  if (setup->joined && o.tls.enabled() && o.tls.cert_file == setup->joined->certificate) {
    renewal = std::make_unique<tessera::worker::NodeCertificateRenewal>(
        *setup->joined, setup->join_endpoint, o.api_key, o.tls, tessera::SystemClock::Shared());
  }
  std::cout << "tessera-worker " << o.node_name << " running; metrics=" << (*daemon)->metrics_port()
            << std::endl;
  tessera::WaitForTerminationSignal();
  spdlog::info("stopping");
  renewal.reset();
  daemon->reset();
  return 0;
}
