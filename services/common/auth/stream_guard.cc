#include "services/common/auth/stream_guard.h"

#include "absl/strings/str_cat.h"

namespace tessera::auth {

absl::StatusOr<StreamGuard> StreamGuard::Open(Authenticator& auth,
                                              const grpc::ServerContextBase& context) {
  auto hash = auth.KeyHash(context);
  if (!hash.ok()) return hash.status();
  return StreamGuard(auth, context, *std::move(hash));
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
