#include "proto/policy/preflight.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tessera {

std::string FailedPreflightChecks(
    const google::protobuf::RepeatedPtrField<v1::PreflightCheck>& checks) {
  std::vector<std::string> failed;
  for (const auto& c : checks) {
    if (!c.passed()) failed.push_back(absl::StrCat(c.name(), ": ", c.detail()));
  }
  return failed.empty() ? std::string("no check named what failed") : absl::StrJoin(failed, "; ");
}

}  // namespace tessera
