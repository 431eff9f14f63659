#pragma once
// Times on the command line and in human output.

#include <google/protobuf/timestamp.pb.h>

#include <string>

#include "absl/time/time.h"

namespace tessera::cli {

// A point in time as --before/--after take it: RFC 3339 ("2024-05-01T12:00:00Z",
// "2024-05-01T14:00:00+02:00"), a date ("2024-05-01", midnight UTC), or an age relative to
// `now` ("90s", "30m", "2h", "1d", "1w", "1h30m"). Throws CliError (exit 2) naming `flag`.
absl::Time ParseTimeArg(const std::string& flag, const std::string& text, absl::Time now);

// "2024-05-01 13:45:07" in the local time zone (TZ); "-" for an unset timestamp.
std::string FormatTimestamp(const google::protobuf::Timestamp& timestamp);

// "2d 3h", "3h 4m", "4m 5s", "5s"; "-" for zero or less.
std::string FormatSeconds(double seconds);

// Whether the timestamp is set (proto3 leaves unset ones at the epoch).
bool IsSet(const google::protobuf::Timestamp& timestamp);

}  // namespace tessera::cli
