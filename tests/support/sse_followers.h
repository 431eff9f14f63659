#pragma once
// Many clients holding an event stream of the REST gateway open as Server-Sent Events (a run's
// logs, `GET /api/v1/runs/NAME/logs?follow=true`, or the runs' changes,
// `GET /api/v1/runs/watch`), all on one thread of their own, from several loopback addresses
// (127.0.0.1, .2, ...: the gateway serves at most --max-connections-per-address from one). For
// the benchmarks that hold thousands open.

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tessera::testing {

class SseFollowers {
 public:
  // Opens `count` streams of `path` on the gateway at 127.0.0.1:`port` with `api_key`, spread
  // over addresses of `per_address` connections each. Returns once every one is open (its
  // answer's headers came) or `timeout` passed (then an error says how many opened).
  static absl::StatusOr<std::unique_ptr<SseFollowers>> Open(int port, const std::string& path,
                                                            const std::string& api_key, int count,
                                                            int per_address,
                                                            absl::Duration timeout);
  ~SseFollowers();  // closes them

  int open() const { return open_.load(); }
  // Streams that ended (closed by the server, or an error).
  int ended() const { return ended_.load(); }
  // Bytes of events received (keep-alives included), over every stream.
  int64_t bytes() const { return bytes_.load(); }

 private:
  struct Follow;
  struct Impl;
  explicit SseFollowers(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  std::atomic<int> open_{0}, ended_{0};
  std::atomic<int64_t> bytes_{0};
};

}  // namespace tessera::testing
