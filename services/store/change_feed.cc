#include "services/store/change_feed.h"

#include "absl/strings/str_format.h"
#include "base/random.h"

namespace tessera::store {
namespace {

std::string RandomWriterId() { return absl::StrFormat("w%016x", SystemRandom::Shared()->Next()); }

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
  {
    absl::MutexLock lock(&mu_);
    ++generations_[static_cast<int>(topic)];
  }
  Tell(1u << static_cast<int>(topic));
}

void ChangeFeed::BumpForeign(ChangeTopic topic) {
  {
    absl::MutexLock lock(&mu_);
    ++generations_[static_cast<int>(topic)];
    ++foreign_generations_[static_cast<int>(topic)];
  }
  Tell(1u << static_cast<int>(topic));
}

void ChangeFeed::BumpAll() {
  {
    absl::MutexLock lock(&mu_);
    for (auto& g : generations_) ++g;
    for (auto& g : foreign_generations_) ++g;
  }
  Tell(~0u);
}

int ChangeFeed::Listen(ChangeTopic topic, std::function<void()> listener) {
  absl::MutexLock lock(&listeners_mu_);
  const int id = next_listener_++;
  listeners_.emplace(id, std::make_pair(topic, std::move(listener)));
  return id;
}

void ChangeFeed::Unlisten(int id) {
  absl::MutexLock lock(&listeners_mu_);
  listeners_.erase(id);
}

void ChangeFeed::Tell(unsigned topics) {
  // After the generation moved and with mu_ released: a listener may read generations.
  absl::MutexLock lock(&listeners_mu_);
  for (const auto& [id, listener] : listeners_) {
    if ((topics & (1u << static_cast<int>(listener.first))) != 0) listener.second();
  }
}

}  // namespace tessera::store
