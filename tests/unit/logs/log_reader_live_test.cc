// A caught-up follower takes new lines from the store's fan-out instead of reading the store, and
// reads whenever the fan-out cannot vouch for having everything (a gap, a commit elsewhere).
#include "services/logs/log_reader.h"
#include "tests/unit/logs/log_test_fixture.h"

namespace tessera::logs::testing {
namespace log_reader_live_test {

std::vector<int64_t> Sequences(const std::vector<const v1::LogLine*>& lines) {
  std::vector<int64_t> out;
  for (const v1::LogLine* l : lines) out.push_back(l->sequence());
  return out;
}

// The memory store, whose commits its followers do not get handed: as lines another log service
// stored, which this process learns of only through the change feed.
class StoredElsewhere final : public store::LogStore {
 public:
  StoredElsewhere(std::shared_ptr<store::LogStore> inner, std::shared_ptr<store::ChangeFeed> feed)
      : inner_(std::move(inner)), quiet_(std::move(feed)) {}
  std::unique_ptr<store::LogSubscription> SubscribeLogs(const std::string& run_id,
                                                        int32_t resumption_index) override {
    return quiet_.Subscribe(run_id, resumption_index);
  }
  absl::StatusOr<store::LogAppendResult> AppendLogBatch(store::LogBatchToStore b) override {
    return inner_->AppendLogBatch(std::move(b));
  }
  absl::StatusOr<std::vector<v1::LogLine>> ReadLogs(const store::LogQuery& q) override {
    ++reads;
    return inner_->ReadLogs(q);
  }
  absl::StatusOr<std::vector<v1::LogLine>> TailLogs(const store::LogQuery& q, int n) override {
    return inner_->TailLogs(q, n);
  }
  absl::StatusOr<std::vector<store::LogStreamInfo>> ListLogStreams(
      const std::string& run_id, std::optional<int32_t> resumption_index) override {
    return inner_->ListLogStreams(run_id, resumption_index);
  }
  absl::StatusOr<std::map<store::LogStreamKey, int64_t>> SequencesSince(const std::string& run_id,
                                                                        int32_t resumption_index,
                                                                        absl::Time since) override {
    return inner_->SequencesSince(run_id, resumption_index, since);
  }
  absl::Status DeleteRunLogs(const std::string& run_id) override {
    return inner_->DeleteRunLogs(run_id);
  }
  absl::StatusOr<int64_t> RunLogBytes(const std::string& run_id) override {
    return inner_->RunLogBytes(run_id);
  }
  absl::StatusOr<std::vector<std::string>> ListRunsIdleSince(absl::Time before,
                                                             int limit) override {
    return inner_->ListRunsIdleSince(before, limit);
  }
  absl::Status ExpireRunLogs(const std::string& run_id, absl::Time at) override {
    return inner_->ExpireRunLogs(run_id, at);
  }
  absl::StatusOr<std::optional<absl::Time>> LogsExpiredAt(const std::string& run_id) override {
    return inner_->LogsExpiredAt(run_id);
  }
  int reads = 0;

