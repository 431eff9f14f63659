// The log handler: ingest, acks, dedup, validation, auth, and every GetLogs filter.
#include "proto/policy/packed_log_lines.h"
#include "tests/unit/logs/log_test_fixture.h"

namespace tessera::logs::testing {
namespace log_handler_test {

double Value(metrics::Registry& registry, const std::string& name) {
  for (const auto& family : registry.Collect()) {
    if (family.name == name && !family.metrics.empty()) return family.metrics[0].value;
  }
  return -1;
}

TEST_CASE("push stores a batch, acks its watermarks, and does not store a resent batch twice") {
  Fixture f;
  f.AddRun("r", v1::RUN_STATUS_RUNNING);
  auto ack =
      f.Push({f.Line(0, kOut, 0, 1, "a"), f.Line(0, kOut, 1, 2, "b"), f.Line(1, kErr, 0, 3, "c")},
             "batch-1");
  REQUIRE(ack.ok());
  CHECK(ack->idempotency_key() == "batch-1");
  REQUIRE(ack->watermarks_size() == 2);
  CHECK(ack->watermarks(0).run_id() == "id-r");
  CHECK(ack->watermarks(0).rank() == 0);
  CHECK(ack->watermarks(0).stream() == kOut);
  CHECK(ack->watermarks(0).durable_sequence() == 1);
  CHECK(ack->watermarks(1).rank() == 1);
  CHECK(ack->watermarks(1).stream() == kErr);
  CHECK(ack->watermarks(1).durable_sequence() == 0);

  auto again =
      f.Push({f.Line(0, kOut, 0, 1, "a"), f.Line(0, kOut, 1, 2, "b"), f.Line(1, kErr, 0, 3, "c")},
             "batch-1");
  REQUIRE(again.ok());
  CHECK(again->watermarks(0).durable_sequence() == 1);
  CHECK(f.Texts(Req()) == Texts{"a", "b", "c"});
  CHECK(Value(f.registry, "tessera_logs_lines_ingested_total") == 3);
  CHECK(Value(f.registry, "tessera_logs_duplicate_lines_total") == 3);
  CHECK(Value(f.registry, "tessera_logs_batches_total") == 2);
  CHECK(Value(f.registry, "tessera_logs_bytes_ingested_total") == 6);

  // The batch's node name fills lines that have none.
  auto stored = f.stores.logs->ReadLogs({.run_id = "id-r"});
  REQUIRE(stored.ok());
  CHECK((*stored)[0].node_name() == "node-x");
}

TEST_CASE("a node key's batch: its attempts' lines stored, another node's acked and not stored") {
  Fixture f;
  auto mine = f.AddRun("r", v1::RUN_STATUS_RUNNING);
  mine.mutable_attempts(0)->add_nodes()->set_node_name("node-a");
  f.runs->Set(mine);
  auto theirs = f.AddRun("s", v1::RUN_STATUS_RUNNING);
  theirs.mutable_attempts(0)->add_nodes()->set_node_name("node-b");
  f.runs->Set(theirs);
  const auth::Principal node_a{"node-a", v1::ROLE_NODE, "node-a"};
  // Runs of lines of each attempt, alternating, as a worker that follows both would send them.
  auto ack = f.Push({f.Line(0, kOut, 0, 1, "a0"), f.Line(0, kOut, 0, 2, "forged0", 0, "s"),
                     f.Line(0, kOut, 1, 3, "a1"), f.Line(0, kOut, 1, 4, "forged1", 0, "s"),
                     f.Line(0, kOut, 2, 5, "a2")},
                    "mixed", &node_a);
  REQUIRE(ack.ok());
  CHECK(ack->idempotency_key() == "mixed");
  // A watermark for the refused lines too, so that the worker moves past them.
  std::map<std::string, int64_t> durable;
  for (const auto& w : ack->watermarks()) {
    durable[w.run_id()] = std::max(durable[w.run_id()], w.durable_sequence());
  }
  CHECK(durable == std::map<std::string, int64_t>{{"id-r", 2}, {"id-s", 1}});
  CHECK(f.Texts(Req()) == Texts{"a0", "a1", "a2"});
  auto stored = f.stores.logs->ReadLogs({.run_id = "id-r"});
  REQUIRE(stored.ok());
  REQUIRE(stored->size() == 3);
  CHECK((*stored)[2].node_name() == "node-a");
  CHECK(f.stores.logs->ReadLogs({.run_id = "id-s"})->empty());
  CHECK(Value(f.registry, "tessera_logs_lines_ingested_total") == 3);
  CHECK(Value(f.registry, "tessera_logs_lines_refused_total") == 2);
}

TEST_CASE("push is for system keys, a malformed batch is INVALID_ARGUMENT naming the field") {
  Fixture f;
  v1::LogBatch batch;
  *batch.add_lines() = f.Line(0, kOut, 0, 1, "a");
  v1::LogAck ack;
  CHECK(absl::IsPermissionDenied(f.handler.PushBatch(f.alice, batch, &ack)));
  CHECK(absl::IsPermissionDenied(f.handler.PushBatch(f.admin, batch, &ack)));

  auto expect = [&](const v1::LogLine& line, const std::string& field) {
    auto st = f.Push({f.Line(0, kOut, 0, 1, "ok"), line}).status();
    INFO(st.ToString());
    CHECK(absl::IsInvalidArgument(st));
    CHECK(st.message().find("lines[1]." + field) != std::string::npos);
  };
  v1::LogLine l = f.Line(0, kOut, 0, 1, "x");
  l.clear_run_id();
  expect(l, "run_id");
  l = f.Line(0, kOut, -1, 1, "x");
  expect(l, "sequence");
  l = f.Line(0, v1::LOG_STREAM_UNSPECIFIED, 0, 1, "x");
  expect(l, "stream");
  l = f.Line(0, static_cast<v1::LogStream>(7), 0, 1, "x");
  expect(l, "stream");
  l = f.Line(-1, kOut, 0, 1, "x");
  expect(l, "rank");
  l = f.Line(0, kOut, 0, 1, "x", -2);
  expect(l, "resumption_index");
  // Nothing of a rejected batch is stored.
  CHECK(f.stores.logs->ReadLogs({.run_id = "id-r"})->empty());
}

TEST_CASE("packed lines are stored and checked as plain ones, and every ack says they are taken") {
  Fixture f;
  auto mine = f.AddRun("r", v1::RUN_STATUS_RUNNING);
  mine.mutable_attempts(0)->add_nodes()->set_node_name("node-a");
  f.runs->Set(mine);
  auto theirs = f.AddRun("s", v1::RUN_STATUS_RUNNING);
  theirs.mutable_attempts(0)->add_nodes()->set_node_name("node-b");
  f.runs->Set(theirs);
  const auth::Principal node_a{"node-a", v1::ROLE_NODE, "node-a"};
  // A plain batch first (a worker's first batches go before any ack).
  auto first = f.Push({f.Line(0, kOut, 0, 1, "a0")}, "plain", &node_a);
  REQUIRE(first.ok());
  CHECK(first->accepts_packed());

  v1::LogBatch batch;
  batch.set_idempotency_key("packed");
  batch.set_node_name("node-a");
  *batch.add_packed() = Fixture::Packed({f.Line(0, kOut, 1, 2, "a1"), f.Line(0, kOut, 2, 3, "a2")});
  *batch.add_packed() = Fixture::Packed({f.Line(0, kOut, 0, 2, "forged0", 0, "s")});
  *batch.add_packed() = Fixture::Packed({f.Line(1, kErr, 0, 4, "e0")});
  v1::LogAck ack;
  REQUIRE(f.handler.PushBatch(node_a, batch, &ack).ok());
  CHECK(ack.accepts_packed());
  std::map<std::pair<std::string, int>, int64_t> durable;
  for (const auto& w : ack.watermarks()) durable[{w.run_id(), w.rank()}] = w.durable_sequence();
  CHECK(durable == std::map<std::pair<std::string, int>, int64_t>{
                       {{"id-r", 0}, 2}, {{"id-r", 1}, 0}, {{"id-s", 0}, 0}});
  CHECK(f.Texts(Req()) == Texts{"a0", "a1", "a2", "e0"});
  auto stored = f.stores.logs->ReadLogs({.run_id = "id-r"});
  REQUIRE(stored.ok());
  REQUIRE(stored->size() == 4);
  const v1::LogLine& a2 = (*stored)[2];
  CHECK(a2.node_name() == "node-a");  // the batch's, as for plain lines without one
  CHECK(a2.node_rank() == 0);
  CHECK(a2.sequence() == 2);
  CHECK(a2.time().seconds() == 1'700'000'000);
  CHECK(a2.time().nanos() == 3'000'000);
  CHECK(f.stores.logs->ReadLogs({.run_id = "id-s"})->empty());
  CHECK(Value(f.registry, "tessera_logs_lines_refused_total") == 1);
  // Resent packed: not stored twice.
  REQUIRE(f.handler.PushBatch(node_a, batch, &ack).ok());
  CHECK(f.Texts(Req()) == Texts{"a0", "a1", "a2", "e0"});
}

TEST_CASE("a malformed packed group is INVALID_ARGUMENT naming it, and nothing is stored") {
  Fixture f;
  f.AddRun("r", v1::RUN_STATUS_RUNNING);
  const auto expect = [&](const v1::PackedLogLines& bad, const std::string& field) {
    v1::LogBatch batch;
    batch.set_idempotency_key("k");
    *batch.add_packed() = Fixture::Packed({f.Line(0, kOut, 0, 1, "ok")});
    *batch.add_packed() = bad;
    v1::LogAck ack;
    const absl::Status st = f.handler.PushBatch(f.worker, batch, &ack);
    INFO(st.ToString());
    CHECK(absl::IsInvalidArgument(st));
    CHECK(st.message().find("packed[1]." + field) != std::string::npos);
  };
  v1::PackedLogLines g = Fixture::Packed({f.Line(1, kOut, 0, 1, "x")});
  g.mutable_lines()->pop_back();  // the text one byte short of its length
  expect(g, "lines");
  g = Fixture::Packed({f.Line(1, kOut, -3, 1, "x")});
  expect(g, "lines");
  g = Fixture::Packed({f.Line(1, kOut, 0, 1, "x")});
  g.clear_run_id();
  expect(g, "run_id");
  g = Fixture::Packed({f.Line(1, v1::LOG_STREAM_UNSPECIFIED, 0, 1, "x")});
  expect(g, "stream");
  CHECK(f.stores.logs->ReadLogs({.run_id = "id-r"})->empty());
}

TEST_CASE("get orders by time, ties by rank, stream and sequence, filters by rank and node rank") {
  Fixture f;
  f.AddRun("r", v1::RUN_STATUS_RUNNING);
  REQUIRE(f.Push({f.Line(3, kOut, 0, 5, "r3-a"), f.Line(0, kErr, 0, 5, "r0-err"),
                  f.Line(0, kOut, 0, 5, "r0-out"), f.Line(2, kOut, 0, 1, "r2-a"),
                  f.Line(0, kOut, 1, 9, "r0-out2"), f.Line(1, kOut, 0, 7, "r1-a")})
              .ok());
  CHECK(f.Texts(Req()) == Texts{"r2-a", "r0-out", "r0-err", "r3-a", "r1-a", "r0-out2"});
  auto by_rank = Req();
  by_rank.set_rank(0);
  CHECK(f.Texts(by_rank) == Texts{"r0-out", "r0-err", "r0-out2"});
  auto by_node = Req();
  by_node.set_node_rank(1);  // ranks 2 and 3
  CHECK(f.Texts(by_node) == Texts{"r2-a", "r3-a"});
  auto both = Req();
  both.set_node_rank(0);
  both.set_rank(1);
  CHECK(f.Texts(both) == Texts{"r1-a"});
}

TEST_CASE("get reads the latest attempt by default, the one before with previous, or any") {
  Fixture f;
  f.AddRun("r", v1::RUN_STATUS_RUNNING, 2);
  for (int i = 0; i <= 2; ++i) {
    REQUIRE(f.Push({f.Line(0, kOut, 0, 1, "attempt " + std::to_string(i), i)}).ok());
  }
  CHECK(f.Texts(Req()) == Texts{"attempt 2"});
  auto prev = Req();
  prev.set_previous(true);
  CHECK(f.Texts(prev) == Texts{"attempt 1"});
  auto first = Req();
  first.set_resumption_index(0);
  CHECK(f.Texts(first) == Texts{"attempt 0"});

  Texts out;
  auto beyond = Req();
  beyond.set_resumption_index(3);
  auto st = f.Get(beyond, &out);
  CHECK(absl::IsNotFound(st));
  CHECK(st.message().find("no attempt 3") != std::string::npos);
  auto both = prev;
  both.set_resumption_index(0);
  CHECK(absl::IsInvalidArgument(f.Get(both, &out)));

  f.AddRun("fresh", v1::RUN_STATUS_RUNNING, 0);
  auto no_prev = Req("fresh");
  no_prev.set_previous(true);
  st = f.Get(no_prev, &out);
  CHECK(absl::IsFailedPrecondition(st));
  CHECK(st.message().find("no attempt before") != std::string::npos);
}

TEST_CASE("a failed run shows its first failed rank by default, a rank filter overrides it") {
  Fixture f;
  auto d = f.AddRun("r", v1::RUN_STATUS_FAILED, 1);
  d.mutable_attempts(1)->set_first_failed_rank(2);
  d.mutable_attempts(1)->set_first_failed_node("node-1");
  f.runs->Set(d);
  REQUIRE(f.Push({f.Line(0, kOut, 0, 1, "r0", 1), f.Line(2, kErr, 0, 2, "r2 boom", 1),
                  f.Line(3, kOut, 0, 3, "r3", 1), f.Line(2, kOut, 0, 1, "old r2", 0)})
              .ok());
  CHECK(f.Texts(Req()) == Texts{"r2 boom"});
  auto rank0 = Req();
  rank0.set_rank(0);
  CHECK(f.Texts(rank0) == Texts{"r0"});
  auto node1 = Req();
  node1.set_node_rank(1);
  CHECK(f.Texts(node1) == Texts{"r2 boom", "r3"});
  // The attempt before ended without a failed rank: all of it.
  auto prev = Req();
  prev.set_previous(true);
  CHECK(f.Texts(prev) == Texts{"old r2"});
  Texts out;
  prev.set_failed(true);
  CHECK(absl::IsFailedPrecondition(f.Get(prev, &out)));
  auto with_rank = Req();
  with_rank.set_failed(true);
  with_rank.set_rank(1);
  CHECK(absl::IsInvalidArgument(f.Get(with_rank, &out)));

  // `failed` on a run that is still running: the first rank that exited non-zero.
  auto running = f.AddRun("s", v1::RUN_STATUS_RUNNING);
  auto* exit = running.mutable_attempts(0)->add_rank_exits();
  exit->set_rank(1);
  exit->set_exit_code(3);
  f.runs->Set(running);
  REQUIRE(f.Push({f.Line(0, kOut, 0, 1, "s0", 0, "s"), f.Line(1, kOut, 0, 1, "s1", 0, "s")}).ok());
  auto failed = Req("s");
  CHECK(f.Texts(failed) == Texts{"s0", "s1"});
  failed.set_failed(true);
  CHECK(f.Texts(failed) == Texts{"s1"});
}

TEST_CASE("tail shows the last lines, pages join up across many streams") {
  Fixture f;
  f.AddRun("r", v1::RUN_STATUS_COMPLETED);
  std::vector<v1::LogLine> lines;
  Texts all;
  for (int i = 0; i < 5000; ++i) {
    lines.push_back(f.Line(i % 3, kOut, i / 3, i, "l" + std::to_string(i)));
    all.push_back("l" + std::to_string(i));
  }
  REQUIRE(f.Push(lines).ok());
  CHECK(f.Texts(Req()) == all);  // more than a page per stream
  auto tail = Req();
  tail.set_tail(3);
  CHECK(f.Texts(tail) == Texts{"l4997", "l4998", "l4999"});
  tail.set_rank(0);
  tail.set_tail(2);
  CHECK(f.Texts(tail) == Texts{"l4995", "l4998"});
  Texts out;
  auto negative = Req();
  negative.set_tail(-1);
  CHECK(absl::IsInvalidArgument(f.Get(negative, &out)));
}

TEST_CASE("other users' runs are not found, admins and system keys read every run") {
  Fixture f;
  f.AddRun("r", v1::RUN_STATUS_RUNNING);
  REQUIRE(f.Push({f.Line(0, kOut, 0, 1, "secret")}).ok());
  Texts out;
  auto st = f.Get(Req(), &out, &f.bob);
  CHECK(absl::IsNotFound(st));
  CHECK(st.message() == "run r not found");
  CHECK(out.empty());
  CHECK(f.Get(Req(), &out, &f.admin).ok());
  CHECK(f.Get(Req(), &out, &f.worker).ok());
  CHECK(out == Texts{"secret", "secret"});
  CHECK(absl::IsNotFound(f.Get(Req("nope"), &out)));
  CHECK(absl::IsInvalidArgument(f.Get(Req(""), &out)));
}

TEST_CASE("delete-run-logs is for admins and system keys and may be repeated") {
  Fixture f;
  f.AddRun("r", v1::RUN_STATUS_COMPLETED);
  REQUIRE(f.Push({f.Line(0, kOut, 0, 1, "a")}).ok());
  v1::DeleteRunLogsRequest req;
  req.set_run_id("id-r");
  v1::DeleteRunLogsResponse resp;
  CHECK(absl::IsPermissionDenied(f.handler.DeleteRunLogs(f.alice, req, &resp)));
  CHECK(f.Texts(Req()) == Texts{"a"});
  REQUIRE(f.handler.DeleteRunLogs(f.worker, req, &resp).ok());
  REQUIRE(f.handler.DeleteRunLogs(f.admin, req, &resp).ok());
  CHECK(f.Texts(Req()).empty());
  CHECK(absl::IsInvalidArgument(f.handler.DeleteRunLogs(f.admin, {}, &resp)));
}

}  // namespace log_handler_test
}  // namespace tessera::logs::testing
