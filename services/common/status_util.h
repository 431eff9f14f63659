#pragma once
// Conversions between absl::Status, grpc::Status-like codes and protobuf time.

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "google/protobuf/timestamp.pb.h"

namespace tessera {

google::protobuf::Timestamp ToProtoTime(absl::Time t);
absl::Time FromProtoTime(const google::protobuf::Timestamp& ts);

// Returns from the enclosing function when `expr` (an absl::Status) is not OK.
#define TESSERA_RETURN_IF_ERROR(expr)           \
  do {                                          \
    if (absl::Status _st = (expr); !_st.ok()) { \
      return _st;                               \
    }                                           \
  } while (0)

#define TESSERA_CONCAT_INNER(a, b) a##b
#define TESSERA_CONCAT(a, b) TESSERA_CONCAT_INNER(a, b)
// Assigns the value of an absl::StatusOr to `lhs`, or returns its error.
#define TESSERA_ASSIGN_OR_RETURN(lhs, expr) \
  TESSERA_ASSIGN_OR_RETURN_IMPL(TESSERA_CONCAT(_statusor_, __LINE__), lhs, expr)
#define TESSERA_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(tmp).value()

}  // namespace tessera
