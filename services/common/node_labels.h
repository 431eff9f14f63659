#pragma once
// The one rule for a node's labels, wherever they are set: by an operator (SetNodeLabels) or in
// a join token's terms (CreateJoinToken).

#include <google/protobuf/map.h>

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tessera {

inline constexpr std::size_t kMaxLabelKeyBytes = 63;
inline constexpr std::size_t kMaxLabelValueBytes = 253;

// Keys of 1 to 63 characters, values of at most 253 (an empty value is allowed: SetNodeLabels
// reads it as "remove"). `field` names the labels in the error ("labels", "terms.labels").
inline absl::Status ValidateNodeLabels(
    const google::protobuf::Map<std::string, std::string>& labels, const std::string& field) {
  for (const auto& [k, v] : labels) {
    if (k.empty() || k.size() > kMaxLabelKeyBytes) {
      return absl::InvalidArgumentError(absl::StrCat(field, ": key \"", k.substr(0, 80),
                                                     "\" must have 1 to ", kMaxLabelKeyBytes,
                                                     " characters"));
    }
    if (v.size() > kMaxLabelValueBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".", k, ": at most ", kMaxLabelValueBytes, " characters"));
    }
  }
  return absl::OkStatus();
}

}  // namespace tessera