 private:
  std::shared_ptr<store::LogStore> inner_;
  store::LogFanout quiet_;  // nobody publishes to it
};

store::LogQuery Attempt() {
  store::LogQuery q;
  q.run_id = "id-r";
  return q;
}

TEST_CASE("a caught-up follower is handed new lines without reading the store") {
  auto db = std::make_shared<store::MemoryDatabase>();
  store::Stores stores = store::MakeMemoryStores(db);
  Fixture f;
  LogReader reader(stores.logs, Attempt(), f.clock, absl::Seconds(5));
  REQUIRE(stores.logs->AppendLogs({f.Line(0, kOut, 0, 1, "a"), f.Line(0, kOut, 1, 2, "b")}).ok());
  auto first = reader.Next(/*skip_gaps=*/false);
  REQUIRE(first.ok());
  CHECK(Sequences(first->lines) == std::vector<int64_t>{0, 1});
  CHECK_FALSE(reader.served_from_fanout());

  // Rank 1's line is earlier than rank 0's: shown in time order, as a read would.
  REQUIRE(stores.logs->AppendLogs({f.Line(0, kOut, 2, 9, "c"), f.Line(1, kErr, 0, 5, "d")}).ok());
  {
    absl::MutexLock lock(&db->mu);
    db->unavailable = true;  // a read would fail now
  }
  auto live = reader.Next(false);
  REQUIRE(live.ok());
  CHECK(reader.served_from_fanout());
  REQUIRE(live->lines.size() == 2);
  CHECK(live->lines[0]->text() == "d");
  CHECK(live->lines[1]->text() == "c");
  CHECK_FALSE(live->more);
  auto idle = reader.Next(false);
  REQUIRE(idle.ok());
  CHECK(idle->lines.empty());
  CHECK(reader.served_from_fanout());
}

TEST_CASE("a gap in what the fan-out hands over is read from the store, with no line lost") {
  Fixture f;
  LogReader reader(f.stores.logs, Attempt(), f.clock, absl::Seconds(5));
  REQUIRE(f.stores.logs->AppendLogs({f.Line(0, kOut, 0, 1, "a")}).ok());
  REQUIRE(reader.Next(false).ok());
  // Line 2 is committed before line 1 (two batches stored out of order).
  REQUIRE(f.stores.logs->AppendLogs({f.Line(0, kOut, 2, 3, "c"), f.Line(1, kOut, 0, 3, "x")}).ok());
  auto gap = reader.Next(false);
  REQUIRE(gap.ok());
  CHECK(Sequences(gap->lines) == std::vector<int64_t>{0});  // rank 1's line joins up
  CHECK(gap->more);
  auto waiting = reader.Next(false);
  REQUIRE(waiting.ok());
  CHECK_FALSE(reader.served_from_fanout());
  CHECK(waiting->lines.empty());
  CHECK(waiting->waiting_on_gap);
  REQUIRE(f.stores.logs->AppendLogs({f.Line(0, kOut, 1, 2, "b")}).ok());
  auto filled = reader.Next(false);
  REQUIRE(filled.ok());
  CHECK_FALSE(reader.served_from_fanout());
  CHECK(Sequences(filled->lines) == std::vector<int64_t>{1, 2});
  CHECK(reader.Next(false).ok());
  CHECK(reader.served_from_fanout());  // caught up again
}

TEST_CASE("lines committed elsewhere are read once the change feed tells of them") {
  Fixture f;
  auto store = std::make_shared<StoredElsewhere>(f.stores.logs, f.stores.changes);
  LogReader reader(store, Attempt(), f.clock, absl::Seconds(5));
  REQUIRE(reader.Next(false).ok());
  CHECK(store->reads == 1);
  REQUIRE(store->AppendLogs({f.Line(0, kOut, 0, 1, "a")}).ok());
  // Not handed over, and no commit elsewhere known yet: nothing read, nothing shown.
  auto unseen = reader.Next(false);
  REQUIRE(unseen.ok());
  CHECK(unseen->lines.empty());
  CHECK(store->reads == 1);
  f.stores.changes->BumpForeign(store::ChangeTopic::kLogs);
  auto read = reader.Next(false);
  REQUIRE(read.ok());
  CHECK(store->reads == 2);
  CHECK(Sequences(read->lines) == std::vector<int64_t>{0});
}

TEST_CASE("a one-off read never subscribes and always reads") {
  Fixture f;
  auto store = std::make_shared<StoredElsewhere>(f.stores.logs, f.stores.changes);
  LogReader reader(store, Attempt(), f.clock, absl::Seconds(5));
  REQUIRE(store->AppendLogs({f.Line(0, kOut, 0, 1, "a")}).ok());
  REQUIRE(reader.Next(/*skip_gaps=*/true).ok());
  REQUIRE(store->AppendLogs({f.Line(0, kOut, 1, 2, "b")}).ok());
  auto page = reader.Next(true);
  REQUIRE(page.ok());
  CHECK(store->reads == 2);
  CHECK(Sequences(page->lines) == std::vector<int64_t>{1});
}

TEST_CASE("a read takes up to 16 pages in all shared out over the attempt streams") {
  Fixture f;
  auto store = std::make_shared<StoredElsewhere>(f.stores.logs, f.stores.changes);
  const auto push = [&](int ranks, int per_rank) {
    std::vector<v1::LogLine> lines;
    for (int seq = 0; seq < per_rank; ++seq) {
      for (int rank = 0; rank < ranks; ++rank) {
        lines.push_back(f.Line(rank, kOut, seq, seq * ranks + rank, "x"));
      }
    }
    REQUIRE(store->AppendLogs(std::move(lines)).ok());
  };
  SECTION("two streams: 80 lines of each (16 x 10 / 2)") {
    push(2, 100);
    LogReader reader(store, Attempt(), f.clock, absl::Seconds(5), /*page_size=*/10);
    auto page = reader.Next(/*skip_gaps=*/true);
    REQUIRE(page.ok());
    // 80 of each read; shown up to the earlier cut in display order (rank 0's line 79).
    CHECK(page->lines.size() == 159);
    CHECK(page->more);
    auto rest = reader.Next(true);
    REQUIRE(rest.ok());
    CHECK(rest->lines.size() == 41);
    CHECK(Sequences(rest->lines).front() == 79);
    CHECK(store->reads == 2);  // 200 lines in two reads (twenty at the page size alone)
  }
  SECTION("forty streams: never under a page of each") {
    push(40, 30);
    LogReader reader(store, Attempt(), f.clock, absl::Seconds(5), /*page_size=*/10);
    auto page = reader.Next(true);
    REQUIRE(page.ok());
    // 10 of each read (not 160 / 40 = 4); shown up to rank 0's line 9, the earliest cut.
    CHECK(page->lines.size() == 361);
    CHECK(page->more);
  }
}

}  // namespace log_reader_live_test
}  // namespace tessera::logs::testing
