#include "base/random.h"

namespace tessera {

std::shared_ptr<Random> SystemRandom::Shared() {
  static const auto random = std::make_shared<SystemRandom>();
  return random;
}

}  // namespace tessera
