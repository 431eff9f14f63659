#pragma once
// Early-return helpers for absl::Status. Header-only and dependent on Abseil alone, so that
// libraries kept free of the rest of the project (the run spec parser and its fuzzer) use them too.

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

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
