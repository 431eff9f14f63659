#pragma once
// What every service holds its callers to (every control-plane binary): streams and calls per
// person, how long a stream lives, unknown keys per address, and how long a call to another
// Tessera service waits; registered on the command line, then applied to the Foundation.

#include <CLI/CLI.hpp>

#include "server/components.h"
#include "services/common/auth/api_keys.h"

namespace tessera::server {

struct CallerLimitsFlags {
  int max_streams_per_user = 256;
  double max_calls_per_user_per_second = auth::Authenticator::kDefaultCallsPerUserPerSecond;
  int max_stream_lifetime_seconds = 1800;
  double max_unknown_keys_per_address = auth::Authenticator::kDefaultUnknownKeysPerSecond;
  double service_call_timeout_seconds = 0;
};

void AddCallerLimitsFlags(CLI::App& app, CallerLimitsFlags& f);

// Sets the limits on `foundation`'s authenticator and its calls to other services (every value
// was range-checked by CLI11).
void ApplyCallerLimits(const CallerLimitsFlags& f, Foundation& foundation);

}  // namespace tessera::server
