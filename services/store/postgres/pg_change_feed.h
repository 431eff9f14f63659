#pragma once
// The store's change feed over PostgreSQL's LISTEN/NOTIFY: a connection of its own listens to
// the channels that migration 0010's triggers notify when runs' events, node events or log
// watermarks are written, from any process. It starts on first use (a process that never
// watches opens no connection). A lost connection is retried every `retry`; meanwhile live()
// is false and watchers poll, and every generation moves when it is lost and again when it is
// back (what happened in between was not heard).

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/call_once.h"
#include "absl/time/time.h"
#include "services/store/change_feed.h"

namespace tessera::store {

class PgChangeFeed final : public ChangeFeed {
 public:
  explicit PgChangeFeed(std::string conninfo, absl::Duration retry = absl::Seconds(1));
  ~PgChangeFeed() override;

  bool live() const override { return live_.load(); }

  // The channel that carries a topic's notifications.
  static const char* Channel(ChangeTopic topic);

 protected:
  void StartOnce() const override;

 private:
  void Listen();

  const std::string conninfo_;
  const absl::Duration retry_;
  mutable absl::once_flag started_;
  mutable std::thread listener_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> live_{false};
};

}  // namespace tessera::store
