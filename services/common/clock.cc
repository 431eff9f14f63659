#include "services/common/clock.h"

namespace tessera {

std::shared_ptr<Clock> SystemClock::Shared() {
  static const auto clock = std::make_shared<SystemClock>();
  return clock;
}

}  // namespace tessera
