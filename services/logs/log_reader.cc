#include "services/logs/log_reader.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>

namespace tessera::logs {

LogReader::LogReader(std::shared_ptr<store::LogStore> store, store::LogQuery query,
                     std::shared_ptr<Clock> clock, absl::Duration gap_timeout, int page_size)
    : store_(std::move(store)),
      query_(std::move(query)),
      clock_(std::move(clock)),
      gap_timeout_(gap_timeout),
      page_size_(std::max(page_size, 1)) {}

void LogReader::StartAfter(const std::vector<v1::LogLine>& shown,
                           const std::vector<store::LogStreamInfo>& streams) {
  for (const auto& s : streams) query_.from_sequence[{s.rank, s.stream}] = s.max_sequence + 1;
  std::map<store::LogStreamKey, int64_t> last;
  for (const auto& l : shown) {
    auto [it, fresh] = last.try_emplace({l.rank(), l.stream()}, l.sequence());
    if (!fresh) it->second = std::max(it->second, l.sequence());
  }
  for (const auto& [key, seq] : last) query_.from_sequence[key] = seq + 1;
}

absl::StatusOr<LogReader::Page> LogReader::Next(bool skip_gaps) {
  store::LogQuery q = query_;
  q.limit_per_stream = page_size_;
  auto lines = store_->ReadLogs(q);
  if (!lines.ok()) return lines.status();

  // A stream cut by the page size may have lines earlier than other streams' later ones: show
  // nothing beyond the earliest cut, so that pages join up in display order.
  std::map<store::LogStreamKey, int> count;
  std::map<store::LogStreamKey, const v1::LogLine*> last;
  for (const auto& l : *lines) {
    ++count[{l.rank(), l.stream()}];
    last[{l.rank(), l.stream()}] = &l;
  }
  const v1::LogLine* frontier = nullptr;
  for (const auto& [key, n] : count) {
    if (n < page_size_) continue;
    if (!frontier || store::LogLineBefore(*last[key], *frontier)) frontier = last[key];
  }

  Page page;
  page.more = frontier != nullptr;
  std::map<store::LogStreamKey, int64_t> first_held;
  for (const auto& l : *lines) {
    if (frontier && store::LogLineBefore(*frontier, l)) continue;
    const store::LogStreamKey key{l.rank(), l.stream()};
    int64_t& next = query_.from_sequence[key];
    // A marker of dropped lines stands for its whole stretch: no gap before it.
    if (store::FirstSequence(l) <= next && next <= l.sequence()) {
      page.lines.push_back(l);
      next = l.sequence() + 1;
      gap_since_.erase(key);
    } else {
      auto [it, fresh] = first_held.try_emplace(key, store::FirstSequence(l));
      if (!fresh) it->second = std::min(it->second, store::FirstSequence(l));
    }
  }
  const absl::Time now = clock_->Now();
  for (const auto& [key, held] : first_held) {
    int64_t& next = query_.from_sequence[key];
    if (held == next) {  // shown out of time order within its stream: next page
      page.more = true;
      continue;
    }
    const absl::Time since = gap_since_.try_emplace(key, now).first->second;
    if (skip_gaps || now - since >= gap_timeout_) {
      spdlog::warn(
          "logs of run {} attempt {} rank {} stream {}: lines {}..{} are missing; going on",
          query_.run_id, query_.resumption_index, key.first, key.second, next, held - 1);
      next = held;
      gap_since_.erase(key);
      page.more = true;
    } else {
      page.waiting_on_gap = true;
    }
  }
  return page;
}

}  // namespace tessera::logs
