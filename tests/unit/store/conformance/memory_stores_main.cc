// Runs the conformance suite against the in-memory store.
#include "services/store/memory/memory_database.h"
#include "tests/unit/store/conformance/conformance.h"

namespace tessera::store::conformance {
namespace {

// The database of the current case.
std::shared_ptr<MemoryDatabase>& CurrentDatabase() {
  static auto* db = new std::shared_ptr<MemoryDatabase>();
  return *db;
}

}  // namespace

Stores FreshStores() {
  CurrentDatabase() = std::make_shared<MemoryDatabase>();
  return MakeMemoryStores(CurrentDatabase());
}

Stores SameDatabaseStores() { return MakeMemoryStores(CurrentDatabase()); }

void EndLeaderSession(std::string_view role, std::string_view instance) {
  CurrentDatabase()->EndLeaderSession(role, instance);
}

}  // namespace tessera::store::conformance
