#include "services/logs/log_quota.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/byte_size.h"
#include "base/status_macros.h"
#include "proto/policy/packed_log_lines.h"

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

absl::StatusOr<QuotaOutcome> LogQuota::Apply(std::vector<v1::LogLine> lines,
                                             std::vector<v1::PackedLogLines> packed) {
  QuotaOutcome out;
  if (options_.bytes_per_second <= 0 && options_.max_bytes <= 0) {
    out.lines = std::move(lines);
    out.packed = std::move(packed);
    return out;
  }
  const absl::Time now = clock_->Now();
  absl::MutexLock lock(&mu_);
  Forget(now);
  const double capacity =
      static_cast<double>(options_.bytes_per_second) * absl::ToDoubleSeconds(options_.burst);
  // Every marker made (its index in out.lines, and whether for the total, else the rate), whose
  // text is written once its count is known; and the one each stream's current stretch of
  // dropped lines is gathered in (an index into `markers`).
  std::vector<std::pair<size_t, bool>> markers;
  std::map<std::tuple<std::string, int32_t, int32_t, int32_t>, size_t> open_marker;
  out.lines.reserve(lines.size());
  // A batch holds runs of lines of one run: its state is looked up (and its tokens refilled)
  // when the run changes, not at every line.
  std::string current_run;
  RunState* s = nullptr;
  const auto state_of = [&](const std::string& run_id) -> absl::Status {
    if (s != nullptr && current_run == run_id) return absl::OkStatus();
    auto state = StateOf(run_id, now);
    if (!state.ok()) return state.status();
    s = *state;
    current_run = run_id;
    if (options_.bytes_per_second > 0) {
      s->tokens =
          std::min(capacity, s->tokens + absl::ToDoubleSeconds(now - s->refilled) *
                                             static_cast<double>(options_.bytes_per_second));
      s->refilled = now;
    }
    return absl::OkStatus();
  };
  // Whether `size` more bytes of the run at hand are within its quotas; taken from them if so.
  // Once a run reaches its total, it stays there: a short line that would still fit in what is
  // left would appear after the marker that says the quota was reached.
  const auto fits = [&](int64_t size, bool& over_total) {
    s->full = s->full || (options_.max_bytes > 0 && s->stored + size > options_.max_bytes);
    over_total = s->full;
    const bool over_rate =
        !over_total && options_.bytes_per_second > 0 && s->tokens < static_cast<double>(size);
    if (over_total || over_rate) return false;
    if (options_.bytes_per_second > 0) s->tokens -= static_cast<double>(size);
    s->stored += size;
    return true;
  };
  const auto admit_line = [&](v1::LogLine&& line) -> absl::Status {
    TESSERA_RETURN_IF_ERROR(state_of(line.run_id()));
    bool over_total = false;
    if (fits(static_cast<int64_t>(line.text().size()), over_total)) {
      if (!open_marker.empty()) open_marker.erase(StreamOf(line));
      out.lines.push_back(std::move(line));
      return absl::OkStatus();
    }
    (over_total ? out.dropped_over_total : out.dropped_over_rate) += 1;
    const auto key = StreamOf(line);
    auto open = open_marker.find(key);
    if (open != open_marker.end() &&
        out.lines[markers[open->second].first].sequence() + 1 == line.sequence()) {
      // The stretch goes on: the marker moves to this line's place and counts it.
      auto& [index, for_total] = markers[open->second];
      v1::LogLine& m = out.lines[index];
      m.set_sequence(line.sequence());
      m.set_dropped_lines(m.dropped_lines() + 1);
      *m.mutable_time() = line.time();
      for_total = over_total;
      return absl::OkStatus();
    }
    line.set_dropped_lines(1);
    open_marker[key] = markers.size();
    markers.emplace_back(out.lines.size(), over_total);
    out.lines.push_back(std::move(line));
    return absl::OkStatus();
  };
  for (auto& line : lines) TESSERA_RETURN_IF_ERROR(admit_line(std::move(line)));
  // A packed group within the quotas passes whole, still packed (the usual case); one that is
  // not is taken apart, and its lines go one by one as above.
  std::vector<v1::LogLine> taken_apart;
  for (auto& group : packed) {
    TESSERA_RETURN_IF_ERROR(state_of(group.run_id()));
    const size_t count = CountChunkLines(group.lines());
    const auto text_bytes =
        static_cast<int64_t>(group.lines().size() - count * kChunkLineHeaderBytes);
    const bool full_before = s->full;
    const double tokens_before = s->tokens;
    bool over_total = false;
    if (fits(text_bytes, over_total)) {
      if (!open_marker.empty()) {
        open_marker.erase({group.run_id(), group.resumption_index(), group.rank(),
                           static_cast<int32_t>(group.stream())});
      }
      out.packed.push_back(std::move(group));
      continue;
    }
    // Line by line from where the run stood: the group as a whole did not fit, some of it may.
    s->full = full_before;
    s->tokens = tokens_before;
    taken_apart.clear();
    TESSERA_RETURN_IF_ERROR(UnpackLines(group, taken_apart));
    for (auto& line : taken_apart) TESSERA_RETURN_IF_ERROR(admit_line(std::move(line)));
  }
  for (const auto& [index, over_total] : markers) {
    out.lines[index].set_text(MarkerText(out.lines[index].dropped_lines(), over_total));
  }
  return out;
}

}  // namespace tessera::logs
