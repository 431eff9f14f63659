#pragma once
// How an instance that does not lead refuses what only the leader can do, and how its callers
// recognise the refusal (and try another instance).

#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace tessera {

inline constexpr char kStandbyRefusal[] = " instance is a standby; ";

// UNAVAILABLE: "this scheduler instance is a standby; <what to do>".
inline absl::Status StandbyError(const std::string& role, const std::string& advice) {
  return absl::UnavailableError(absl::StrCat("this ", role, kStandbyRefusal, advice));
}

inline bool IsStandbyRefusal(const absl::Status& status) {
  return absl::IsUnavailable(status) && absl::StrContains(status.message(), kStandbyRefusal);
}

}  // namespace tessera
