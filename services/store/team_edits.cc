#include "services/store/team_edits.h"

#include <algorithm>
#include <tuple>

#include "absl/strings/str_cat.h"

namespace tessera::store {

void AddTeamMember(v1::Team& team, std::string_view user) {
  auto* members = team.mutable_members();
  auto it = std::lower_bound(members->begin(), members->end(), user,
                             [](const std::string& a, std::string_view b) { return a < b; });
  if (it != members->end() && *it == user) return;
  const auto index = it - members->begin();
  members->Add(std::string(user));
  std::rotate(members->begin() + index, members->end() - 1, members->end());
}

absl::Status RemoveTeamMember(v1::Team& team, std::string_view user) {
  auto* members = team.mutable_members();
  auto it = std::find(members->begin(), members->end(), user);
  if (it == members->end()) {
    return absl::NotFoundError(
        absl::StrCat("user ", std::string(user), " is not a member of team ", team.name()));
  }
  members->erase(it);
  return absl::OkStatus();
}

absl::Status EditTeamQuota(v1::Team& team, const v1::TeamQuota& quota, bool remove) {
  auto* quotas = team.mutable_quotas();
  const auto key = [](const v1::TeamQuota& q) { return std::tie(q.cluster(), q.gpu_type()); };
  auto it = std::find_if(quotas->begin(), quotas->end(),
                         [&](const v1::TeamQuota& q) { return key(q) == key(quota); });
  if (remove) {
    if (it == quotas->end()) {
      return absl::NotFoundError(absl::StrCat(
          "team ", team.name(), " has no quota in cluster ", quota.cluster(),
          quota.gpu_type().empty() ? "" : absl::StrCat(" for GPU type ", quota.gpu_type())));
    }
    quotas->erase(it);
    return absl::OkStatus();
  }
  if (it != quotas->end()) {
    *it = quota;
    return absl::OkStatus();
  }
  *quotas->Add() = quota;
  std::sort(quotas->begin(), quotas->end(),
            [&](const v1::TeamQuota& a, const v1::TeamQuota& b) { return key(a) < key(b); });
  return absl::OkStatus();
}

}  // namespace tessera::store
