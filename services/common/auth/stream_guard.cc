#include "services/common/auth/stream_guard.h"

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"

namespace tessera::auth {

absl::StatusOr<StreamGuard> StreamGuard::Open(Authenticator& auth,
                                              const grpc::ServerContextBase& context,
                                              const Principal& who, Lifetime lifetime,
                                              std::function<bool()> cancelled) {
  auto hash = auth.KeyHash(context);
  if (!hash.ok()) return hash.status();
  std::optional<std::string> slot_of;
  absl::Time ends_at = absl::InfiniteFuture();
  if (who.is_person()) {
    if (auto st = auth.AcquireStream(who.user); !st.ok()) return st;
    slot_of = who.user;
    const absl::Duration max = auth.max_stream_lifetime();
    if (lifetime == Lifetime::kReconnecting && max > absl::ZeroDuration()) {
      // Somewhere in the lifetime's last tenth, so that the streams a restart or a crowd
      // opened together are not all opened again together.
      const absl::Time now = auth.Now();
      const uint64_t spread = absl::HashOf(*hash, absl::ToUnixNanos(now)) % 1000;
      ends_at = now + max - max / 10 * (static_cast<double>(spread) / 1000.0);
    }
  }
  return StreamGuard(auth, context, *std::move(hash), std::move(slot_of), ends_at,
                     std::move(cancelled));
}

StreamGuard::StreamGuard(StreamGuard&& other) noexcept
    : auth_(other.auth_),
      context_(other.context_),
      cancelled_(std::move(other.cancelled_)),
      key_hash_(std::move(other.key_hash_)),
      slot_of_(std::move(other.slot_of_)),
      ends_at_(other.ends_at_),
      holds_until_(other.holds_until_),
      ended_(std::move(other.ended_)) {
  other.slot_of_.reset();
}

StreamGuard::~StreamGuard() {
  if (slot_of_) auth_->ReleaseStream(*slot_of_);
}

absl::Status StreamGuard::CheckKey() {
  if (!ended_.ok()) return ended_;
  if (auth_->Now() < holds_until_) return absl::OkStatus();
  auto still = auth_->Revalidate(key_hash_);
  if (!still.ok()) {
    ended_ = absl::UnauthenticatedError(
        absl::StrCat("this stream ended: ", still.status().message(), " while it was open"));
    return ended_;
  }
  holds_until_ = *still;
  return absl::OkStatus();
}

bool StreamGuard::Done() {
  if (cancelled_ ? cancelled_() : context_->IsCancelled()) return true;
  if (ended_.ok() && auth_->Now() >= ends_at_) {
    ended_ = absl::UnavailableError(absl::StrCat(
        "this stream reached its maximum lifetime (",
        absl::FormatDuration(auth_->max_stream_lifetime()),
        "): open it again to go on (a log follow resumes from its cursor: the next sequence of "
        "each rank's stream received)"));
  }
  return !CheckKey().ok();
}

absl::Status StreamGuard::Outcome(absl::Status outcome) const {
  return ended_.ok() ? outcome : ended_;
}

}  // namespace tessera::auth
