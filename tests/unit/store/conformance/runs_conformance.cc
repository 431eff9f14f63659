// Runs, attempts and run events.
#include <atomic>
#include <thread>

#include "tests/unit/store/conformance/conformance.h"

namespace tessera::store::conformance {
namespace runs_conformance {

using v1::RunStatus;

CONFORMANCE_CASE("runs: create, get by name and id, duplicates rejected") {
  Stores s = FreshStores();
  auto created = s.runs->CreateRun(MakeRun("train-a", 1), {});
  REQUIRE(created.ok());
  CHECK(created->version() == 1);

  auto by_name = s.runs->GetRun("train-a");
  REQUIRE(by_name.ok());
  CHECK(by_name->id() == "id-train-a");
  CHECK(by_name->spec().command() == "python train.py");
  CHECK(by_name->version() == 1);
  auto by_id = s.runs->GetRunById("id-train-a");
  REQUIRE(by_id.ok());
  CHECK(by_id->name() == "train-a");

  CHECK(absl::IsAlreadyExists(s.runs->CreateRun(MakeRun("train-a", 2), {}).status()));
  v1::Run same_id = MakeRun("train-b", 2);
  same_id.set_id("id-train-a");
  CHECK(absl::IsAlreadyExists(s.runs->CreateRun(same_id, {}).status()));
  CHECK(absl::IsNotFound(s.runs->GetRun("nope").status()));
  CHECK(absl::IsNotFound(s.runs->GetRunById("nope").status()));
}

CONFORMANCE_CASE("runs: lists carry summaries, created and updated alike; get the whole run") {
  Stores s = FreshStores();
  v1::Run run = MakeRun("heavy", 1, "alice");
  run.mutable_spec()->set_command(std::string(50'000, 'c'));
  auto* env = run.mutable_spec()->add_env_variables();
  env->set_key("K");
  env->set_value("v");
  (*run.mutable_spec()->mutable_parameters()->mutable_fields())["lr"].set_number_value(0.5);
  (*run.mutable_spec()->mutable_metadata())["m"] = "x";
  auto* integration = run.mutable_spec()->add_integrations();
  integration->set_integration_type("git_repo");
  (*integration->mutable_fields()->mutable_fields())["git_repo"].set_string_value("org/repo");
  run.mutable_spec()->mutable_compute()->set_gpus(4);
  REQUIRE(s.runs->CreateRun(run, {}).ok());
  const auto summarized = [](const v1::Run& r) {
    return r.spec().command().empty() && r.spec().env_variables().empty() &&
           !r.spec().has_parameters() && r.spec().metadata().empty() &&
           r.spec().integrations_size() == 1 &&
           r.spec().integrations(0).integration_type() == "git_repo" &&
           !r.spec().integrations(0).has_fields() && r.spec().compute().gpus() == 4;
  };
  auto listed = s.runs->ListRuns({});
  REQUIRE(listed.ok());
  REQUIRE(listed->size() == 1);
  CHECK(summarized(listed->front()));
  CHECK(listed->front().version() == 1);
  // An update writes the summary again.
  auto got = s.runs->GetRun("heavy");
  REQUIRE(got.ok());
  CHECK(got->spec().command().size() == 50'000);
  v1::Run changed = *got;
  changed.set_status(v1::RUN_STATUS_QUEUED);
  changed.mutable_spec()->set_command(std::string(60'000, 'd'));
  REQUIRE(s.runs->UpdateRun(changed, 1, {}).ok());
  listed = s.runs->ListRuns({});
  REQUIRE(listed.ok());
  REQUIRE(listed->size() == 1);
  CHECK(summarized(listed->front()));
  CHECK(listed->front().status() == v1::RUN_STATUS_QUEUED);
  CHECK(listed->front().version() == 2);
  CHECK(s.runs->GetRun("heavy")->spec().command().size() == 60'000);
}

CONFORMANCE_CASE("runs: list filters by glob, status, user, cluster, gpu type and time") {
  Stores s = FreshStores();
  v1::Run a = MakeRun("train-a", 10, "alice");
  v1::Run b = MakeRun("train-b", 20, "bob");
  b.set_status(v1::RUN_STATUS_RUNNING);
  v1::Run c = MakeRun("eval_c", 30, "alice");
  c.mutable_spec()->mutable_compute()->set_cluster("c2");
  c.mutable_spec()->mutable_compute()->set_gpu_type("a100");
  v1::Run d = MakeRun("train%d", 40, "carol");
  for (const auto& r : {a, b, c, d}) REQUIRE(s.runs->CreateRun(r, {}).ok());

  auto list = [&](const v1::RunFilter& f) { return ListedNames(s, f); };
  using V = std::vector<std::string>;
  v1::RunFilter f;
  CHECK(list(f) == V{"train%d", "eval_c", "train-b", "train-a"});  // newest first

  f.add_name_globs("train-*");
  CHECK(list(f) == V{"train-b", "train-a"});
  f.clear_name_globs();
  f.add_name_globs("train%?");  // % and _ are literal in globs
  CHECK(list(f) == V{"train%d"});
  f.clear_name_globs();
  f.add_name_globs("eval?c");
  f.add_name_globs("*-a");
  CHECK(list(f) == V{"eval_c", "train-a"});
  f.clear_name_globs();
  f.add_name_globs("train_*");  // '_' is not a wildcard
  CHECK(list(f).empty());
  f.clear_name_globs();

  f.add_statuses(v1::RUN_STATUS_RUNNING);
  CHECK(list(f) == V{"train-b"});
  f.add_statuses(v1::RUN_STATUS_QUEUED);
  CHECK(list(f).size() == 4);
  f.clear_statuses();

  f.set_user("alice");
  CHECK(list(f) == V{"eval_c", "train-a"});
  f.clear_user();
  f.set_cluster("c2");
  CHECK(list(f) == V{"eval_c"});
  f.clear_cluster();
  f.set_gpu_type("h100");
  CHECK(list(f) == V{"train%d", "train-b", "train-a"});
  f.clear_gpu_type();

  *f.mutable_created_before() = ToProtoTime(T(30));
  CHECK(list(f) == V{"train-b", "train-a"});  // strictly before
  *f.mutable_created_after() = ToProtoTime(T(10));
  CHECK(list(f) == V{"train-b"});  // strictly after
  f.clear_created_before();
  f.clear_created_after();

  f.set_limit(2);
  CHECK(list(f) == V{"train%d", "eval_c"});
  f.set_limit(0);
  f.set_latest(true);
  f.set_user("alice");
  CHECK(list(f) == V{"eval_c"});
}

CONFORMANCE_CASE(
    "runs: list filters by metadata, every pair matched exactly, as updates leave it") {
  Stores s = FreshStores();
  v1::Run a = MakeRun("a", 10);
  (*a.mutable_spec()->mutable_metadata())["team"] = "nlp";
  (*a.mutable_spec()->mutable_metadata())["sweep"] = "lr-1";
  v1::Run b = MakeRun("b", 20);
  (*b.mutable_spec()->mutable_metadata())["team"] = "nlp";
  (*b.mutable_spec()->mutable_metadata())["note"] = "\"quoted\" \\ and \u00e9";
  v1::Run c = MakeRun("c", 30);
  (*c.mutable_spec()->mutable_metadata())["team"] = "nlp-large";  // not a prefix match
  v1::Run d = MakeRun("d", 40);                                   // no metadata
  for (const auto& r : {a, b, c, d}) REQUIRE(s.runs->CreateRun(r, {}).ok());

  using V = std::vector<std::string>;
  auto matching = [&](std::initializer_list<std::pair<const char*, const char*>> pairs) {
    v1::RunFilter f;
    for (const auto& [k, v] : pairs) (*f.mutable_metadata())[k] = v;
    return ListedNames(s, f);
  };
  CHECK(matching({{"team", "nlp"}}) == V{"b", "a"});
  CHECK(matching({{"team", "nlp"}, {"sweep", "lr-1"}}) == V{"a"});  // every pair
  CHECK(matching({{"team", "NLP"}}).empty());                       // exactly
  CHECK(matching({{"note", "\"quoted\" \\ and \u00e9"}}) == V{"b"});
  CHECK(matching({{"team", ""}}).empty());  // an empty value matches only an empty value
  CHECK(matching({}).size() == 4);

  // An update that changes the metadata moves runs into and out of the filter's reach.
  for (const auto& [name, team] : {std::pair{"d", "nlp"}, std::pair{"a", "cv"}}) {
    auto stored = s.runs->GetRun(name);
    REQUIRE(stored.ok());
    v1::Run changed = *stored;
    (*changed.mutable_spec()->mutable_metadata())["team"] = team;
    REQUIRE(s.runs->UpdateRun(changed, stored->version(), {}).ok());
  }
  CHECK(matching({{"team", "nlp"}}) == V{"d", "b"});
}

CONFORMANCE_CASE("runs: a page cursor lists the runs after it, ties on time broken by id") {
  Stores s = FreshStores();
  // Two runs created in the same microsecond: the id orders them.
  for (const auto& [name, second] : std::vector<std::pair<std::string, int>>{
           {"r1", 10}, {"r2", 20}, {"r3a", 30}, {"r3b", 30}, {"r4", 40}}) {
    REQUIRE(s.runs->CreateRun(MakeRun(name, second), {}).ok());
  }
  auto page = [&](const v1::RunFilter& f) { return ListedNames(s, f); };
  using V = std::vector<std::string>;
  v1::RunFilter f;
  REQUIRE(page(f) == V{"r4", "r3b", "r3a", "r2", "r1"});
  f.set_limit(2);
  *f.mutable_page_after_created_at() = ToProtoTime(T(40));
  f.set_page_after_id("id-r4");
  CHECK(page(f) == V{"r3b", "r3a"});
  *f.mutable_page_after_created_at() = ToProtoTime(T(30));
  f.set_page_after_id("id-r3b");  // the same time as r3a, a later id
  CHECK(page(f) == V{"r3a", "r2"});
  f.set_page_after_id("id-r3a");
  f.set_limit(0);
  CHECK(page(f) == V{"r2", "r1"});
  // Combined with the other filters.
  f.add_statuses(v1::RUN_STATUS_RUNNING);
  CHECK(page(f).empty());
}

CONFORMANCE_CASE("runs: update is compare-and-set and commits its events with it") {
  Stores s = FreshStores();
  auto run = s.runs->CreateRun(MakeRun("r", 1),
                               {MakeRunEvent(v1::RUN_EVENT_TYPE_CREATED, "Run created", 1)});
  REQUIRE(run.ok());

  v1::Run next = *run;
  next.set_status(v1::RUN_STATUS_STARTING);
  auto updated =
      s.runs->UpdateRun(next, 1, {MakeRunEvent(v1::RUN_EVENT_TYPE_PLACED, "Run placed", 2)});
  REQUIRE(updated.ok());
  CHECK(updated->version() == 2);
  CHECK(s.runs->GetRun("r")->status() == v1::RUN_STATUS_STARTING);

  // A writer holding the old version loses, and its events are not recorded.
  v1::Run stale = *run;
  stale.set_status(v1::RUN_STATUS_FAILED);
  auto lost = s.runs->UpdateRun(stale, 1, {MakeRunEvent(v1::RUN_EVENT_TYPE_FAILED, "nope", 3)});
  CHECK(absl::IsAborted(lost.status()));
  CHECK(s.runs->GetRun("r")->status() == v1::RUN_STATUS_STARTING);
  auto events = s.runs->ListEvents(run->id());
  REQUIRE(events.ok());
  REQUIRE(events->size() == 2);
  CHECK((*events)[0].message() == "Run created");
  CHECK((*events)[1].message() == "Run placed");
  CHECK((*events)[0].id() < (*events)[1].id());

  v1::Run ghost = MakeRun("ghost", 1);
  CHECK(absl::IsNotFound(s.runs->UpdateRun(ghost, 1, {}).status()));
}

CONFORMANCE_CASE("runs: two writers never both move the same run") {
  Stores s = FreshStores();
  auto run = s.runs->CreateRun(MakeRun("contended", 1), {});
  REQUIRE(run.ok());

  // Eight schedulers race to start the same queued run from the same version: one wins.
  std::atomic<int> winners = 0, aborted = 0;
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      v1::Run mine = *run;
      mine.set_status(v1::RUN_STATUS_STARTING);
      mine.set_status_reason("placed by scheduler " + std::to_string(i));
      auto r = s.runs->UpdateRun(mine, run->version(), {});
      if (r.ok()) ++winners;
      if (absl::IsAborted(r.status())) ++aborted;
    });
  }
  for (auto& t : threads) t.join();
  CHECK(winners == 1);
  CHECK(aborted == 7);

  // Read-modify-write with retry on ABORTED never loses an increment.
  threads.clear();
  constexpr int kThreads = 4, kIncrements = 15;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&] {
      for (int n = 0; n < kIncrements;) {
        auto cur = s.runs->GetRun("contended");
        if (!cur.ok()) continue;
        v1::Run next = *cur;
        next.set_retries_used(cur->retries_used() + 1);
        if (s.runs->UpdateRun(next, cur->version(), {}).ok()) ++n;
      }
    });
  }
  for (auto& t : threads) t.join();
  auto final_run = s.runs->GetRun("contended");
  REQUIRE(final_run.ok());
  CHECK(final_run->retries_used() == kThreads * kIncrements);
  CHECK(final_run->version() == 2 + kThreads * kIncrements);
}

CONFORMANCE_CASE("runs: attempts are upserted and listed in resumption order") {
  Stores s = FreshStores();
  auto run = s.runs->CreateRun(MakeRun("r", 1), {});
  REQUIRE(run.ok());
  for (int i : {1, 0}) {
    v1::Attempt a;
    a.set_run_id(run->id());
    a.set_resumption_index(i);
    a.set_status(v1::RUN_STATUS_RUNNING);
    auto* n = a.add_nodes();
    n->set_node_name("node-" + std::to_string(i));
    n->add_gpu_indices(3);
    REQUIRE(s.runs->PutAttempt(a).ok());
  }
  v1::Attempt ended;
  ended.set_run_id(run->id());
  ended.set_resumption_index(0);
  ended.set_status(v1::RUN_STATUS_FAILED);
  ended.set_end_reason(v1::ATTEMPT_END_REASON_NODE_FAILURE);
  ended.set_reason("node-0 lost");
  REQUIRE(s.runs->PutAttempt(ended).ok());

  auto attempts = s.runs->ListAttempts(run->id());
  REQUIRE(attempts.ok());
  REQUIRE(attempts->size() == 2);
  CHECK((*attempts)[0].resumption_index() == 0);
  CHECK((*attempts)[0].end_reason() == v1::ATTEMPT_END_REASON_NODE_FAILURE);
  CHECK((*attempts)[0].reason() == "node-0 lost");
  CHECK((*attempts)[1].resumption_index() == 1);
  CHECK((*attempts)[1].nodes(0).gpu_indices(0) == 3);

  v1::Attempt orphan;
  orphan.set_run_id("missing");
  CHECK(absl::IsNotFound(s.runs->PutAttempt(orphan)));
}

CONFORMANCE_CASE("runs: events keep their order, details and paging") {
  Stores s = FreshStores();
  auto run = s.runs->CreateRun(MakeRun("r", 1), {});
  REQUIRE(run.ok());
  std::vector<int64_t> ids;
  for (int i = 0; i < 5; ++i) {
    v1::RunEvent e = MakeRunEvent(v1::RUN_EVENT_TYPE_UPDATED, "event " + std::to_string(i), i);
    e.set_run_id(run->id());
    e.set_resumption_index(i / 2);
    (*e.mutable_details())["n"] = std::to_string(i);
    auto stored = s.runs->AppendEvent(e);
    REQUIRE(stored.ok());
    ids.push_back(stored->id());
  }
  CHECK(std::is_sorted(ids.begin(), ids.end()));
  auto after = s.runs->ListEvents(run->id(), ids[1], 2);
  REQUIRE(after.ok());
  REQUIRE(after->size() == 2);
  CHECK((*after)[0].message() == "event 2");
  CHECK((*after)[0].details().at("n") == "2");
  CHECK((*after)[0].resumption_index() == 1);
  CHECK((*after)[1].id() == ids[3]);
  CHECK(absl::FromUnixSeconds((*after)[1].time().seconds()) == T(3));

  v1::RunEvent orphan = MakeRunEvent(v1::RUN_EVENT_TYPE_UPDATED, "x", 0);
  orphan.set_run_id("missing");
  CHECK(absl::IsNotFound(s.runs->AppendEvent(orphan).status()));
}

CONFORMANCE_CASE("runs: an update upserts attempts in its transaction; all events list globally") {
  Stores s = FreshStores();
  auto a = s.runs->CreateRun(MakeRun("a", 1),
                             {MakeRunEvent(v1::RUN_EVENT_TYPE_CREATED, "a created", 1)});
  auto b = s.runs->CreateRun(MakeRun("b", 2),
                             {MakeRunEvent(v1::RUN_EVENT_TYPE_CREATED, "b created", 2)});
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  v1::Attempt attempt;
  attempt.set_run_id(a->id());
  attempt.set_resumption_index(0);
  attempt.set_status(v1::RUN_STATUS_QUEUED);
  v1::Run next = *a;
  next.set_status(v1::RUN_STATUS_QUEUED);
  next.set_resumption_index(0);
  REQUIRE(
      s.runs
          ->UpdateRun(next, 1, {MakeRunEvent(v1::RUN_EVENT_TYPE_QUEUED, "a queued", 3)}, {attempt})
          .ok());
  // A losing compare-and-set writes no attempt either.
  v1::Attempt other = attempt;
  other.set_resumption_index(1);
  CHECK(absl::IsAborted(s.runs->UpdateRun(next, 1, {}, {other}).status()));
  auto attempts = s.runs->ListAttempts(a->id());
  REQUIRE(attempts.ok());
  REQUIRE(attempts->size() == 1);
  CHECK((*attempts)[0].status() == v1::RUN_STATUS_QUEUED);

  auto all = s.runs->ListAllEvents(0, 0);
  REQUIRE(all.ok());
  std::vector<std::string> messages;
  for (const auto& e : *all) messages.push_back(e.message());
  CHECK(messages == std::vector<std::string>{"a created", "b created", "a queued"});
  auto tail = s.runs->ListAllEvents((*all)[0].id(), 1);
  REQUIRE(tail.ok());
  REQUIRE(tail->size() == 1);
  CHECK((*tail)[0].message() == "b created");
  CHECK((*tail)[0].run_id() == b->id());
}

CONFORMANCE_CASE("runs: delete removes the run with its attempts and events") {
  Stores s = FreshStores();
  auto run = s.runs->CreateRun(MakeRun("r", 1),
                               {MakeRunEvent(v1::RUN_EVENT_TYPE_CREATED, "Run created", 1)});
  REQUIRE(run.ok());
  REQUIRE(s.runs->CreateRun(MakeRun("keep", 2), {}).ok());
  v1::Attempt a;
  a.set_run_id(run->id());
  REQUIRE(s.runs->PutAttempt(a).ok());

  // Only as it was read, when asked: a run that moved on is kept.
  CHECK(absl::IsAborted(s.runs->DeleteRun(run->id(), std::nullopt, run->version() + 1)));
  CHECK(s.runs->GetRun("r").ok());
  REQUIRE(s.runs->DeleteRun(run->id(), std::nullopt, run->version()).ok());
  CHECK(absl::IsNotFound(s.runs->GetRun("r").status()));
  CHECK(s.runs->ListAttempts(run->id())->empty());
  CHECK(s.runs->ListEvents(run->id())->empty());
  CHECK(s.runs->GetRun("keep").ok());
  CHECK(absl::IsNotFound(s.runs->DeleteRun(run->id())));
  // The name is free again.
  CHECK(s.runs->CreateRun(MakeRun("r", 3), {}).ok());
}

CONFORMANCE_CASE("runs: runs that ended before a time list earliest ended first") {
  Stores s = FreshStores();
  // A run that ended at `ended` (with a terminal status), or that is still going (0).
  auto create = [&](const std::string& name, v1::RunStatus status, int64_t ended) {
    v1::Run run = MakeRun(name, 1);
    run.set_status(status);
    if (ended > 0) *run.mutable_ended_at() = ToProtoTime(T(ended));
    auto created = s.runs->CreateRun(run, {});
    REQUIRE(created.ok());
    return *created;
  };
  create("done-30", v1::RUN_STATUS_COMPLETED, 30);
  create("failed-10", v1::RUN_STATUS_FAILED, 10);
  create("stopped-20", v1::RUN_STATUS_STOPPED, 20);
  create("late-90", v1::RUN_STATUS_COMPLETED, 90);
  create("running", v1::RUN_STATUS_RUNNING, 0);
  // Restarted after it ended: its old end time no longer counts.
  create("restarted", v1::RUN_STATUS_QUEUED, 5);
  v1::Run ends_later = create("ends-later", v1::RUN_STATUS_RUNNING, 0);

  auto names = [&](int64_t before, int limit) {
    std::vector<std::string> out;
    auto listed = s.runs->ListRunsEndedBefore(T(before), limit);
    REQUIRE(listed.ok());
    for (const auto& r : *listed) out.push_back(r.name());
    return out;
  };
  using V = std::vector<std::string>;
  CHECK(names(50, 10) == V{"failed-10", "stopped-20", "done-30"});
  CHECK(names(50, 2) == V{"failed-10", "stopped-20"});
  CHECK(names(30, 10) == V{"failed-10", "stopped-20"});  // strictly before
  CHECK(names(5, 10).empty());

  // An update that ends a run makes it listed; one that restarts it takes it out.
  ends_later.set_status(v1::RUN_STATUS_COMPLETED);
  *ends_later.mutable_ended_at() = ToProtoTime(T(15));
  auto ended = s.runs->UpdateRun(ends_later, ends_later.version(), {});
  REQUIRE(ended.ok());
  CHECK(names(50, 10) == V{"failed-10", "ends-later", "stopped-20", "done-30"});
  v1::Run restarted = *ended;
  restarted.set_status(v1::RUN_STATUS_QUEUED);
  REQUIRE(s.runs->UpdateRun(restarted, restarted.version(), {}).ok());
  CHECK(names(50, 10) == V{"failed-10", "stopped-20", "done-30"});
}

}  // namespace runs_conformance
}  // namespace tessera::store::conformance

namespace tessera::store::conformance {
namespace runs_conformance {

CONFORMANCE_CASE("runs: each user gets one uid of their own, the same every time and everywhere") {
  Stores stores = FreshStores();
  auto alice = stores.runs->UserUid("alice");
  REQUIRE(alice.ok());
  CHECK(*alice >= kFirstUserUid);
  auto bob = stores.runs->UserUid("bob");
  REQUIRE(bob.ok());
  CHECK(*bob != *alice);
  CHECK(*bob >= kFirstUserUid);
  // Asked again, and through another connection to the same database: the same uid.
  CHECK(*stores.runs->UserUid("alice") == *alice);
  Stores other = SameDatabaseStores();
  CHECK(*other.runs->UserUid("bob") == *bob);
  CHECK(stores.runs->UserUid("").status().code() == absl::StatusCode::kInvalidArgument);
}

}  // namespace runs_conformance
}  // namespace tessera::store::conformance
