#pragma once
// Early-return helpers for absl::Status inside the run spec library (which must not depend on
// the rest of the project, so it does not use services/common/status_util.h).

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define TESSERA_SPEC_RETURN_IF_ERROR(expr)                \
  do {                                                    \
    if (absl::Status _spec_st = (expr); !_spec_st.ok()) { \
      return _spec_st;                                    \
    }                                                     \
  } while (0)

#define TESSERA_SPEC_CONCAT_INNER(a, b) a##b
#define TESSERA_SPEC_CONCAT(a, b) TESSERA_SPEC_CONCAT_INNER(a, b)
// Assigns the value of an absl::StatusOr to `lhs`, or returns its error.
#define TESSERA_SPEC_ASSIGN_OR_RETURN(lhs, expr) \
  TESSERA_SPEC_ASSIGN_OR_RETURN_IMPL(TESSERA_SPEC_CONCAT(_spec_statusor_, __LINE__), lhs, expr)
#define TESSERA_SPEC_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                       \
  if (!tmp.ok()) return tmp.status();                      \
  lhs = std::move(tmp).value()
