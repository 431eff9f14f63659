// The change feed: a write to runs' events, node events or logs wakes a watcher at once (the
// PostgreSQL feed hears it through LISTEN/NOTIFY, also from another process's writes).
#include "tests/unit/store/conformance/conformance.h"

namespace tessera::store::conformance {
namespace changes_conformance {

// Waits (up to 10 s) for `topic` to move past `seen`; the time it took.
absl::Duration WaitFor(ChangeFeed& feed, ChangeTopic topic, uint64_t seen) {
  const absl::Time start = absl::Now();
  SystemClock clock;
  while (feed.Generation(topic) == seen && absl::Now() - start < absl::Seconds(10)) {
    feed.WaitForChange(topic, seen, absl::Seconds(10), clock);
  }
  return absl::Now() - start;
}

CONFORMANCE_CASE("changes: each topic's writes wake its watchers, from this or another handle") {
  Stores s = FreshStores();
  Stores other = SameDatabaseStores();  // as a second process writes
  REQUIRE(s.changes != nullptr);
  for (auto& feed : {s.changes, other.changes}) {
    // The feed listens from its first use; wait until it hears a first change.
    const uint64_t g = feed->Generation(ChangeTopic::kRunEvents);
    if (!feed->live()) WaitFor(*feed, ChangeTopic::kRunEvents, g);
  }

  SECTION("run events") {
    const uint64_t seen = s.changes->Generation(ChangeTopic::kRunEvents);
    REQUIRE(other.runs->CreateRun(MakeRun("r1", 1), {}).ok());
    v1::RunEvent e = MakeRunEvent(v1::RUN_EVENT_TYPE_QUEUED, "hello", 2);
    e.set_run_id("id-r1");
    REQUIRE(other.runs->AppendEvent(e).ok());
    CHECK(WaitFor(*s.changes, ChangeTopic::kRunEvents, seen) < absl::Seconds(5));
  }
  SECTION("node events") {
    const uint64_t seen = s.changes->Generation(ChangeTopic::kNodeEvents);
    v1::NodeEvent e;
    e.set_node_name("n1");
    e.set_type(v1::NODE_EVENT_TYPE_CORDONED);
    REQUIRE(other.node_events->AppendNodeEvent(e).ok());
    CHECK(WaitFor(*s.changes, ChangeTopic::kNodeEvents, seen) < absl::Seconds(5));
  }
  SECTION("logs") {
    const uint64_t seen = s.changes->Generation(ChangeTopic::kLogs);
    v1::LogLine l;
    l.set_run_id("r1");
    l.set_stream(v1::LOG_STREAM_STDOUT);
    l.set_text("line");
    *l.mutable_time() = ToProtoTime(T(1));
    REQUIRE(other.logs->AppendLogs({l}).ok());
    CHECK(WaitFor(*s.changes, ChangeTopic::kLogs, seen) < absl::Seconds(5));
  }
  CHECK(s.changes->live());
}

}  // namespace changes_conformance
}  // namespace tessera::store::conformance
