#include "cli/stream_reconnect.h"

#include <algorithm>

namespace tessera::cli {

namespace {
constexpr absl::Duration kFirstPause = absl::Milliseconds(250);
constexpr absl::Duration kLongestPause = absl::Seconds(5);
constexpr absl::Duration kStayedOpen = absl::Seconds(10);
}  // namespace

StreamReconnects::StreamReconnects(std::ostream& err, std::string what,
                                   std::shared_ptr<Clock> clock, absl::Duration give_up_after)
    : err_(err),
      what_(std::move(what)),
      clock_(std::move(clock)),
      give_up_after_(give_up_after),
      quiet_since_(clock_->Now()),
      opened_at_(quiet_since_) {}

void StreamReconnects::Received() {
  ends_in_a_row_ = 0;
  quiet_since_ = clock_->Now();
}

bool StreamReconnects::Again(const grpc::Status& status) {
  if (status.error_code() != grpc::StatusCode::UNAVAILABLE) return false;
  // A stream that stayed open a while worked, whether or not anything arrived (a quiet run's
  // follow ends at its lifetime with nothing received).
  if (clock_->Now() - opened_at_ >= kStayedOpen) Received();
  if (ends_in_a_row_++ == 0) {
    opened_at_ = clock_->Now();
    return true;
  }
  if (clock_->Now() - quiet_since_ >= give_up_after_) return false;
  const absl::Duration pause =
      std::min(kLongestPause, kFirstPause * (1 << std::min(ends_in_a_row_ - 2, 5)));
  err_ << "Reconnecting to " << what_ << " in " << absl::FormatDuration(pause) << ": "
       << status.error_message() << "\n";
  err_.flush();
  clock_->SleepFor(pause);
  opened_at_ = clock_->Now();
  return true;
}

}  // namespace tessera::cli
