#include "services/runs/run_manager.h"

#include <catch2/catch.hpp>
#include <set>

#include "absl/strings/match.h"
#include "base/timestamps.h"
#include "services/store/memory/memory_database.h"
#include "tests/unit/runs/run_manager_fixture.h"

namespace tessera::runs {
namespace run_manager_test {

using testing::Fixture;

TEST_CASE("submit names the run with a suffix, records it PENDING with its creation event") {
  Fixture f;
  v1::Run run = f.Submit(f.alice, "train");
  CHECK(run.name().rfind("train-", 0) == 0);
  CHECK(run.name().size() == std::string("train-").size() + 4);
  CHECK(run.user() == "alice");
  CHECK(run.status() == v1::RUN_STATUS_PENDING);
  v1::Run second = f.Submit(f.alice, "train");
  CHECK(second.name() != run.name());
  auto events = f.stores.runs->ListEvents(run.id());
  REQUIRE(events->size() == 1);
  CHECK((*events)[0].message() == "Run created");
}

TEST_CASE("submit is idempotent by key and rejects a reused key with another request") {
  Fixture f;
  v1::Run a = f.Submit(f.alice, "train", "req-1");
  v1::Run b = f.Submit(f.alice, "train", "req-1");
  CHECK(a.name() == b.name());
  CHECK(f.stores.runs->ListRuns({})->size() == 1);
  v1::SubmitRunRequest other;
  other.set_idempotency_key("req-1");
  other.mutable_spec()->set_name("other");
  other.mutable_spec()->set_command("x");
  v1::SubmitRunResponse resp;
  auto st = f.manager.SubmitRun(f.alice, other, &resp);
  CHECK(absl::IsInvalidArgument(st));
  CHECK(st.message().find("idempotency_key") != std::string::npos);
}

TEST_CASE("submit rejects bad specs and specs that cannot fit, creating nothing") {
  Fixture f;
  v1::SubmitRunRequest req;
  v1::SubmitRunResponse resp;
  CHECK(absl::IsInvalidArgument(f.manager.SubmitRun(f.alice, req, &resp)));
  req.mutable_spec()->set_name("ok");
  auto st = f.manager.SubmitRun(f.alice, req, &resp);  // no command
  CHECK(absl::IsInvalidArgument(st));
  CHECK(st.message().find("command") != std::string::npos);
  req.mutable_spec()->set_command("x");
  f.fit->result = absl::InvalidArgumentError("compute.gpus: 12 GPUs cannot be placed");
  CHECK(f.manager.SubmitRun(f.alice, req, &resp).message() ==
        "compute.gpus: 12 GPUs cannot be placed");
  CHECK(f.stores.runs->ListRuns({})->empty());
}

TEST_CASE("a spec sent as text is read as mcli reads a run YAML, its notes kept as events") {
  Fixture f;
  v1::SubmitRunRequest req;
  v1::SubmitRunResponse resp;
  req.set_spec_text(
      "run_name: From_Text\ncommand: python train.py\ncompute:\n  gpus: 8\n"
      "scheduling:\n  priority: low\nenv_variables:\n  WANDB_MODE: offline\n");
  REQUIRE(f.manager.SubmitRun(f.alice, req, &resp).ok());
  const v1::Run& run = resp.run();
  CHECK(run.name().rfind("from-text-", 0) == 0);
  CHECK(run.spec().scheduling().priority() == v1::PRIORITY_LOW);
  REQUIRE(run.spec().env_variables_size() == 1);
  CHECK(run.spec().env_variables(0).key() == "WANDB_MODE");
  auto events = f.stores.runs->ListEvents(run.id());
  REQUIRE(events.ok());
  bool noted = false;
  for (const auto& e : *events) noted = noted || absl::StrContains(e.message(), "run_name");
  CHECK(noted);  // what was read otherwise than written

  // The same as a JSON object (the Python SDK sends its RunConfig so).
  v1::SubmitRunRequest json;
  json.set_spec_text(R"({"name": "as-json", "command": "x", "compute": {"gpus": 8},
                         "scheduling": {"priority": "HIGH"}})");
  REQUIRE(f.manager.SubmitRun(f.admin, json, &resp).ok());
  CHECK(resp.run().spec().scheduling().priority() == v1::PRIORITY_HIGH);

