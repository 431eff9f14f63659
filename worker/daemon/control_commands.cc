#include "worker/daemon/control_commands.h"

#include <spdlog/spdlog.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/timestamps.h"

namespace tessera::worker {
namespace {

std::string ErrorOf(const absl::Status& status) {
  return status.ok() ? std::string() : std::string(status.message());
}

}  // namespace

ControlCommands::ControlCommands(AttemptManager& attempts, CanaryRunner* canaries,
                                 FaultInjector* faults, SpareWarmer* spares, Send send)
    : attempts_(attempts),
      canaries_(canaries),
      faults_(faults),
      spares_(spares),
      send_(std::move(send)) {}

void ControlCommands::Execute(const v1::ControlMessage& command) {
  if (command.body_case() == v1::ControlMessage::kWarmSpare && spares_ != nullptr) {
    // Pulls take minutes: the answer goes when they are done, from the warmer's thread.
    spdlog::info("warming as a hot spare: {} image(s)", command.warm_spare().images_size());
    spares_->Warm(command.warm_spare(),
                  [this, command_id = command.command_id()](const std::string& error) {
                    v1::ControlMessage answered;
                    answered.set_command_id(command_id);
                    Acknowledge(answered, error);
                  });
    return;
  }
  if (command.body_case() == v1::ControlMessage::kInjectFault && faults_ != nullptr) {
    const v1::FaultKind kind = command.inject_fault().kind();
    if (kind == v1::FAULT_KIND_CRASH || kind == v1::FAULT_KIND_NETDROP) {
      const absl::Status valid = faults_->Validate(command.inject_fault());
      Acknowledge(command, ErrorOf(valid));
      if (valid.ok()) (void)faults_->Inject(command.inject_fault());
      return;
    }
  }
  Acknowledge(command, Carry(command));
}

std::string ControlCommands::Carry(const v1::ControlMessage& command) {
  switch (command.body_case()) {
    case v1::ControlMessage::kStartAttempt: {
      const v1::StartAttempt& start = command.start_attempt();
      const absl::Status st = attempts_.Start(start);
      if (!st.ok()) {
        spdlog::error("starting run {} attempt {}: {}", start.run_id(), start.resumption_index(),
                      st.ToString());
      }
      return ErrorOf(st);
    }
    case v1::ControlMessage::kStopAttempt: {
      const v1::StopAttempt& stop = command.stop_attempt();
      spdlog::info("stop run {} attempt {}: {}", stop.run_id(), stop.resumption_index(),
                   stop.reason());
      attempts_.Stop(stop.run_id(), stop.resumption_index(),
                     FromProtoDuration(stop.grace_period()));
      return "";
    }
    case v1::ControlMessage::kStartCanary:
      if (canaries_ == nullptr) return "this worker runs no canaries";
      return ErrorOf(canaries_->Start(command.start_canary()));
    case v1::ControlMessage::kInjectFault:
      if (faults_ == nullptr) return "this worker does not allow fault injection";
      return ErrorOf(faults_->Inject(command.inject_fault()));
    case v1::ControlMessage::kWarmSpare:
      return "this worker cannot stand in as a hot spare";
    default:
      return absl::StrCat("this worker does not support command ",
                          static_cast<int>(command.body_case()));
  }
}

void ControlCommands::Acknowledge(const v1::ControlMessage& command, const std::string& error) {
  if (command.command_id().empty()) return;
  v1::WorkerMessage ack;
  ack.mutable_ack()->set_command_id(command.command_id());
  ack.mutable_ack()->set_ok(error.empty());
  if (!error.empty()) ack.mutable_ack()->set_error(error);
  // Lost with a broken stream: whoever sent the command stops waiting for it at its timeout.
  (void)send_(ack);
}

}  // namespace tessera::worker
