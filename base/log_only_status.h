#pragma once
// A status whose message is for the log, not for the caller: a database's own error (statements,
// constraint names, host names) is one (store::StoreError). Whoever answers a caller
// (ToGrpcStatus, transport/grpc_status.h) tells them a clean message and a reference to the
// logged detail. Here, below both, so that answering a call needs nothing of the store.

#include "absl/status/status.h"
#include "absl/strings/cord.h"

namespace tessera {

inline constexpr char kLogOnlyPayload[] = "type.tessera.dev/log-only";

inline absl::Status LogOnly(absl::Status status) {
  status.SetPayload(kLogOnlyPayload, absl::Cord("log only"));
  return status;
}

inline bool IsLogOnly(const absl::Status& status) {
  return status.GetPayload(kLogOnlyPayload).has_value();
}

}  // namespace tessera
