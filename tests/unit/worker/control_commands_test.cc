// The commands a node carries out for the control plane, each answered once: on a real attempt
// manager (shell ranks in a temporary state folder) and a real fault injector.
#include "worker/daemon/control_commands.h"

#include <signal.h>

#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/temp_dir.h"
#include "tests/unit/worker/attempt_polling.h"

namespace tessera::worker {
namespace control_commands_test {

struct Fixture {
  testing::TempDir tmp{"control_commands_test"};  // removed after the manager is gone
  std::unique_ptr<AttemptManager> attempts;
  std::vector<v1::WorkerMessage> sent;
  Fixture() {
    AttemptManagerOptions options;
    options.state_dir = tmp.path;
    options.node_name = "n1";
    attempts = std::make_unique<AttemptManager>(
        options, SystemClock::Shared(), [](const RankOutput&) {}, [](const RankOutput&) {});
  }
  ~Fixture() { attempts->KillAll(); }
  ControlCommands Commands(CanaryRunner* canaries = nullptr, FaultInjector* faults = nullptr,
                           SpareWarmer* spares = nullptr) {
    return ControlCommands(*attempts, canaries, faults, spares, [this](const v1::WorkerMessage& m) {
      sent.push_back(m);
      return true;
    });
  }
  // The one acknowledgement sent since the last call.
  v1::CommandAck OnlyAck() {
    REQUIRE(sent.size() == 1);
    REQUIRE(sent[0].has_ack());
    v1::CommandAck ack = sent[0].ack();
    sent.clear();
    return ack;
  }
};

v1::ControlMessage StartCommand(const std::string& id, const std::string& image) {
  v1::ControlMessage m;
  m.set_command_id(id);
  v1::StartAttempt& s = *m.mutable_start_attempt();
  s.set_run_id("run-1");
  s.set_run_name("r");
  s.set_command("sleep 30");
  s.set_image(image);
  s.set_world_size(1);
  s.set_local_world_size(1);
  s.set_num_nodes(1);
  return m;
}

v1::ControlMessage FaultCommand(const std::string& id, v1::FaultKind kind, double seconds = 0) {
  v1::ControlMessage m;
  m.set_command_id(id);
  m.mutable_inject_fault()->set_kind(kind);
  m.mutable_inject_fault()->set_seconds(seconds);
  return m;
}

TEST_CASE("An attempt started and stopped by command, each command acknowledged by its id") {
  Fixture f;
  ControlCommands commands = f.Commands();
  commands.Execute(StartCommand("c-1", ""));
  v1::CommandAck ack = f.OnlyAck();
  CHECK(ack.command_id() == "c-1");
  CHECK(ack.ok());
  CHECK(ack.error().empty());
  CHECK(f.attempts->running_ranks() == 1);

  v1::ControlMessage stop;
  stop.set_command_id("c-2");
  stop.mutable_stop_attempt()->set_run_id("run-1");
  stop.mutable_stop_attempt()->mutable_grace_period()->set_seconds(5);
  commands.Execute(stop);
  ack = f.OnlyAck();
  CHECK(ack.command_id() == "c-2");
  CHECK(ack.ok());
  const auto updates = testing::PollUntilPhase(*f.attempts, v1::ATTEMPT_PHASE_FINISHED);
  for (const auto& u : updates) {
    for (const auto& e : u.rank_exits()) CHECK(e.signal() == SIGTERM);
  }
  CHECK(f.attempts->running_ranks() == 0);
}

TEST_CASE("A start the node cannot carry out is refused with the node's reason") {
  Fixture f;
  ControlCommands commands = f.Commands();
  commands.Execute(StartCommand("c-1", "registry.example:5000/team/train:1"));
  const v1::CommandAck ack = f.OnlyAck();
  CHECK_FALSE(ack.ok());
  CHECK(ack.error() == "this node runs no images");
  CHECK(f.attempts->running_ranks() == 0);
}

TEST_CASE("A command without an id is carried out and not acknowledged") {
  Fixture f;
  ControlCommands commands = f.Commands();
  commands.Execute(StartCommand("", ""));
  CHECK(f.sent.empty());
  CHECK(f.attempts->running_ranks() == 1);
}

TEST_CASE("Canaries and faults a worker was not given are refused, saying which") {
  Fixture f;
  ControlCommands commands = f.Commands();
  v1::ControlMessage canary;
  canary.set_command_id("c-1");
  canary.mutable_start_canary()->set_sweep_id("sweep-1");
  commands.Execute(canary);
  v1::CommandAck ack = f.OnlyAck();
  CHECK_FALSE(ack.ok());
  CHECK(ack.error() == "this worker runs no canaries");

  commands.Execute(FaultCommand("c-2", v1::FAULT_KIND_HANG));
  ack = f.OnlyAck();
  CHECK_FALSE(ack.ok());
  CHECK(ack.error() == "this worker does not allow fault injection");
}

TEST_CASE("A crash on a worker that does not allow injection is refused, and nothing crashes") {
  Fixture f;
  bool crashed = false;
  FaultTargets targets;
  targets.crash = [&] { crashed = true; };
  FaultInjector faults(/*allowed=*/false, "n1", targets);
  ControlCommands commands = f.Commands(nullptr, &faults);
  commands.Execute(FaultCommand("c-1", v1::FAULT_KIND_CRASH));
  const v1::CommandAck ack = f.OnlyAck();
  CHECK_FALSE(ack.ok());
  CHECK_THAT(ack.error(), Catch::Contains("--allow-fault-injection"));
  CHECK_FALSE(crashed);
}

TEST_CASE("A cut network is acknowledged before the network goes") {
  Fixture f;
  size_t sent_before_drop = 0;
  absl::Duration dropped_for;
  FaultTargets targets;
  targets.drop_network = [&](absl::Duration d) {
    sent_before_drop = f.sent.size();
    dropped_for = d;
  };
  FaultInjector faults(/*allowed=*/true, "n1", targets);
  ControlCommands commands = f.Commands(nullptr, &faults);
  commands.Execute(FaultCommand("c-1", v1::FAULT_KIND_NETDROP, 7));
  CHECK(sent_before_drop == 1);  // the acknowledgement had gone out
  CHECK(dropped_for == absl::Seconds(7));
  const v1::CommandAck ack = f.OnlyAck();
  CHECK(ack.ok());
  CHECK(ack.command_id() == "c-1");
}

TEST_CASE("A command this worker does not know is refused, naming it") {
  Fixture f;
  ControlCommands commands = f.Commands();
  v1::ControlMessage unknown;
  unknown.set_command_id("c-1");
  commands.Execute(unknown);
  const v1::CommandAck ack = f.OnlyAck();
  CHECK_FALSE(ack.ok());
  CHECK(ack.error() == "this worker does not support command 0");
}

}  // namespace control_commands_test
}  // namespace tessera::worker
