#pragma once
// When mcli opens a follow or a watch again after the server ended it. UNAVAILABLE says the
// stream may be opened again: it reached the server's maximum stream lifetime, a service
// restarted or handed over to a standby, or the connection dropped. The first time it is opened
// again at once (a lifetime's end is routine, and said nothing about); then after a pause that
// doubles from 0.25 s to 5 s while nothing arrives, saying why on stderr; once nothing arrived
// for `give_up_after`, the stream's error stands. Any other status is the stream's outcome.

#include <grpcpp/support/status.h>

#include <memory>
#include <ostream>
#include <string>

#include "absl/time/time.h"
#include "base/clock.h"

namespace tessera::cli {

class StreamReconnects {
 public:
  // `what`: the stream, as the notes on stderr name it ("the logs of run X").
  StreamReconnects(std::ostream& err, std::string what, std::shared_ptr<Clock> clock,
                   absl::Duration give_up_after = absl::Minutes(2));

  // A message arrived: the stream works, and its next end is opened again at once.
  void Received();
  // After the stream ended with `status`: whether to open it again (having paused first when
  // it failed more than once in a row).
  bool Again(const grpc::Status& status);

 private:
  std::ostream& err_;
  std::string what_;
  std::shared_ptr<Clock> clock_;
  absl::Duration give_up_after_;
  absl::Time quiet_since_;  // since the last message, or the last stream that stayed open
  absl::Time opened_at_;    // the stream's last opening
  int ends_in_a_row_ = 0;
};

}  // namespace tessera::cli
