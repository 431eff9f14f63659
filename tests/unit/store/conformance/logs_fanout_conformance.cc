// The log store's fan-out (log_fanout.h): a follower is handed its attempt's lines as this handle
// commits them, exactly as a read returns them; lines another handle commits are either handed
// over too or announced as a reason to read. Never silently missed.
#include <algorithm>
#include <atomic>
#include <functional>

#include "proto/policy/packed_log_lines.h"
#include "tests/unit/store/conformance/conformance.h"

namespace tessera::store::conformance {
namespace logs_fanout_conformance {

v1::LogLine FanoutLine(const std::string& run, int resumption, int rank, int64_t seq,
                       int64_t nanos) {
  v1::LogLine l;
  l.set_run_id(run);
  l.set_resumption_index(resumption);
  l.set_rank(rank);
  l.set_node_rank(rank);
  l.set_node_name("node-" + std::to_string(rank));
  l.set_stream(v1::LOG_STREAM_STDOUT);
  l.set_sequence(seq);
  *l.mutable_time() = ToProtoTime(T(0) + absl::Nanoseconds(nanos));
  l.set_text("line " + std::to_string(seq));
  return l;
}

// Waits (up to 10 s) until `done`, waking with the feed's changes.
bool AwaitChange(ChangeFeed& feed, const std::function<bool()>& done) {
  SystemClock clock;
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (!done()) {
    if (absl::Now() > give_up) return false;
    feed.WaitForChange(ChangeTopic::kLogs, feed.Generation(ChangeTopic::kLogs),
                       absl::Milliseconds(50), clock);
  }
  return true;
}

// Until the feed listens: its first commits notify nobody yet.
void AwaitLive(ChangeFeed& feed) {
  REQUIRE(AwaitChange(feed, [&] { return feed.live(); }));
}

CONFORMANCE_CASE(
    "logs fan-out: a follower is handed its attempt's commits as a read returns them") {
  Stores s = FreshStores();
  AwaitLive(*s.changes);
  auto sub = s.logs->SubscribeLogs("r1", 0);
  sub->Take();  // from here on
  const uint64_t foreign = s.changes->ForeignGeneration(ChangeTopic::kLogs);
  const uint64_t seen = s.changes->Generation(ChangeTopic::kLogs);
  REQUIRE(s.logs
              ->AppendLogs({FanoutLine("r1", 0, 0, 0, 1'234'567), FanoutLine("r1", 1, 0, 0, 0),
                            FanoutLine("r2", 0, 0, 0, 0), FanoutLine("r1", 0, 1, 0, 2'000)})
              .ok());
  // This handle's own commit, once its notification is back, is not news from elsewhere.
  REQUIRE(AwaitChange(*s.changes,
                      [&] { return s.changes->Generation(ChangeTopic::kLogs) >= seen + 2; }));
  CHECK(s.changes->ForeignGeneration(ChangeTopic::kLogs) == foreign);

  auto taken = sub->Take();
  CHECK(taken.complete);
  std::vector<v1::LogLine> handed;
  for (const auto& batch : taken.batches) {
    handed.insert(handed.end(), batch->lines.begin(), batch->lines.end());
    for (const auto& group : batch->packed) REQUIRE(UnpackLines(group, handed).ok());
  }
  LogQuery q;
  q.run_id = "r1";
  auto read = s.logs->ReadLogs(q);
  REQUIRE(read.ok());
  // Handed over in the order published, read in time order.
  std::sort(handed.begin(), handed.end(), LogLineBefore);
  REQUIRE(handed.size() == 2);
  REQUIRE(read->size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    INFO(i);
    CHECK(handed[i].DebugString() == (*read)[i].DebugString());
  }
}

CONFORMANCE_CASE(
    "logs fan-out: another handle's commit is handed over or makes the follower read") {
  Stores s = FreshStores();
  Stores other = SameDatabaseStores();  // as another log service writes
  AwaitLive(*s.changes);
  auto sub = s.logs->SubscribeLogs("r1", 0);
  sub->Take();
  REQUIRE(other.logs->AppendLogs({FanoutLine("r1", 0, 0, 0, 0)}).ok());
  bool handed = false, told_to_read = false;
  REQUIRE(AwaitChange(*s.changes, [&] {
    auto taken = sub->Take();
    handed = handed || !taken.batches.empty();
    told_to_read = told_to_read || !taken.complete;
    return handed || told_to_read;
  }));
  if (handed) {
    CHECK(sub->Take().complete);
  }
}

CONFORMANCE_CASE("logs fan-out: a waiting follower is woken by its attempt's lines, once") {
  Stores s = FreshStores();
  AwaitLive(*s.changes);
  auto sub = s.logs->SubscribeLogs("r1", 0);
  sub->Take();
  std::atomic<int> woken{0};
  sub->WakeOnNews([&] { ++woken; });
  REQUIRE(s.logs->AppendLogs({FanoutLine("r2", 0, 0, 0, 0), FanoutLine("r1", 1, 0, 0, 0)}).ok());
  CHECK(woken.load() == 0);  // another run's, another attempt's
  REQUIRE(s.logs->AppendLogs({FanoutLine("r1", 0, 0, 0, 0)}).ok());
  CHECK(woken.load() == 1);
  REQUIRE(s.logs->AppendLogs({FanoutLine("r1", 0, 0, 1, 1)}).ok());
  CHECK(woken.load() == 1);  // once: a follower asks again at its next wait
  // Lines not taken yet: asked again, it is woken at once.
  sub->WakeOnNews([&] { ++woken; });
  CHECK(woken.load() == 2);
  sub->Take();
  sub->WakeOnNews([&] { ++woken; });
  CHECK(woken.load() == 2);
}

}  // namespace logs_fanout_conformance
}  // namespace tessera::store::conformance
