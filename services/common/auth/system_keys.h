#pragma once
// A control-plane process's own system key, for its calls to the other services: made when the
// process starts, kept only in memory, short-lived (it expires after `lifetime`) and replaced by
// a new one every third of that. The key it replaced is revoked one rotation later, once no call
// in flight can still carry it; a clean exit revokes both. A key of a process killed with SIGKILL
// stops working on its own when it expires.
//
// Rotation is asked for by Tick() (the server calls it every few seconds); a rotation that fails
// (the database away) is tried again at the next tick while the current key is still valid.

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "services/common/system_credential.h"
#include "services/store/api_key_store.h"

namespace tessera::auth {

class SystemKeys {
 public:
  // Makes the first key; the store's error when it cannot.
  static absl::StatusOr<std::unique_ptr<SystemKeys>> Create(
      std::shared_ptr<store::ApiKeyStore> keys, std::shared_ptr<Clock> clock, std::string owner,
      absl::Duration lifetime = absl::Hours(1));
  ~SystemKeys();

  // What the process's clients show: always the current key.
  SystemCredential credential() const { return SystemCredential(secret_); }

  // Rotates when a third of the current key's lifetime has passed.
  void Tick();
  // Rotates now: a new key becomes current, the one before the current one is revoked.
  absl::Status Rotate();

  std::string current_id() const;

 private:
  SystemKeys(std::shared_ptr<store::ApiKeyStore> keys, std::shared_ptr<Clock> clock,
             std::string owner, absl::Duration lifetime);
  // A new key in the store: its id and secret.
  absl::StatusOr<std::pair<std::string, std::string>> MakeKey(absl::Time now);

  const std::shared_ptr<store::ApiKeyStore> keys_;
  const std::shared_ptr<Clock> clock_;
  const std::string owner_;
  const absl::Duration lifetime_;
  const std::shared_ptr<RotatingSecret> secret_;
  mutable absl::Mutex mu_;
  std::string current_id_ ABSL_GUARDED_BY(mu_);
  std::string previous_id_ ABSL_GUARDED_BY(mu_);  // replaced, revoked at the next rotation
  absl::Time next_rotation_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera::auth
