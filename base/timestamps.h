#pragma once
// Conversions between absl::Time and protobuf time.

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "google/protobuf/timestamp.pb.h"

namespace tessera {

google::protobuf::Timestamp ToProtoTime(absl::Time t);
absl::Time FromProtoTime(const google::protobuf::Timestamp& ts);

}  // namespace tessera
