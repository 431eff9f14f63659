// Runs the conformance suite against the in-memory store.
#include "services/store/memory/memory_database.h"
#include "tests/unit/store/conformance/conformance.h"

namespace tessera::store::conformance {

Stores FreshStores() { return MakeMemoryStores(); }

}  // namespace tessera::store::conformance
