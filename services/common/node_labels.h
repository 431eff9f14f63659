#pragma once
// The one rule for a node's labels, wherever they are set: by an operator (SetNodeLabels) or in
// a join token's terms (CreateJoinToken).

#include <google/protobuf/map.h>

#include <set>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace tessera {

inline constexpr std::size_t kMaxLabelKeyBytes = 63;
inline constexpr std::size_t kMaxLabelValueBytes = 253;

using NodeLabels = google::protobuf::Map<std::string, std::string>;

// Among a node's labels, the keys of those a person set (SetNodeLabels), sorted and
// comma-separated. A node's registration may not change those labels: a node that names its own
// labels could otherwise undo an operator's `pool` or `reserved` at its next restart. Only
// Tessera writes it.
inline constexpr char kOperatorLabelKeysLabel[] = "tessera.io/set-by-operator";

// Keys of 1 to 63 characters, values of at most 253 (an empty value is allowed: SetNodeLabels
// reads it as "remove"); kOperatorLabelKeysLabel is Tessera's. `field` names the labels in the
// error ("labels", "terms.labels").
inline absl::Status ValidateNodeLabels(const NodeLabels& labels, const std::string& field) {
  for (const auto& [k, v] : labels) {
    if (k == kOperatorLabelKeysLabel) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": ", kOperatorLabelKeysLabel,
                       " is Tessera's own record of the labels people set; it cannot be set"));
    }
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

// The keys kOperatorLabelKeysLabel lists.
inline std::set<std::string> OperatorLabelKeys(const NodeLabels& labels) {
  auto it = labels.find(kOperatorLabelKeysLabel);
  if (it == labels.end()) return {};
  return absl::StrSplit(it->second, ',', absl::SkipEmpty());
}

// Records `keys` as the labels people set (removing the record when there are none). Refused
// when the list would not fit in a label's value (about 20 keys): a node's labels are few.
inline absl::Status RecordOperatorLabelKeys(const std::set<std::string>& keys, NodeLabels& labels) {
  if (keys.empty()) {
    labels.erase(kOperatorLabelKeysLabel);
    return absl::OkStatus();
  }
  std::string joined = absl::StrJoin(keys, ",");
  if (joined.size() > kMaxLabelValueBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "labels: people may set at most ", kMaxLabelValueBytes,
        " characters of label keys on a node (their keys, comma-separated); remove some first"));
  }
  labels[kOperatorLabelKeysLabel] = std::move(joined);
  return absl::OkStatus();
}

}  // namespace tessera
