// The small version of bench/control_plane: 200 simulated nodes for 60 s against tessera-server
// and PostgreSQL, runs submitted throughout and two nodes killed. What users rely on at any
// scale: no live node is declared lost, every run starts and finishes, every line pushed is
// read back once, and a killed node is declared lost within the lease. And the retention of
// finished runs, through the real processes.
#include <catch2/catch.hpp>

#include "absl/strings/str_join.h"
#include "tests/support/scale_harness.h"

namespace tessera::testing {
namespace control_plane_scale_test {

TEST_CASE("200 simulated nodes for a minute: nothing falsely lost, every run and line kept") {
  ScaleOptions o;
  o.nodes = 200;
  o.measure = absl::Seconds(60);
  o.submit_rate = 3;
  o.kill_nodes = 2;
  o.fleet.channels = 8;
  o.fleet.attempt_duration = absl::Seconds(3);
  auto r = RunScale(o);
  REQUIRE(r.ok());
  INFO(FormatScaleReport(*r));
  CHECK(r->falsely_lost.empty());
  INFO("falsely lost: " << absl::StrJoin(r->falsely_lost, ", "));
  CHECK(r->runs_submitted == 180);
  CHECK(r->not_started.empty());
  CHECK(r->not_finished.empty());
  CHECK(r->attempts_finished == r->attempts_started);
  CHECK(r->attempts_started >= r->runs_submitted);
  CHECK(r->log_push_failures == 0);
  CHECK(r->log_mismatches.empty());
  INFO("log mismatches: " << absl::StrJoin(r->log_mismatches, "; "));
  CHECK(r->lines_read == r->lines_pushed);
  CHECK(r->lines_pushed > 0);
  REQUIRE(r->lost_after_ms.size() == 2);
  // The lease is 2.8 s and the cycle runs at its end; a loaded machine adds a little.
  for (double ms : r->lost_after_ms) CHECK(ms < 4500);
  INFO("streams dropped: " << absl::StrJoin(r->drop_reasons, "; "));
  CHECK(r->streams_dropped == 0);
}

TEST_CASE("the retention deletes ended runs with their logs while new runs go on") {
  ScaleOptions o;
  o.nodes = 10;
  o.measure = absl::Seconds(24);
  o.submit_rate = 1;
  o.kill_nodes = 0;
  o.fleet.channels = 2;
  o.fleet.attempt_duration = absl::Seconds(2);
  o.check_logs_of = -1;  // the retention deletes them
  o.database_size_every = absl::Seconds(4);
  // About 3.5 s, checked every second: a run goes some 7 s after it was submitted.
  o.server_flags = {"--run-retention-days", "0.00004"};
  auto r = RunScale(o);
  REQUIRE(r.ok());
  INFO(FormatScaleReport(*r));
  CHECK(r->runs_submitted == 24);
  CHECK(r->not_started.empty());
  CHECK(r->not_finished.empty());
  CHECK(r->lines_pushed > 0);
  REQUIRE(r->database_samples.size() >= 6);
  for (const auto& s : r->database_samples) CHECK(s.orphan_log_chunks == 0);
  // The runs of the last seconds are kept with their logs; the earlier ones are gone.
  const auto& last = r->database_samples.back();
  CHECK(last.runs > 0);
  CHECK(last.runs <= 16);
  CHECK(last.log_chunks > 0);
}

}  // namespace control_plane_scale_test
}  // namespace tessera::testing
