#include "services/logs/log_quota.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/byte_size.h"

namespace tessera::logs {
namespace {

// The key of a line's stream within a batch.
std::tuple<std::string, int32_t, int32_t, int32_t> StreamOf(const v1::LogLine& l) {
  return {l.run_id(), l.resumption_index(), l.rank(), static_cast<int32_t>(l.stream())};
}

}  // namespace

LogQuota::LogQuota(LogQuotaOptions options, std::shared_ptr<Clock> clock, StoredBytes stored_bytes)
    : options_(options), clock_(std::move(clock)), stored_bytes_(std::move(stored_bytes)) {}

std::string LogQuota::MarkerText(int64_t dropped, bool over_total) const {
  return over_total ? absl::StrCat("[tessera] ", dropped, dropped == 1 ? " line" : " lines",
                                   " dropped: this run's logs reached their quota of ",
                                   FormatByteSize(options_.max_bytes))
                    : absl::StrCat("[tessera] ", dropped, dropped == 1 ? " line" : " lines",
                                   " dropped: this run printed more than its log rate quota of ",
                                   FormatByteSize(options_.bytes_per_second), "/s");
}

absl::StatusOr<LogQuota::RunState*> LogQuota::StateOf(const std::string& run_id, absl::Time now) {
  auto [it, fresh] = runs_.try_emplace(run_id);
  RunState& s = it->second;
  if (fresh) {
    s.tokens =
        static_cast<double>(options_.bytes_per_second) * absl::ToDoubleSeconds(options_.burst);
    s.refilled = now;
  }
  s.seen = now;
  if (options_.max_bytes > 0 && now >= s.next_read) {
    auto stored = stored_bytes_(run_id);
    if (stored.ok()) {
      s.stored = *stored;
      s.next_read = now + options_.refresh;
    } else if (fresh) {
      runs_.erase(it);
      return stored.status();
    }
    // A run already known keeps its count when the store cannot be read now.
  }
  return &s;
}

void LogQuota::Forget(absl::Time now) {
  if (now < next_forget_) return;
  next_forget_ = now + options_.forget_after;
  for (auto it = runs_.begin(); it != runs_.end();) {
    it = now - it->second.seen > options_.forget_after ? runs_.erase(it) : std::next(it);
  }
}

absl::StatusOr<QuotaOutcome> LogQuota::Apply(std::vector<v1::LogLine> lines) {
  QuotaOutcome out;
  if (options_.bytes_per_second <= 0 && options_.max_bytes <= 0) {
    out.lines = std::move(lines);
    return out;
  }
  const absl::Time now = clock_->Now();
  absl::MutexLock lock(&mu_);
  Forget(now);
  const double capacity =
      static_cast<double>(options_.bytes_per_second) * absl::ToDoubleSeconds(options_.burst);
  // The marker each stream's stretch of dropped lines is gathered in (index into out.lines).
  std::map<std::tuple<std::string, int32_t, int32_t, int32_t>, size_t> open_marker;
  out.lines.reserve(lines.size());
  for (auto& line : lines) {
    auto state = StateOf(line.run_id(), now);
    if (!state.ok()) return state.status();
    RunState& s = **state;
    if (options_.bytes_per_second > 0) {
      s.tokens = std::min(capacity, s.tokens + absl::ToDoubleSeconds(now - s.refilled) *
                                                   static_cast<double>(options_.bytes_per_second));
      s.refilled = now;
    }
    const auto size = static_cast<int64_t>(line.text().size());
    // Once a run reaches its total, it stays there: a short line that would still fit in what
    // is left would appear after the marker that says the quota was reached.
    s.full = s.full || (options_.max_bytes > 0 && s.stored + size > options_.max_bytes);
    const bool over_total = s.full;
    const bool over_rate =
        !over_total && options_.bytes_per_second > 0 && s.tokens < static_cast<double>(size);
    const auto key = StreamOf(line);
    if (!over_total && !over_rate) {
      if (options_.bytes_per_second > 0) s.tokens -= static_cast<double>(size);
      s.stored += size;
      open_marker.erase(key);
      out.lines.push_back(std::move(line));
      continue;
    }
    (over_total ? out.dropped_over_total : out.dropped_over_rate) += 1;
    auto marker = open_marker.find(key);
    if (marker != open_marker.end() &&
        out.lines[marker->second].sequence() + 1 == line.sequence()) {
      // The stretch goes on: the marker moves to this line's place and counts it.
      v1::LogLine& m = out.lines[marker->second];
      m.set_sequence(line.sequence());
      m.set_dropped_lines(m.dropped_lines() + 1);
      *m.mutable_time() = line.time();
      m.set_text(MarkerText(m.dropped_lines(), over_total));
      continue;
    }
    line.set_dropped_lines(1);
    line.set_text(MarkerText(1, over_total));
    open_marker[key] = out.lines.size();
    out.lines.push_back(std::move(line));
  }
  return out;
}

}  // namespace tessera::logs