  // Errors name the field, and where in the text it is.
  v1::SubmitRunRequest bad;
  bad.set_spec_text("name: bad\ncommand: x\ncompute:\n  gpus: -4\n");
  auto st = f.manager.SubmitRun(f.alice, bad, &resp);
  REQUIRE(absl::IsInvalidArgument(st));
  CHECK(st.message().find("spec_text: line 4, column 9: compute.gpus") == 0);
  bad.mutable_spec()->set_name("both");
  st = f.manager.SubmitRun(f.alice, bad, &resp);
  CHECK(st.message() == "spec_text: not with spec (give one of them)");
}

TEST_CASE("a hang_timeout under the cluster's floor is refused, naming the floor") {
  Fixture f;
  v1::SubmitRunRequest req;
  req.mutable_spec()->set_name("quiet");
  req.mutable_spec()->set_command("sleep 1000");
  req.mutable_spec()->mutable_compute()->set_gpus(8);
  req.mutable_spec()->mutable_scheduling()->set_hang_timeout_seconds(5);
  v1::SubmitRunResponse resp;
  const auto st = f.manager.SubmitRun(f.alice, req, &resp);
  REQUIRE(absl::IsInvalidArgument(st));
  CHECK(st.message().find("scheduling.hang_timeout: at least 60 seconds") != std::string::npos);
  req.mutable_spec()->mutable_scheduling()->set_hang_timeout_seconds(60);
  CHECK(f.manager.SubmitRun(f.alice, req, &resp).ok());
  // A cluster may set its own floor.
  Runs lenient_roles =
      f.Make(RunManagerOptions{.min_hang_timeout = absl::Seconds(2), .allow_host_image = true});
  RunManager& lenient = *lenient_roles.manager;
  req.mutable_spec()->mutable_scheduling()->set_hang_timeout_seconds(5);
  CHECK(lenient.SubmitRun(f.alice, req, &resp).ok());
}

TEST_CASE("users see and stop only their own runs, admins see all") {
  Fixture f;
  v1::Run mine = f.Submit(f.alice, "mine");
  f.Submit(f.bob, "theirs");
  v1::ListRunsResponse list;
  REQUIRE(f.manager.ListRuns(f.alice, {}, &list).ok());
  REQUIRE(list.runs_size() == 1);
  CHECK(list.runs(0).name() == mine.name());
  v1::ListRunsRequest other_user;
  other_user.mutable_filter()->set_user("bob");
  CHECK(absl::IsPermissionDenied(f.manager.ListRuns(f.alice, other_user, &list)));
  v1::ListRunsResponse all;
  REQUIRE(f.manager.ListRuns(f.admin, {}, &all).ok());
  CHECK(all.runs_size() == 2);

  v1::StopRunRequest stop;
  stop.set_name(mine.name());
  v1::StopRunResponse stopped;
  CHECK(absl::IsNotFound(f.manager.StopRun(f.bob, stop, &stopped)));
  REQUIRE(f.manager.StopRun(f.alice, stop, &stopped).ok());
  CHECK(stopped.run().status() == v1::RUN_STATUS_STOPPED);

  v1::GetRunRequest get;
  get.set_name(mine.name());
  v1::GetRunResponse got;
  CHECK(absl::IsNotFound(f.manager.GetRun(f.bob, get, &got)));
  CHECK(f.manager.GetRun(f.admin, get, &got).ok());
}

TEST_CASE("ListRuns pages with tokens: every run once and in order, bad pages refused") {
  Fixture f;
  for (int i = 0; i < 7; ++i) {
    f.Submit(f.alice, "run-" + std::to_string(i));
    f.clock->Advance(absl::Seconds(i % 2));  // some runs share a creation time
  }
  v1::ListRunsResponse whole;
  REQUIRE(f.manager.ListRuns(f.alice, {}, &whole).ok());
  REQUIRE(whole.runs_size() == 7);
  CHECK(whole.next_page_token().empty());

  v1::ListRunsRequest req;
  req.set_page_size(3);
  std::vector<std::string> paged;
  std::vector<int> sizes;
  do {
    v1::ListRunsResponse page;
    REQUIRE(f.manager.ListRuns(f.alice, req, &page).ok());
    sizes.push_back(page.runs_size());
    for (const auto& r : page.runs()) paged.push_back(r.name());
    req.set_page_token(page.next_page_token());
  } while (!req.page_token().empty());
  CHECK(sizes == std::vector<int>{3, 3, 1});
  std::vector<std::string> expected;
  for (const auto& r : whole.runs()) expected.push_back(r.name());
  CHECK(paged == expected);

  // The filter's limit caps the list: no token past it.
  v1::ListRunsRequest capped;
  capped.set_page_size(3);
  capped.mutable_filter()->set_limit(2);
  v1::ListRunsResponse two;
  REQUIRE(f.manager.ListRuns(f.alice, capped, &two).ok());
  CHECK(two.runs_size() == 2);
  CHECK(two.next_page_token().empty());

  v1::ListRunsRequest bad;
  bad.set_page_size(1001);
  v1::ListRunsResponse none;
  auto st = f.manager.ListRuns(f.alice, bad, &none);
  CHECK(absl::IsInvalidArgument(st));
  CHECK(st.message() == "page_size: must be between 0 and 1000, got 1001");
  bad.set_page_size(2);
  bad.set_page_token("not-a-token");
  st = f.manager.ListRuns(f.alice, bad, &none);
  CHECK(absl::IsInvalidArgument(st));
  CHECK(st.message() ==
        "page_token: not a token this server issued (pass next_page_token unchanged)");
}

TEST_CASE("internal RPCs need a system key") {
  Fixture f;
  v1::Run run = f.Submit(f.alice, "r");
  v1::RecordAttemptRequest req;
  req.mutable_attempt()->set_run_id(run.id());
  req.mutable_attempt()->set_status(v1::RUN_STATUS_QUEUED);
  v1::RecordAttemptResponse resp;
  CHECK(absl::IsPermissionDenied(f.reports.RecordAttempt(f.admin, req, &resp)));
  v1::ReportProgressRequest progress;
  progress.set_run_id(run.id());
  v1::ReportProgressResponse presp;
  CHECK(absl::IsPermissionDenied(f.reports.ReportProgress(f.alice, progress, &presp)));
}

TEST_CASE("describe shows attempts, events, interruptions and goodput") {
  Fixture f;
  v1::Run run = f.Submit(f.alice, "r");
  v1::UpdateRunRequest retry;  // allow one retry through the spec
  f.Record(run, 0, v1::RUN_STATUS_QUEUED);
  f.clock->Advance(absl::Seconds(10));
  f.Record(run, 0, v1::RUN_STATUS_STARTING);
  f.Record(run, 0, v1::RUN_STATUS_RUNNING);
  f.clock->Advance(absl::Seconds(100));
  v1::Run failed = f.Record(run, 0, v1::RUN_STATUS_FAILED, v1::ATTEMPT_END_REASON_NODE_FAILURE);
  CHECK(failed.status() == v1::RUN_STATUS_FAILED);  // retries are off by default

  v1::DescribeRunRequest req;
  req.set_name(run.name());
  v1::DescribeRunResponse resp;
  REQUIRE(f.manager.DescribeRun(f.alice, req, &resp).ok());
  const auto& d = resp.description();
  REQUIRE(d.attempts_size() == 1);
  CHECK(d.attempts(0).end_reason() == v1::ATTEMPT_END_REASON_NODE_FAILURE);
  REQUIRE(d.interruptions_size() == 1);
  CHECK(d.interruptions(0).seconds_lost() == 100);
  CHECK(d.run().pending_seconds() == 10);
  CHECK(d.goodput() == 0);
  std::vector<std::string> messages;
  for (const auto& e : d.events()) messages.push_back(e.message());
  CHECK(messages == std::vector<std::string>{
                        "Run created", "Run queued", "Run placed on ", "Run started",
                        "Run was stopped due to node failure",
                        "Run failed: a system failure and retry_on_system_failure is off"});
}

TEST_CASE("update, restart and clone") {
  Fixture f;
  v1::Run run = f.Submit(f.alice, "r");
  v1::UpdateRunRequest up;
  up.set_name(run.name());
  up.set_max_duration_hours(2);
  v1::UpdateRunResponse upr;
  REQUIRE(f.manager.UpdateRun(f.alice, up, &upr).ok());
  CHECK(upr.run().spec().scheduling().max_duration_hours() == 2);
  up.set_max_duration_hours(-1);
  CHECK(absl::IsInvalidArgument(f.manager.UpdateRun(f.alice, up, &upr)));

  v1::RestartRunRequest restart;
  restart.set_name(run.name());
  v1::RestartRunResponse rr;
  CHECK(absl::IsFailedPrecondition(f.manager.RestartRun(f.alice, restart, &rr)));
  v1::StopRunRequest stop;
  stop.set_name(run.name());
  v1::StopRunResponse sr;
  REQUIRE(f.manager.StopRun(f.alice, stop, &sr).ok());
  REQUIRE(f.manager.RestartRun(f.alice, restart, &rr).ok());
  CHECK(rr.run().status() == v1::RUN_STATUS_PENDING);

  v1::CloneRunRequest clone;
  clone.set_name(run.name());
  clone.set_new_name("copy");
  v1::CloneRunResponse cr;
  REQUIRE(f.manager.CloneRun(f.alice, clone, &cr).ok());
  CHECK(cr.run().name().rfind("copy-", 0) == 0);
  CHECK(cr.run().spec().scheduling().max_duration_hours() == 2);
}

TEST_CASE("max_duration stops a run that runs too long, exactly at the limit") {
  Fixture f;
  v1::Run run = f.Submit(f.alice, "r");
  v1::UpdateRunRequest up;
  up.set_name(run.name());
  up.set_max_duration_hours(1);
  v1::UpdateRunResponse upr;
  REQUIRE(f.manager.UpdateRun(f.alice, up, &upr).ok());
  f.Record(run, 0, v1::RUN_STATUS_QUEUED);
  f.Record(run, 0, v1::RUN_STATUS_STARTING);
  f.Record(run, 0, v1::RUN_STATUS_RUNNING);
  f.clock->Advance(absl::Minutes(59));
  CHECK(*f.upkeep.EnforceMaxDuration() == 0);
  f.clock->Advance(absl::Minutes(1));
  CHECK(*f.upkeep.EnforceMaxDuration() == 1);
  auto got = f.stores.runs->GetRun(run.name());
  CHECK(got->status() == v1::RUN_STATUS_TERMINATING);
  v1::Run stopped = f.Record(run, 0, v1::RUN_STATUS_STOPPED, v1::ATTEMPT_END_REASON_STOPPED);
  CHECK(stopped.status() == v1::RUN_STATUS_STOPPED);
  CHECK(stopped.status_reason().find("max_duration of 1 hours") != std::string::npos);
}

TEST_CASE("delete refuses active runs and removes ended ones") {
  Fixture f;
  v1::Run run = f.Submit(f.alice, "r");
  f.Record(run, 0, v1::RUN_STATUS_QUEUED);
  f.Record(run, 0, v1::RUN_STATUS_STARTING);
  v1::DeleteRunRequest del;
  del.set_name(run.name());
  v1::DeleteRunResponse dr;
  auto st = f.manager.DeleteRun(f.alice, del, &dr);
  CHECK(absl::IsFailedPrecondition(st));
  CHECK(st.message().find("mcli stop run") != std::string::npos);
  f.Record(run, 0, v1::RUN_STATUS_COMPLETED, v1::ATTEMPT_END_REASON_SUCCEEDED);
  CHECK(f.logs->deleted.empty());
  REQUIRE(f.manager.DeleteRun(f.alice, del, &dr).ok());
  CHECK(absl::IsNotFound(f.stores.runs->GetRun(run.name()).status()));
  CHECK(f.logs->deleted == std::vector<std::string>{run.id()});
}

TEST_CASE("delete removes the run even when the log service cannot be reached") {
  Fixture f;
  f.logs->result = absl::UnavailableError("log service down");
  v1::Run run = f.Submit(f.alice, "r");
  f.Record(run, 0, v1::RUN_STATUS_QUEUED);
  f.Record(run, 0, v1::RUN_STATUS_STARTING);
  f.Record(run, 0, v1::RUN_STATUS_FAILED, v1::ATTEMPT_END_REASON_USER_EXIT);
  v1::DeleteRunRequest del;
  del.set_name(run.name());
  v1::DeleteRunResponse dr;
  REQUIRE(f.manager.DeleteRun(f.alice, del, &dr).ok());
  CHECK(absl::IsNotFound(f.stores.runs->GetRun(run.name()).status()));
  CHECK(f.logs->deleted.size() == 1);
}

TEST_CASE("watch streams later changes of visible runs only") {
  Fixture f;
  f.Submit(f.alice, "before");  // not streamed: it happened before the watch
  std::vector<v1::RunChange> seen;
  int polls = 0;
  auto st = f.manager.WatchRuns(
      f.alice, {},
      [&](const v1::RunChange& c) {
        seen.push_back(c);
        return true;
      },
      [&] {
        // Make changes between polls, then stop after a few rounds.
        if (polls == 0) {
          f.Submit(f.bob, "bobs");
          f.Submit(f.alice, "after");
        }
        return ++polls > 3;
      },
      absl::ZeroDuration());
  REQUIRE(st.ok());
  REQUIRE(seen.size() == 1);
  CHECK(seen[0].run().name().rfind("after-", 0) == 0);
  CHECK(seen[0].event().message() == "Run created");
}

}  // namespace run_manager_test
}  // namespace tessera::runs

