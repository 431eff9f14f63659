// The progress history of attempts: points kept per step, thinned to buckets, gone with the run.
#include <cmath>
#include <limits>

#include "tests/unit/store/conformance/conformance.h"

namespace tessera::store::conformance {
namespace progress_conformance {

ProgressPoint Point(int32_t resumption, int64_t step, double loss = 1.5) {
  ProgressPoint p;
  p.resumption_index = resumption;
  p.step = step;
  p.time = T(step) + absl::Microseconds(123456);
  p.loss = loss;
  p.learning_rate = 3e-4;
  p.tokens_per_second = 123456.75;
  p.mfu = 0.4125;
  return p;
}

std::vector<int64_t> Steps(Stores& s, const std::string& run_id, int32_t resumption) {
  auto points = s.runs->ListProgress(run_id);
  REQUIRE(points.ok());
  std::vector<int64_t> steps;
  for (const auto& p : *points) {
    if (p.resumption_index == resumption) steps.push_back(p.step);
  }
  return steps;
}

CONFORMANCE_CASE("progress: points are kept exactly by attempt then step and one per step") {
  Stores s = FreshStores();
  REQUIRE(s.runs->CreateRun(MakeRun("r", 1), {}).ok());
  REQUIRE(s.runs->AddProgressPoint("id-r", Point(1, 10), 1, 0).ok());
  REQUIRE(s.runs->AddProgressPoint("id-r", Point(0, 20), 1, 0).ok());
  REQUIRE(s.runs->AddProgressPoint("id-r", Point(0, 5), 1, 0).ok());
  // The same step again replaces the point.
  REQUIRE(s.runs->AddProgressPoint("id-r", Point(0, 20, 0.25), 1, 0).ok());
  auto points = s.runs->ListProgress("id-r");
  REQUIRE(points.ok());
  REQUIRE(points->size() == 3);
  CHECK((*points)[0] == Point(0, 5));
  CHECK((*points)[1] == Point(0, 20, 0.25));
  CHECK((*points)[2] == Point(1, 10));
  // Training that diverged reports NaN or infinite losses: they come back as they went.
  REQUIRE(s.runs->AddProgressPoint("id-r", Point(1, 11, std::nan("")), 1, 0).ok());
  REQUIRE(
      s.runs->AddProgressPoint("id-r", Point(1, 12, std::numeric_limits<double>::infinity()), 1, 0)
          .ok());
  points = s.runs->ListProgress("id-r");
  REQUIRE(points.ok());
  REQUIRE(points->size() == 5);
  CHECK(std::isnan((*points)[3].loss));
  CHECK((*points)[4].loss == std::numeric_limits<double>::infinity());
  CHECK(s.runs->ListProgress("other")->empty());
}

CONFORMANCE_CASE("progress: thinning keeps the earliest point of each bucket before the new one") {
  Stores s = FreshStores();
  REQUIRE(s.runs->CreateRun(MakeRun("r", 1), {}).ok());
  for (int64_t step : {0, 1, 2, 3, 4, 5, 6, 7, 9, 13}) {
    REQUIRE(s.runs->AddProgressPoint("id-r", Point(0, step), 1, 0).ok());
  }
  REQUIRE(s.runs->AddProgressPoint("id-r", Point(1, 3), 1, 0).ok());  // another attempt
  // Buckets of 4 from step 0 on: 0-3 keeps 0, 4-7 keeps 4, 8-11 keeps 9, 12-15 keeps 13; the
  // new point (15) stays whatever its bucket holds.
  REQUIRE(s.runs->AddProgressPoint("id-r", Point(0, 15), 4, 0).ok());
  CHECK(Steps(s, "id-r", 0) == std::vector<int64_t>{0, 4, 9, 13, 15});
  // From thin_from on only: 15 is the second point of its bucket, 16 the first of the next.
  REQUIRE(s.runs->AddProgressPoint("id-r", Point(0, 16), 4, 15).ok());
  REQUIRE(s.runs->AddProgressPoint("id-r", Point(0, 17), 4, 16).ok());
  CHECK(Steps(s, "id-r", 0) == std::vector<int64_t>{0, 4, 9, 13, 16, 17});
  // A point before thin_from that is not the earliest of its bucket stays (its caller thinned
  // up to there): the range is the caller's.
  REQUIRE(s.runs->AddProgressPoint("id-r", Point(0, 18), 8, 17).ok());
  CHECK(Steps(s, "id-r", 0) == std::vector<int64_t>{0, 4, 9, 13, 16, 18});
  CHECK(Steps(s, "id-r", 1) == std::vector<int64_t>{3});
  CHECK(absl::IsInvalidArgument(s.runs->AddProgressPoint("id-r", Point(0, 19), 0, 0)));
}

CONFORMANCE_CASE("progress: a point of a missing run is NOT_FOUND and the points go with the run") {
  Stores s = FreshStores();
  CHECK(absl::IsNotFound(s.runs->AddProgressPoint("id-nope", Point(0, 1), 1, 0)));
  REQUIRE(s.runs->CreateRun(MakeRun("r", 1), {}).ok());
  REQUIRE(s.runs->CreateRun(MakeRun("q", 2), {}).ok());
  REQUIRE(s.runs->AddProgressPoint("id-r", Point(0, 1), 1, 0).ok());
  REQUIRE(s.runs->AddProgressPoint("id-q", Point(0, 1), 1, 0).ok());
  REQUIRE(s.runs->DeleteRun("id-r").ok());
  CHECK(s.runs->ListProgress("id-r")->empty());
  CHECK(s.runs->ListProgress("id-q")->size() == 1);
  // A run made again under the same id starts with no history.
  REQUIRE(s.runs->CreateRun(MakeRun("r", 3), {}).ok());
  CHECK(s.runs->ListProgress("id-r")->empty());
}

}  // namespace progress_conformance
}  // namespace tessera::store::conformance
