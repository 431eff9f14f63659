#pragma once
// What one of Tessera's services shows when it calls another: the secret of its system key.
// A process's system key is short-lived and rotated (auth::SystemKeys, auth/system_keys.h), so
// the secret is read at every call, never copied once. A fixed secret converts implicitly (tests,
// tools that make a key for one run).

#include <memory>
#include <string>
#include <utility>

#include "absl/synchronization/mutex.h"

namespace tessera {

// The current secret of a key that changes.
class RotatingSecret {
 public:
  explicit RotatingSecret(std::string initial) : secret_(std::move(initial)) {}
  std::string Current() const {
    absl::MutexLock lock(&mu_);
    return secret_;
  }
  void Set(std::string secret) {
    absl::MutexLock lock(&mu_);
    secret_ = std::move(secret);
  }

 private:
  mutable absl::Mutex mu_;
  std::string secret_ ABSL_GUARDED_BY(mu_);
};

class SystemCredential {
 public:
  SystemCredential(std::string fixed_secret)  // NOLINT(google-explicit-constructor): see above
      : source_(std::make_shared<RotatingSecret>(std::move(fixed_secret))) {}
  SystemCredential(const char* fixed_secret)  // NOLINT(google-explicit-constructor)
      : SystemCredential(std::string(fixed_secret)) {}
  explicit SystemCredential(std::shared_ptr<const RotatingSecret> source)
      : source_(std::move(source)) {}

  std::string secret() const { return source_->Current(); }

 private:
  std::shared_ptr<const RotatingSecret> source_;
};

}  // namespace tessera
