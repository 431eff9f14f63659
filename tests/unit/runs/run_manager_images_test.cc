// The run manager and what runs run in: the host only where the cluster allows it, each user's
// uid, the image digest pinned by the first attempt, setup failures, and integrations.
#include <catch2/catch.hpp>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "base/timestamps.h"
#include "runspec/integrations.h"
#include "runspec/spec_limits.h"
#include "services/runs/run_manager.h"
#include "tests/unit/runs/run_manager_fixture.h"

namespace tessera::runs {
namespace run_manager_images_test {

using testing::Fixture;

TEST_CASE("runs on the host are refused unless the cluster allows them") {
  Fixture f;
  Runs strict_roles = f.Make(RunManagerOptions{});
  RunManager& strict = *strict_roles.manager;
  v1::SubmitRunRequest req;
  req.mutable_spec()->set_name("bare");
  req.mutable_spec()->set_command("true");
  v1::SubmitRunResponse resp;
  auto st = strict.SubmitRun(f.alice, req, &resp);
  CHECK(absl::IsInvalidArgument(st));
  CHECK(absl::StrContains(st.message(), "image: required on this cluster"));
  req.mutable_spec()->set_image("host");
  st = strict.SubmitRun(f.alice, req, &resp);
  CHECK(absl::StrContains(st.message(), "image: 'host' runs on the nodes' own system"));
  req.mutable_spec()->set_image("mosaicml/llm-foundry:2.6.0_cu124-latest");
  CHECK(strict.SubmitRun(f.alice, req, &resp).ok());
}

TEST_CASE("each user's runs carry that user's uid, and no one else's") {
  Fixture f;
  const v1::Run a1 = f.Submit(f.alice, "one");
  const v1::Run a2 = f.Submit(f.alice, "two");
  const v1::Run b = f.Submit(f.bob, "three");
  CHECK(a1.user_uid() >= store::kFirstUserUid);
  CHECK(a1.user_uid() == a2.user_uid());
  CHECK(b.user_uid() != a1.user_uid());
}

TEST_CASE("an image's digest is pinned by the first attempt that ran it") {
  Fixture f;
  v1::Run run = f.Submit(f.alice, "pinned");
  f.Record(run, 0, v1::RUN_STATUS_QUEUED);
  f.Record(run, 0, v1::RUN_STATUS_STARTING);
  v1::RecordAttemptRequest req;
  req.mutable_attempt()->set_run_id(run.id());
  req.mutable_attempt()->set_resumption_index(0);
  req.mutable_attempt()->set_status(v1::RUN_STATUS_RUNNING);
  req.mutable_attempt()->set_image_digest("sha256:" + std::string(64, 'a'));
  v1::RecordAttemptResponse resp;
  REQUIRE(f.reports.RecordAttempt(f.system, req, &resp).ok());
  CHECK(resp.run().image_digest() == "sha256:" + std::string(64, 'a'));
  // Notes from the nodes are events, and change nothing else.
  v1::RecordAttemptRequest note;
  note.mutable_attempt()->set_run_id(run.id());
  note.mutable_attempt()->set_resumption_index(0);
  note.set_note("Pulling image docker.io/library/busybox:1 on node-a");
  REQUIRE(f.reports.RecordAttempt(f.system, note, &resp).ok());
  CHECK(resp.run().status() == v1::RUN_STATUS_RUNNING);
  v1::DescribeRunRequest d;
  d.set_name(run.name());
  v1::DescribeRunResponse described;
  REQUIRE(f.manager.DescribeRun(f.alice, d, &described).ok());
  std::vector<std::string> messages;
  for (const auto& e : described.description().events()) messages.push_back(e.message());
  CHECK(std::find(messages.begin(), messages.end(),
                  "Pulling image docker.io/library/busybox:1 on node-a") != messages.end());
  // A person may not write notes.
  CHECK(absl::IsPermissionDenied(f.reports.RecordAttempt(f.alice, note, &resp)));
}

TEST_CASE("a run whose setup failed fails for good, saying why") {
  Fixture f;
  v1::Run run = f.Submit(f.alice, "bad-image");
  f.Record(run, 0, v1::RUN_STATUS_QUEUED);
  f.Record(run, 0, v1::RUN_STATUS_STARTING);
  v1::RecordAttemptRequest req;
  req.mutable_attempt()->set_run_id(run.id());
  req.mutable_attempt()->set_resumption_index(0);
  req.mutable_attempt()->set_status(v1::RUN_STATUS_FAILED);
  req.mutable_attempt()->set_end_reason(v1::ATTEMPT_END_REASON_SETUP_FAILED);
  req.mutable_attempt()->set_reason("Image not found: docker.io/library/nope:1");
  v1::RecordAttemptResponse resp;
  REQUIRE(f.reports.RecordAttempt(f.system, req, &resp).ok());
  CHECK(resp.run().status() == v1::RUN_STATUS_FAILED);
  CHECK(resp.run().status_reason() == "Image not found: docker.io/library/nope:1");
  CHECK(resp.run().retries_used() == 0);
}

TEST_CASE("integrations Tessera does not run are recorded with a warning, bad ones refused") {
  Fixture f;
  v1::SubmitRunRequest req;
  req.mutable_spec()->set_name("with-integrations");
  req.mutable_spec()->set_command("true");
  auto* wandb = req.mutable_spec()->add_integrations();
  wandb->set_integration_type("wandb");
  (*wandb->mutable_fields()->mutable_fields())["project"].set_string_value("llms");
  v1::SubmitRunResponse resp;
  REQUIRE(f.manager.SubmitRun(f.alice, req, &resp).ok());
  v1::DescribeRunRequest d;
  d.set_name(resp.run().name());
  v1::DescribeRunResponse described;
  REQUIRE(f.manager.DescribeRun(f.alice, d, &described).ok());
  bool warned = false;
  for (const auto& e : described.description().events()) {
    warned |= absl::StrContains(e.message(), "Warning: integration wandb is recorded");
  }
  CHECK(warned);
  auto* git = req.mutable_spec()->add_integrations();
  git->set_integration_type("git_repo");
  (*git->mutable_fields()->mutable_fields())["git_branch"].set_string_value("main");
  const auto st = f.manager.SubmitRun(f.alice, req, &resp);
  CHECK(absl::IsInvalidArgument(st));
  CHECK(st.message() == "integrations[1].git_repo: required");
}

TEST_CASE("a local integration must carry its files, packed, within the working folder") {
  Fixture f;
  v1::SubmitRunRequest req;
  req.mutable_spec()->set_name("with-local-files");
  req.mutable_spec()->set_command("true");
  auto* local = req.mutable_spec()->add_integrations();
  local->set_integration_type("local");
  auto& fields = *local->mutable_fields()->mutable_fields();
  fields["path"].set_string_value("./src");
  v1::SubmitRunResponse resp;
  auto st = f.manager.SubmitRun(f.alice, req, &resp);
  CHECK(absl::IsInvalidArgument(st));
  CHECK_THAT(std::string(st.message()),
             Catch::StartsWith("integrations[0].archive: required: the files at path (./src) "
                               "were not uploaded. `mcli run -f` packs them"));
  fields["archive"].set_string_value("not base64!");
  CHECK(f.manager.SubmitRun(f.alice, req, &resp).message() ==
        "integrations[0].archive: not base64");
  fields["archive"].set_string_value(absl::Base64Escape("plain text, not gzip at all"));
  CHECK(f.manager.SubmitRun(f.alice, req, &resp).message() ==
        "integrations[0].archive: not a gzip file");
  fields["archive"].set_string_value(
      absl::Base64Escape(std::string(spec::kMaxLocalArchiveBytes + 1, '\x1f')));
  CHECK_THAT(std::string(f.manager.SubmitRun(f.alice, req, &resp).message()),
             Catch::Contains("more than the 524288 a local integration may carry"));
  // A gzip header and an empty deflate stream: the smallest gzip file there is.
  const std::string empty_gzip(
      "\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\x03\x00\x00\x00\x00\x00\x00\x00\x00\x00", 20);
  fields["archive"].set_string_value(absl::Base64Escape(empty_gzip));
  fields["target"].set_string_value("/etc");
  CHECK(f.manager.SubmitRun(f.alice, req, &resp).message() ==
        "integrations[0].target: \"/etc\" is absolute: a path in the working folder, please");
  fields["target"].set_string_value("a/../../b");
  CHECK(f.manager.SubmitRun(f.alice, req, &resp).message() ==
        "integrations[0].target: \"a/../../b\" leaves the working folder");
  fields["target"].set_string_value("code");
  REQUIRE(f.manager.SubmitRun(f.alice, req, &resp).ok());
  // The run keeps its files; lists leave them out.
  v1::GetRunRequest get;
  get.set_name(resp.run().name());
  v1::GetRunResponse got;
  REQUIRE(f.manager.GetRun(f.alice, get, &got).ok());
  CHECK(spec::IntegrationText(got.run().spec().integrations(0), "archive") ==
        absl::Base64Escape(empty_gzip));
  v1::ListRunsResponse listed;
  REQUIRE(f.manager.ListRuns(f.alice, v1::ListRunsRequest(), &listed).ok());
  REQUIRE(listed.runs_size() == 1);
  // A list names each integration's type; its fields (the archive with them) are GetRun's.
  CHECK(listed.runs(0).spec().integrations(0).integration_type() == "local");
  CHECK(spec::IntegrationText(listed.runs(0).spec().integrations(0), "archive").empty());
  CHECK(spec::IntegrationText(got.run().spec().integrations(0), "path") == "./src");
  // Run by Tessera, so no "recorded only" warning.
  v1::DescribeRunRequest d;
  d.set_name(resp.run().name());
  v1::DescribeRunResponse described;
  REQUIRE(f.manager.DescribeRun(f.alice, d, &described).ok());
  for (const auto& e : described.description().events()) {
    CHECK_FALSE(absl::StrContains(e.message(), "recorded with the run"));
  }
}

}  // namespace run_manager_images_test
}  // namespace tessera::runs
