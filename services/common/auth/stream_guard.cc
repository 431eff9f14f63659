#include "services/common/auth/stream_guard.h"

#include "absl/strings/str_cat.h"

namespace tessera::auth {

absl::StatusOr<StreamGuard> StreamGuard::Open(Authenticator& auth,
                                              const grpc::ServerContextBase& context,
                                              const Principal& who) {
  auto hash = auth.KeyHash(context);
  if (!hash.ok()) return hash.status();
  std::optional<std::string> slot_of;
  if (who.is_person()) {
    if (auto st = auth.AcquireStream(who.user); !st.ok()) return st;
    slot_of = who.user;
  }
  return StreamGuard(auth, context, *std::move(hash), std::move(slot_of));
}

StreamGuard::StreamGuard(StreamGuard&& other) noexcept
    : auth_(other.auth_),
      context_(other.context_),
      key_hash_(std::move(other.key_hash_)),
      slot_of_(std::move(other.slot_of_)),
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
  if (context_->IsCancelled()) return true;
  return !CheckKey().ok();
}

absl::Status StreamGuard::Outcome(absl::Status outcome) const {
  return ended_.ok() ? outcome : ended_;
}

}  // namespace tessera::auth