namespace tessera::runs {
namespace run_manager_test {

TEST_CASE("a spec over 1 MiB however it arrives is refused with one clear error") {
  Fixture f;
  v1::SubmitRunRequest req;
  req.mutable_spec()->set_name("huge");
  req.mutable_spec()->set_command("x");
  req.mutable_spec()->mutable_compute()->set_gpus(8);
  (*req.mutable_spec()->mutable_parameters()->mutable_fields())["blob"].set_string_value(
      std::string(1'100'000, 'p'));
  v1::SubmitRunResponse resp;
  const absl::Status st = f.manager.SubmitRun(f.alice, req, &resp);
  CHECK(absl::IsInvalidArgument(st));
  CHECK(st.message().rfind("spec: ", 0) == 0);
  CHECK(st.message().find("more than the limit of 1048576 bytes (1 MiB)") != std::string::npos);
  CHECK(f.stores.runs->ListRuns({})->empty());
}

TEST_CASE("lists carry no command, env, parameters or metadata, whatever a run holds") {
  Fixture f;
  v1::SubmitRunRequest req;
  req.mutable_spec()->set_name("p");
  req.mutable_spec()->set_command(std::string(100'000, 'c'));
  req.mutable_spec()->mutable_compute()->set_gpus(8);
  (*req.mutable_spec()->mutable_parameters()->mutable_fields())["lr"].set_number_value(0.1);
  auto* env = req.mutable_spec()->add_env_variables();
  env->set_key("BIG");
  env->set_value(std::string(100'000, 'e'));
  (*req.mutable_spec()->mutable_metadata())["note"] = std::string(100'000, 'm');
  v1::SubmitRunResponse submitted;
  REQUIRE(f.manager.SubmitRun(f.alice, req, &submitted).ok());
  v1::ListRunsRequest list;
  v1::ListRunsResponse listed;
  REQUIRE(f.manager.ListRuns(f.alice, list, &listed).ok());
  REQUIRE(listed.runs_size() == 1);
  const v1::RunSpec& spec = listed.runs(0).spec();
  CHECK(spec.command().empty());
  CHECK_FALSE(spec.has_parameters());
  CHECK(spec.env_variables().empty());
  CHECK(spec.metadata().empty());
  // What placement and a table need stays.
  CHECK(spec.compute().gpus() == 8);
  CHECK(listed.runs(0).name() == submitted.run().name());
  CHECK(listed.ByteSizeLong() < 2'000);
  // The whole run is one GetRun away.
  v1::GetRunRequest get;
  get.set_name(submitted.run().name());
  v1::GetRunResponse got;
  REQUIRE(f.manager.GetRun(f.alice, get, &got).ok());
  CHECK(got.run().spec().command().size() == 100'000);
  CHECK(got.run().spec().metadata().at("note").size() == 100'000);
}

TEST_CASE("a list's page ends at its size in bytes, and paging still gives every run once") {
  Fixture f;
  Runs small_roles =
      f.Make(RunManagerOptions{.allow_host_image = true, .max_list_reply_bytes = 1'000});
  RunManager& small = *small_roles.manager;
  std::set<std::string> submitted;
  for (int i = 0; i < 25; ++i) {
    submitted.insert(f.Submit(f.alice, "many").name());
    f.clock->Advance(absl::Seconds(1));
  }
  std::set<std::string> seen;
  v1::ListRunsRequest list;
  int pages = 0;
  do {
    v1::ListRunsResponse page;
    REQUIRE(small.ListRuns(f.alice, list, &page).ok());
    CHECK(page.runs_size() >= 1);
    // Over the bound by at most the run that crossed it.
    CHECK(page.ByteSizeLong() < 1'000 + page.runs(0).ByteSizeLong() + 100);
    for (const auto& r : page.runs()) CHECK(seen.insert(r.name()).second);
    list.set_page_token(page.next_page_token());
    ++pages;
  } while (!list.page_token().empty() && pages < 100);
  CHECK(pages > 2);
  CHECK(seen == submitted);
}

}  // namespace run_manager_test
}  // namespace tessera::runs
