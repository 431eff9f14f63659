#include "services/store/postgres/pg_change_feed.h"

#include <spdlog/spdlog.h>

#include <pqxx/pqxx>
#include <vector>

#include "absl/synchronization/notification.h"
#include "services/store/postgres/pg_pool.h"

namespace tessera::store {
namespace {

class Receiver final : public pqxx::notification_receiver {
 public:
  Receiver(pqxx::connection_base& c, ChangeTopic topic, ChangeFeed& feed)
      : pqxx::notification_receiver(c, PgChangeFeed::Channel(topic)), topic_(topic), feed_(feed) {}
  // The payload names the writer, when it said (migration 0012).
  void operator()(const std::string& payload, int /*backend_pid*/) override {
    if (payload == feed_.writer_id()) {
      feed_.Bump(topic_);
    } else {
      feed_.BumpForeign(topic_);
    }
  }

 private:
  const ChangeTopic topic_;
  ChangeFeed& feed_;
};

}  // namespace

PgChangeFeed::PgChangeFeed(std::string conninfo, absl::Duration retry)
    : conninfo_(std::move(conninfo)), retry_(retry) {}

PgChangeFeed::~PgChangeFeed() {
  stopping_ = true;
  if (listener_.joinable()) listener_.join();
}

const char* PgChangeFeed::Channel(ChangeTopic topic) {
  switch (topic) {
    case ChangeTopic::kRunEvents:
      return "tessera_run_events";
    case ChangeTopic::kNodeEvents:
      return "tessera_node_events";
    case ChangeTopic::kLogs:
      return "tessera_logs";
    case ChangeTopic::kNodes:
      return "tessera_nodes";
  }
  return "tessera_unknown";
}

void PgChangeFeed::StartOnce() const {
  absl::call_once(started_, [this] {
    listener_ = std::thread([self = const_cast<PgChangeFeed*>(this)] { self->Listen(); });
  });
}

void PgChangeFeed::Listen() {
  bool warned = false;
  while (!stopping_) {
    try {
      pqxx::connection c(conninfo_);
      std::vector<std::unique_ptr<Receiver>> receivers;
      for (int t = 0; t < kChangeTopics; ++t) {
        receivers.push_back(std::make_unique<Receiver>(c, static_cast<ChangeTopic>(t), *this));
      }
      c.get_notifs();  // the LISTENs are in place from here on
      live_ = true;
      BumpAll();  // what committed before it listened
      if (warned) spdlog::info("listening to the database's changes again");
      warned = false;
      // Short waits, so that the destructor is not kept waiting.
      while (!stopping_) c.await_notification(0, 200'000);
    } catch (const std::exception& e) {
      if (live_.exchange(false)) BumpAll();
      if (!warned) {
        spdlog::warn("not listening to the database's changes ({}): watchers poll until it is back",
                     e.what());
        warned = true;
      }
      for (absl::Duration slept; slept < retry_ && !stopping_; slept += absl::Milliseconds(50)) {
        absl::SleepFor(absl::Milliseconds(50));
      }
    }
  }
  live_ = false;
}

}  // namespace tessera::store
