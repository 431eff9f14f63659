#include "services/common/auth/system_keys.h"

#include <spdlog/spdlog.h>

#include "base/timestamps.h"
#include "services/common/auth/api_keys.h"

namespace tessera::auth {

SystemKeys::SystemKeys(std::shared_ptr<store::ApiKeyStore> keys, std::shared_ptr<Clock> clock,
                       std::string owner, absl::Duration lifetime)
    : keys_(std::move(keys)),
      clock_(std::move(clock)),
      owner_(std::move(owner)),
      lifetime_(lifetime),
      secret_(std::make_shared<RotatingSecret>("")) {}

absl::StatusOr<std::unique_ptr<SystemKeys>> SystemKeys::Create(
    std::shared_ptr<store::ApiKeyStore> keys, std::shared_ptr<Clock> clock, std::string owner,
    absl::Duration lifetime) {
  std::unique_ptr<SystemKeys> out(
      new SystemKeys(std::move(keys), std::move(clock), std::move(owner), lifetime));
  const absl::Time now = out->clock_->Now();
  auto made = out->MakeKey(now);
  if (!made.ok()) return made.status();
  absl::MutexLock lock(&out->mu_);
  out->current_id_ = made->first;
  out->secret_->Set(made->second);
  out->next_rotation_ = now + lifetime / 3;
  return out;
}

SystemKeys::~SystemKeys() {
  absl::MutexLock lock(&mu_);
  for (const std::string& id : {previous_id_, current_id_}) {
    if (!id.empty()) (void)keys_->RevokeKey(id);
  }
}

absl::StatusOr<std::pair<std::string, std::string>> SystemKeys::MakeKey(absl::Time now) {
  store::ApiKeyRecord record;
  std::string secret = NewSecret();
  record.secret_hash = HashSecret(secret);
  record.key.set_id(NewKeyId());
  record.key.set_user(owner_);
  record.key.set_role(v1::ROLE_SYSTEM);
  record.key.set_description("system key of a running control-plane process (rotated)");
  *record.key.mutable_created_at() = ToProtoTime(now);
  *record.key.mutable_expires_at() = ToProtoTime(now + lifetime_);
  if (auto st = keys_->CreateKey(record); !st.ok()) return st;
  return std::make_pair(record.key.id(), std::move(secret));
}

void SystemKeys::Tick() {
  {
    absl::MutexLock lock(&mu_);
    if (clock_->Now() < next_rotation_) return;
  }
  if (auto st = Rotate(); !st.ok()) {
    spdlog::warn("system key of {}: rotation failed, trying again: {}", owner_, st.ToString());
  }
}

absl::Status SystemKeys::Rotate() {
  const absl::Time now = clock_->Now();
  auto made = MakeKey(now);
  if (!made.ok()) return made.status();
  std::string revoke;
  {
    absl::MutexLock lock(&mu_);
    revoke = std::move(previous_id_);
    previous_id_ = std::move(current_id_);
    current_id_ = made->first;
    secret_->Set(made->second);
    next_rotation_ = now + lifetime_ / 3;
  }
  if (!revoke.empty()) {
    if (auto st = keys_->RevokeKey(revoke); !st.ok()) {
      // It expires on its own; nothing else depends on the revocation.
      spdlog::warn("system key {} not revoked (it expires on its own): {}", revoke, st.ToString());
    }
  }
  spdlog::debug("system key of {} rotated: {}", owner_, made->first);
  return absl::OkStatus();
}

std::string SystemKeys::current_id() const {
  absl::MutexLock lock(&mu_);
  return current_id_;
}

}  // namespace tessera::auth
