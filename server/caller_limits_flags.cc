#include "server/caller_limits_flags.h"

namespace tessera::server {

void AddCallerLimitsFlags(CLI::App& app, CallerLimitsFlags& f) {
  app.add_option("--max-streams-per-user", f.max_streams_per_user,
                 "streams one person may hold open at once in each service (log follows, run and "
                 "node-event watches, shells; the REST gateway's count as their caller's); past "
                 "it a stream is refused, naming this limit (0: no limit)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1'000'000));
  app.add_option("--max-calls-per-user-per-second", f.max_calls_per_user_per_second,
                 "calls one user may make a second in each service, ten seconds' worth at "
                 "once; past it a call is refused (RESOURCE_EXHAUSTED, naming this flag and when "
                 "to call again) before anything is read; operators and admins are not held to "
                 "it (0: no limit)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--max-stream-lifetime-seconds", f.max_stream_lifetime_seconds,
                 "how long a person's log follow or watch stays open: then it ends with "
                 "UNAVAILABLE and the client opens it again (mcli does, a follow resuming "
                 "where it was), so no stream holds a slot or a thread for ever (0: no limit; "
                 "shells are not ended)")
      ->capture_default_str()
      ->check(CLI::Range(0, 7 * 24 * 3600));
  app.add_option("--max-unknown-keys-per-address", f.max_unknown_keys_per_address,
                 "API keys the services do not know that one address may try a second (ten "
                 "times as many at once); past it, its keys not already known are refused "
                 "without a database lookup until the budget refills (0: no limit)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--service-call-timeout-seconds", f.service_call_timeout_seconds,
                 "how long a call to another Tessera service waits before it fails (0: each "
                 "client's default, 10 to 30 s)")
      ->check(CLI::Range(0.0, 3600.0));
}

void ApplyCallerLimits(const CallerLimitsFlags& f, Foundation& foundation) {
  foundation.service_call_timeout = absl::Seconds(f.service_call_timeout_seconds);
  foundation.authenticator->set_max_streams_per_user(f.max_streams_per_user);
  foundation.authenticator->set_max_stream_lifetime(absl::Seconds(f.max_stream_lifetime_seconds));
  foundation.authenticator->set_max_calls_per_user_per_second(f.max_calls_per_user_per_second);
  foundation.authenticator->set_max_unknown_keys_per_address(f.max_unknown_keys_per_address);
}

}  // namespace tessera::server
