#include "services/store/change_feed.h"

#include "absl/random/random.h"
#include "absl/strings/str_format.h"

namespace tessera::store {
namespace {

std::string RandomWriterId() {
  absl::BitGen gen;
  return absl::StrFormat("w%016x", absl::Uniform<uint64_t>(gen));
}

}  // namespace

ChangeFeed::ChangeFeed() : writer_id_(RandomWriterId()) {}

uint64_t ChangeFeed::Generation(ChangeTopic topic) const {
  StartOnce();
  absl::MutexLock lock(&mu_);
  return generations_[static_cast<int>(topic)];
}

uint64_t ChangeFeed::ForeignGeneration(ChangeTopic topic) const {
  StartOnce();
  absl::MutexLock lock(&mu_);
  return foreign_generations_[static_cast<int>(topic)];
}

void ChangeFeed::WaitForChange(ChangeTopic topic, uint64_t seen, absl::Duration timeout,
                               Clock& clock) const {
  StartOnce();
  absl::MutexLock lock(&mu_);
  const auto changed = [this, topic, seen]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return generations_[static_cast<int>(topic)] != seen;
  };
  clock.AwaitWithTimeout(mu_, absl::Condition(&changed), timeout);
}

void ChangeFeed::Bump(ChangeTopic topic) {
  absl::MutexLock lock(&mu_);
  ++generations_[static_cast<int>(topic)];
}

void ChangeFeed::BumpForeign(ChangeTopic topic) {
  absl::MutexLock lock(&mu_);
  ++generations_[static_cast<int>(topic)];
  ++foreign_generations_[static_cast<int>(topic)];
}

void ChangeFeed::BumpAll() {
  absl::MutexLock lock(&mu_);
  for (auto& g : generations_) ++g;
  for (auto& g : foreign_generations_) ++g;
}

}  // namespace tessera::store
