// Protobuf times and durations: what crosses the wire comes back as it left.
#include "base/timestamps.h"

#include <catch2/catch.hpp>

namespace tessera {
namespace timestamps_test {

TEST_CASE("times and durations go to protobuf and back unchanged, to the microsecond") {
  const absl::Time t = absl::FromUnixMicros(1'765'000'000'123'456);
  CHECK(FromProtoTime(ToProtoTime(t)) == t);
  // Before 1970: protobuf wants nanos in [0, 1e9), seconds rounded down.
  const absl::Time before = absl::FromUnixMicros(-1'500'000);
  const google::protobuf::Timestamp ts = ToProtoTime(before);
  CHECK(ts.seconds() == -2);
  CHECK(ts.nanos() == 500'000'000);
  CHECK(FromProtoTime(ts) == before);

  const absl::Duration d = absl::Seconds(90) + absl::Milliseconds(250);
  const google::protobuf::Duration pd = ToProtoDuration(d);
  CHECK(pd.seconds() == 90);
  CHECK(pd.nanos() == 250'000'000);
  CHECK(FromProtoDuration(pd) == d);
  CHECK(FromProtoDuration(ToProtoDuration(absl::ZeroDuration())) == absl::ZeroDuration());
}

}  // namespace timestamps_test
}  // namespace tessera
