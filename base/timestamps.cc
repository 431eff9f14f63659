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

google::protobuf::Duration ToProtoDuration(absl::Duration d) {
  google::protobuf::Duration out;
  out.set_seconds(absl::ToInt64Seconds(d));
  out.set_nanos(static_cast<int32_t>(absl::ToInt64Nanoseconds(d % absl::Seconds(1))));
  return out;
}

absl::Duration FromProtoDuration(const google::protobuf::Duration& d) {
  return absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos());
}

}  // namespace tessera
