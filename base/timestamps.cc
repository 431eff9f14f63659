#include "base/timestamps.h"

namespace tessera {

google::protobuf::Timestamp ToProtoTime(absl::Time t) {
  google::protobuf::Timestamp ts;
  const int64_t micros = absl::ToUnixMicros(t);
  int64_t seconds = micros / 1'000'000;
  int64_t rem = micros % 1'000'000;
  if (rem < 0) {
    rem += 1'000'000;
    --seconds;
  }
  ts.set_seconds(seconds);
  ts.set_nanos(static_cast<int32_t>(rem * 1000));
  return ts;
}

absl::Time FromProtoTime(const google::protobuf::Timestamp& ts) {
  return absl::FromUnixSeconds(ts.seconds()) + absl::Nanoseconds(ts.nanos());
}

}  // namespace tessera
