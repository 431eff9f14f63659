#pragma once
// A status made by a store from the database's own error: its message holds the database's text
// (statements, constraint names, host names), which is for the service's log, not for callers.
// ToGrpcStatus (services/common/grpc_status.h) answers such a status with a clean message and a
// reference to the logged detail.

#include "absl/status/status.h"
#include "absl/strings/cord.h"

namespace tessera::store {

inline constexpr char kStoreErrorPayload[] = "type.tessera.dev/store-error";

inline absl::Status StoreError(absl::Status status) {
  status.SetPayload(kStoreErrorPayload, absl::Cord("database"));
  return status;
}

inline bool IsStoreError(const absl::Status& status) {
  return status.GetPayload(kStoreErrorPayload).has_value();
}

}  // namespace tessera::store
