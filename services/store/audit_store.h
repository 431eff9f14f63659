#pragma once
// The audit log: every action of an admin or an operator, and every refused attempt at one,
// appended by whichever service answered it. Append-only: nothing updates or deletes a record.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tessera/v1/admin.pb.h"

namespace tessera::store {

struct AuditQuery {
  absl::Time since = absl::InfinitePast();
  std::string actor = {};
  // "CordonNode" matches "CordonService/CordonNode"; a full "Service/Method" matches itself.
  std::string action = {};
  // Records whose target contains this text.
  std::string target = {};
  // Newest first, at most this many (1..1000).
  int limit = 100;
  // Only records older than this id (0: from the newest).
  int64_t before_id = 0;
};

class AuditStore {
 public:
  virtual ~AuditStore() = default;
  // Stores `record` (its id is ignored) and returns the id it was given: increasing.
  virtual absl::StatusOr<int64_t> AppendAudit(const v1::AuditRecord& record) = 0;
  virtual absl::StatusOr<std::vector<v1::AuditRecord>> ListAudit(const AuditQuery& query) = 0;
};

// Whether `action` ("CordonService/CordonNode") is what a query's action names.
bool AuditActionMatches(const std::string& action, const std::string& wanted);

}  // namespace tessera::store
