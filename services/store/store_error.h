#pragma once
// A status made by a store from the database's own error: its message holds the database's text
// (statements, constraint names, host names), which is for the service's log, not for callers.
// It is a log-only status (base/log_only_status.h): ToGrpcStatus (transport/grpc_status.h)
// answers it with a clean message and a reference to the logged detail.

#include <utility>

#include "absl/status/status.h"
#include "base/log_only_status.h"

namespace tessera::store {

inline absl::Status StoreError(absl::Status status) { return LogOnly(std::move(status)); }

inline bool IsStoreError(const absl::Status& status) { return IsLogOnly(status); }

}  // namespace tessera::store
