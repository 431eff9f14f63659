// The commands the control plane sends a node, carried out: start and stop attempts, start
// canaries, inject faults, warm a hot spare. Each command that carries an id is answered with one
// acknowledgement (ok, or the reason it was refused); the control stream itself (registration,
// heartbeats, the lease) is ControlSession's.
#pragma once

#include <functional>

#include "tessera/v1/worker.pb.h"
#include "worker/daemon/attempt_manager.h"
#include "worker/daemon/canary_runner.h"
#include "worker/daemon/fault_injector.h"
#include "worker/daemon/spare_warmer.h"

namespace tessera::worker {

class ControlCommands {
 public:
  // Sends a message on the control stream; false when the stream is broken.
  using Send = std::function<bool(const v1::WorkerMessage&)>;

  // `canaries`, `faults` and `spares` may be null: this worker then refuses those commands.
  ControlCommands(AttemptManager& attempts, CanaryRunner* canaries, FaultInjector* faults,
                  SpareWarmer* spares, Send send);

  // Carries out one command and sends its acknowledgement when it has an id. A fault that ends
  // the stream (a crash, a cut network) is acknowledged before it is injected, since no
  // acknowledgement could go out after it. A spare's warm-up is acknowledged once it is done.
  void Execute(const v1::ControlMessage& command);

 private:
  // The error an acknowledgement carries; empty when the command was carried out.
  std::string Carry(const v1::ControlMessage& command);
  void Acknowledge(const v1::ControlMessage& command, const std::string& error);

  AttemptManager& attempts_;
  CanaryRunner* const canaries_;
  FaultInjector* const faults_;
  SpareWarmer* const spares_;
  const Send send_;
};

}  // namespace tessera::worker
