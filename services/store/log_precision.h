#pragma once
// A log line as the stores give it back: its time to the microsecond (PostgreSQL's timestamptz).
// The memory store keeps lines so and the fan-out hands them over so, so that a reader sees the
// same line whichever way it came.

#include "tessera/v1/logs.pb.h"

namespace tessera::store {

inline void ToStoredPrecision(v1::LogLine& line) {
  line.mutable_time()->set_nanos(line.time().nanos() / 1000 * 1000);
}

inline v1::LogLine AsStored(const v1::LogLine& line) {
  v1::LogLine out = line;
  ToStoredPrecision(out);
  return out;
}

}  // namespace tessera::store
