// The retention of node events and health sweeps: what is older than the period goes, in
// batches, with one cutoff per pass; a period of zero keeps everything.
#include "services/common/history_retention.h"

#include <catch2/catch.hpp>

#include "base/timestamps.h"
#include "services/store/stores.h"

namespace tessera {
namespace history_retention_test {

const absl::Time kStart = absl::FromUnixSeconds(1'750'000'000);

struct History {
  std::shared_ptr<FakeClock> clock = std::make_shared<FakeClock>(kStart);
  store::Stores stores = store::MakeMemoryStores();
  std::vector<std::pair<absl::Time, int>> calls;  // cutoff and limit of each delete

  // One event a minute for `n` minutes before now.
  void AddEvents(int n) {
    for (int i = n; i > 0; --i) {
      v1::NodeEvent e;
      e.set_node_name("n1");
      e.set_type(v1::NODE_EVENT_TYPE_CORDONED);
      *e.mutable_time() = ToProtoTime(clock->Now() - absl::Minutes(i));
      REQUIRE(stores.node_events->AppendNodeEvent(e).ok());
    }
  }
  HistoryRetention Retention(absl::Duration period, int batch, int max_batches = 100) {
    return HistoryRetention(
        "node events", period, clock,
        [this](absl::Time before, int limit) {
          calls.emplace_back(before, limit);
          return stores.node_events->DeleteNodeEventsBefore(before, limit);
        },
        batch, max_batches);
  }
  size_t Left() { return stores.node_events->ListNodeEvents({}).value().size(); }
};

TEST_CASE("a retention pass removes what is older than its period, a batch at a time") {
  History h;
  h.AddEvents(10);  // 10 .. 1 minutes old
  auto retention = h.Retention(absl::Minutes(5) + absl::Seconds(30), /*batch=*/2);
  auto removed = retention.Apply();
  REQUIRE(removed.ok());
  CHECK(*removed == 5);  // 10, 9, 8, 7 and 6 minutes old
  CHECK(h.Left() == 5);
  REQUIRE(h.calls.size() == 3);  // 2 + 2 + 1: the short batch ends the pass
  for (const auto& [before, limit] : h.calls) {
    CHECK(before == kStart - absl::Minutes(5) - absl::Seconds(30));
    CHECK(limit == 2);
  }
  // Time passes: what aged since goes at the next pass.
  h.clock->Advance(absl::Minutes(2));
  removed = retention.Apply();
  REQUIRE(removed.ok());
  CHECK(*removed == 2);
  CHECK(h.Left() == 3);
}

TEST_CASE("a retention pass stops after its budget of batches and the next goes on") {
  History h;
  h.AddEvents(10);
  auto retention = h.Retention(absl::Seconds(1), /*batch=*/3, /*max_batches=*/2);
  CHECK(retention.Apply().value() == 6);
  CHECK(h.Left() == 4);
  CHECK(retention.Apply().value() == 4);
  CHECK(h.Left() == 0);
}

TEST_CASE("a retention of zero keeps everything and does not touch the store") {
  History h;
  h.AddEvents(3);
  auto retention = h.Retention(absl::ZeroDuration(), 2);
  CHECK(retention.Apply().value() == 0);
  CHECK(h.calls.empty());
  CHECK(h.Left() == 3);
}

TEST_CASE("a retention pass reports the store's failure") {
  History h;
  HistoryRetention retention("health sweeps", absl::Hours(1), h.clock,
                             [](absl::Time, int) -> absl::StatusOr<int64_t> {
                               return absl::UnavailableError("database away");
                             });
  auto removed = retention.Apply();
  CHECK(absl::IsUnavailable(removed.status()));
}

}  // namespace history_retention_test
}  // namespace tessera
