// What a run must pass to be had besides its spec's checks (RunAdmission), through the run
// manager: the user's waiting runs, who may ask for priority high, and a run that stops being
// preemptible.
#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "services/runs/run_manager.h"
#include "tests/unit/runs/run_manager_fixture.h"

namespace tessera::runs {
namespace run_admission_test {

using testing::Fixture;

// A run manager over the fixture's stores, held to `admission` (and given `secrets`, when set).
Runs WithAdmission(Fixture& f, AdmissionPolicy admission,
                   std::shared_ptr<store::SecretStore> secrets = nullptr) {
  return f.Make(RunManagerOptions{.allow_host_image = true, .admission = std::move(admission)},
                nullptr, std::move(secrets));
}

TEST_CASE("a user's waiting runs are limited, with an error that names the limit") {
  Fixture f;
  Runs limited_roles = WithAdmission(f, {.max_waiting_runs_per_user = 2});
  RunManager& limited = *limited_roles.manager;
  v1::SubmitRunRequest req;
  req.mutable_spec()->set_name("w");
  req.mutable_spec()->set_command("x");
  req.mutable_spec()->mutable_compute()->set_gpus(8);
  v1::SubmitRunResponse resp;
  REQUIRE(limited.SubmitRun(f.alice, req, &resp).ok());
  const std::string first = resp.run().name();
  REQUIRE(limited.SubmitRun(f.alice, req, &resp).ok());
  const absl::Status third = limited.SubmitRun(f.alice, req, &resp);
  CHECK(absl::IsResourceExhausted(third));
  CHECK(absl::StrContains(third.message(), "user alice already has 2 runs waiting"));
  CHECK(absl::StrContains(third.message(), "--max-waiting-runs-per-user 2"));
  CHECK(f.stores.runs->ListRuns({})->size() == 2);
  // Another user is not held by alice's runs.
  CHECK(limited.SubmitRun(f.bob, req, &resp).ok());
  // A run that stops waiting frees its place.
  v1::StopRunRequest stop;
  stop.set_name(first);
  v1::StopRunResponse stopped;
  REQUIRE(limited.StopRun(f.alice, stop, &stopped).ok());
  CHECK(limited.SubmitRun(f.alice, req, &resp).ok());
}

TEST_CASE("a user's submits are held to a rate, refused before the database, and refill") {
  Fixture f;
  Runs limited_roles = WithAdmission(f, {.max_submits_per_user_per_second = 2});
  RunManager& limited = *limited_roles.manager;
  v1::SubmitRunRequest req;
  req.mutable_spec()->set_name("s");
  req.mutable_spec()->set_command("x");
  req.mutable_spec()->mutable_compute()->set_gpus(8);
  v1::SubmitRunResponse resp;
  for (int i = 0; i < 20; ++i) REQUIRE(limited.SubmitRun(f.alice, req, &resp).ok());  // 10 s
  const absl::Status refused = limited.SubmitRun(f.alice, req, &resp);
  CHECK(absl::IsResourceExhausted(refused));
  CHECK(refused.message() ==
        "user alice submitted runs faster than this cluster allows one user (2 a second, 20 at "
        "once: tessera-server --max-submits-per-user-per-second 2); submit again in 0.5 s");
  CHECK(f.stores.runs->ListRuns({})->size() == 20);
  // A retry of a submit that was taken is answered again, not counted.
  req.set_idempotency_key("once");
  f.clock->Advance(absl::Milliseconds(500));
  REQUIRE(limited.SubmitRun(f.alice, req, &resp).ok());
  const std::string taken = resp.run().id();
  REQUIRE(limited.SubmitRun(f.alice, req, &resp).ok());
  CHECK(resp.run().id() == taken);
  req.clear_idempotency_key();
  CHECK(absl::IsResourceExhausted(limited.SubmitRun(f.alice, req, &resp)));
  // Others are not held by alice's rate; operators and admins are not held at all.
  CHECK(limited.SubmitRun(f.bob, req, &resp).ok());
  for (int i = 0; i < 30; ++i) REQUIRE(limited.SubmitRun(f.admin, req, &resp).ok());
  // Her budget refills at the rate.
  f.clock->Advance(absl::Seconds(1));
  CHECK(limited.SubmitRun(f.alice, req, &resp).ok());
  CHECK(limited.SubmitRun(f.alice, req, &resp).ok());
  CHECK(absl::IsResourceExhausted(limited.SubmitRun(f.alice, req, &resp)));
}

TEST_CASE(
    "a run names only secrets its owner has, and one naming none is told what it leaves out") {
  Fixture f;
  Runs checked_roles = WithAdmission(f, {}, f.stores.secrets);
  RunManager& checked = *checked_roles.manager;
  for (const auto& [name, type] :
       {std::pair{"hf", v1::SECRET_TYPE_ENVIRONMENT}, std::pair{"gcp", v1::SECRET_TYPE_MOUNTED},
        std::pair{"ghcr", v1::SECRET_TYPE_DOCKER_REGISTRY}}) {
    store::SecretRecord record;
    record.secret.set_user("alice");
    record.secret.set_name(name);
    record.secret.set_type(type);
    record.sealed = "sealed";
    REQUIRE(f.stores.secrets->CreateSecret(record).ok());
  }
  auto events_of = [&](const std::string& run_id) {
    auto events = f.stores.runs->ListEvents(run_id);
    REQUIRE(events.ok());
    std::string all;
    for (const v1::RunEvent& e : *events) all += e.message() + "\n";
    return all;
  };
  v1::SubmitRunRequest req;
  req.mutable_spec()->set_name("s");
  req.mutable_spec()->set_command("x");
  v1::SubmitRunResponse resp;

  // Naming none: a note lists the environment and file secrets left out (not the registry's,
  // which the image's registry decides).
  REQUIRE(checked.SubmitRun(f.alice, req, &resp).ok());
  const std::string told = events_of(resp.run().id());
  CHECK(absl::StrContains(told, "this run gets none of your secrets gcp, hf"));
  CHECK(absl::StrContains(told, "secrets: all"));
  CHECK_FALSE(absl::StrContains(told, "ghcr"));

  // Naming one: no note; naming one she lacks (or Bob's): refused, naming it.
  req.mutable_spec()->add_secrets("hf");
  REQUIRE(checked.SubmitRun(f.alice, req, &resp).ok());
  CHECK_FALSE(absl::StrContains(events_of(resp.run().id()), "gets none"));
  const absl::Status bobs = checked.SubmitRun(f.bob, req, &resp);
  CHECK(absl::IsNotFound(bobs));
  CHECK(absl::StrContains(bobs.message(), "no secret named 'hf'"));
  req.mutable_spec()->add_secrets("wandb");
  const absl::Status missing = checked.SubmitRun(f.alice, req, &resp);
  CHECK(absl::IsNotFound(missing));
  CHECK(absl::StrContains(missing.message(), "'wandb'"));

  // all: every one, no note.
  req.mutable_spec()->clear_secrets();
  req.mutable_spec()->set_all_secrets(true);
  REQUIRE(checked.SubmitRun(f.alice, req, &resp).ok());
  CHECK_FALSE(absl::StrContains(events_of(resp.run().id()), "gets none"));
}

v1::SubmitRunRequest PrioritizedRun(v1::Priority priority, bool preemptible = false) {
  v1::SubmitRunRequest req;
  req.mutable_spec()->set_name("p");
  req.mutable_spec()->set_command("x");
  req.mutable_spec()->mutable_compute()->set_gpus(8);
  req.mutable_spec()->mutable_scheduling()->set_priority(priority);
  req.mutable_spec()->mutable_scheduling()->set_preemptible(preemptible);
  return req;
}

TEST_CASE("priority high is for operators, admins and the users and teams the cluster names") {
  Fixture f;
  f.fit->team = "vision";
  Runs policy_roles =
      WithAdmission(f, {.high_priority_users = {"carol"}, .high_priority_teams = {"speech"}});
  RunManager& policy = *policy_roles.manager;
  v1::SubmitRunResponse resp;
  const absl::Status refused = policy.SubmitRun(f.alice, PrioritizedRun(v1::PRIORITY_HIGH), &resp);
  CHECK(absl::IsPermissionDenied(refused));
  CHECK(absl::StrContains(refused.message(), "alice (team vision) is not one of them"));
  CHECK(f.stores.runs->ListRuns({})->empty());
  CHECK(policy.SubmitRun(f.alice, PrioritizedRun(v1::PRIORITY_MEDIUM), &resp).ok());
  CHECK(policy.SubmitRun(f.admin, PrioritizedRun(v1::PRIORITY_HIGH), &resp).ok());
  CHECK(policy.SubmitRun({"carol", v1::ROLE_USER}, PrioritizedRun(v1::PRIORITY_HIGH), &resp).ok());
  f.fit->team = "speech";
  CHECK(policy.SubmitRun(f.bob, PrioritizedRun(v1::PRIORITY_HIGH), &resp).ok());
  // Raising a run's priority later is held to the same rule.
  f.fit->team = "vision";
  REQUIRE(policy.SubmitRun(f.alice, PrioritizedRun(v1::PRIORITY_LOW), &resp).ok());
  v1::UpdateRunRequest raise;
  raise.set_name(resp.run().name());
  raise.set_priority(v1::PRIORITY_HIGH);
  v1::UpdateRunResponse updated;
  CHECK(absl::IsPermissionDenied(policy.UpdateRun(f.alice, raise, &updated)));
  CHECK(policy.UpdateRun(f.admin, raise, &updated).ok());
  CHECK(updated.run().spec().scheduling().priority() == v1::PRIORITY_HIGH);
}

TEST_CASE("a run stops being preemptible only where that cannot turn borrowing into owning") {
  Fixture f;
  f.fit->team = "vision";
  v1::SubmitRunResponse resp;
  REQUIRE(f.manager.SubmitRun(f.alice, PrioritizedRun(v1::PRIORITY_MEDIUM, true), &resp).ok());
  const v1::Run run = resp.run();
  v1::UpdateRunRequest off;
  off.set_name(run.name());
  off.set_preemptible(false);
  v1::UpdateRunResponse updated;
  // Waiting: the quota is checked again, as at submit.
  f.fit->result = absl::InvalidArgumentError("compute.gpus: 8 GPUs are more than team vision's");
  CHECK(f.manager.UpdateRun(f.alice, off, &updated).message() ==
        "compute.gpus: 8 GPUs are more than team vision's");
  CHECK_FALSE(f.fit->asked_preemptible);
  f.fit->result = absl::OkStatus();
  REQUIRE(f.manager.UpdateRun(f.alice, off, &updated).ok());
  CHECK_FALSE(updated.run().spec().scheduling().preemptible());
  // Running in a team: it may hold borrowed GPUs, so it stays preemptible.
  REQUIRE(f.manager.SubmitRun(f.alice, PrioritizedRun(v1::PRIORITY_MEDIUM, true), &resp).ok());
  f.Record(resp.run(), 0, v1::RUN_STATUS_QUEUED);
  f.Record(resp.run(), 0, v1::RUN_STATUS_STARTING);
  const v1::Run running = f.Record(resp.run(), 0, v1::RUN_STATUS_RUNNING);
  off.set_name(running.name());
  const absl::Status refused = f.manager.UpdateRun(f.alice, off, &updated);
  CHECK(absl::IsFailedPrecondition(refused));
  CHECK(absl::StrContains(refused.message(), "borrowed beyond team vision's quota"));
  CHECK(f.stores.runs->GetRun(running.name())->spec().scheduling().preemptible());
  // Turning it on is always allowed; outside any team there is nothing to borrow.
  f.fit->team = "";
  REQUIRE(f.manager.SubmitRun(f.bob, PrioritizedRun(v1::PRIORITY_MEDIUM, true), &resp).ok());
  f.Record(resp.run(), 0, v1::RUN_STATUS_QUEUED);
  f.Record(resp.run(), 0, v1::RUN_STATUS_STARTING);
  f.Record(resp.run(), 0, v1::RUN_STATUS_RUNNING);
  off.set_name(resp.run().name());
  CHECK(f.manager.UpdateRun(f.bob, off, &updated).ok());
}

}  // namespace run_admission_test
}  // namespace tessera::runs
