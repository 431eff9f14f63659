#include "services/common/auth/refusal_tally.h"

namespace tessera::auth {

RefusalTally::RefusalTally(absl::Duration window) : window_(window) {}

std::vector<RefusalTally::Folded> RefusalTally::TakeDue(absl::Time now) {
  std::vector<Folded> due;
  absl::MutexLock lock(&mu_);
  for (auto it = kinds_.begin(); it != kinds_.end();) {
    Window& w = it->second;
    if (now < w.start + window_) {
      ++it;
      continue;
    }
    if (w.folded.count > 0) due.push_back(std::move(w.folded));
    kinds_.erase(it++);
  }
  return due;
}

}  // namespace tessera::auth
