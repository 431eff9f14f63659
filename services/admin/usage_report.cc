#include "services/admin/usage_report.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "absl/strings/ascii.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"

namespace tessera::admin {

std::string UsageOutcome(const store::AttemptUsage& usage) {
  if (usage.ended_at == absl::InfiniteFuture()) return "running";
  switch (usage.end_reason) {
    case v1::ATTEMPT_END_REASON_SUCCEEDED:
      return "completed";
    case v1::ATTEMPT_END_REASON_USER_EXIT:
    case v1::ATTEMPT_END_REASON_UNSPECIFIED:
      return "failed";
    default: {
      // ATTEMPT_END_REASON_NODE_FAILURE -> "node failure": the enum's own names.
      std::string name(
          absl::StripPrefix(v1::AttemptEndReason_Name(usage.end_reason), "ATTEMPT_END_REASON_"));
      absl::AsciiStrToLower(&name);
      return absl::StrReplaceAll(name, {{"_", " "}});
    }
  }
}

std::vector<v1::UsageRow> SummarizeUsage(const std::vector<store::AttemptUsage>& attempts,
                                         absl::Time since, absl::Time until) {
  using Key = std::tuple<std::string, std::string, std::string, std::string, std::string>;
  std::map<Key, v1::UsageRow> rows;
  for (const store::AttemptUsage& a : attempts) {
    const absl::Time start = std::max(a.started_at, since);
    const absl::Time end = std::min(a.ended_at, until);
    if (a.gpus <= 0 || end <= start) continue;
    const std::string outcome = UsageOutcome(a);
    // Day by day (UTC midnights).
    absl::Time day =
        absl::FromCivil(absl::ToCivilDay(start, absl::UTCTimeZone()), absl::UTCTimeZone());
    while (day < end) {
      const absl::Time next = day + absl::Hours(24);
      const absl::Duration ran = std::min(end, next) - std::max(start, day);
      if (ran > absl::ZeroDuration()) {
        const std::string date = absl::FormatTime("%Y-%m-%d", day, absl::UTCTimeZone());
        v1::UsageRow& row = rows[Key{date, a.cluster, a.team, a.user, outcome}];
        if (row.day().empty()) {
          row.set_day(date);
          row.set_cluster(a.cluster);
          row.set_team(a.team);
          row.set_user(a.user);
          row.set_outcome(outcome);
        }
        row.set_gpu_hours(row.gpu_hours() + a.gpus * absl::ToDoubleHours(ran));
        row.set_attempts(row.attempts() + 1);
      }
      day = next;
    }
  }
  std::vector<v1::UsageRow> out;
  out.reserve(rows.size());
  for (auto& [key, row] : rows) out.push_back(std::move(row));
  return out;
}

}  // namespace tessera::admin
