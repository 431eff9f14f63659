#include "services/logs/log_reader.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>
#include <tuple>

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
  served_from_fanout_ = false;
  if (skip_gaps) {
    live_ = false;
    return Read(skip_gaps);
  }
  if (!subscription_) {
    subscription_ = store_->SubscribeLogs(query_.run_id, query_.resumption_index);
  }
  // Taken before any read, so that a line committed after it is either read or taken next time.
  const store::LogSubscription::Taken taken = subscription_->Take();
  if (live_ && taken.complete) {
    served_from_fanout_ = true;
    Page page;
    if (TakeLive(taken, page)) return page;
    page.more = true;  // the rest from the store, now
    live_ = false;
    return page;
  }
  auto page = Read(skip_gaps);
  live_ = page.ok() && !page->more && !page->waiting_on_gap;
  return page;
}

bool LogReader::TakeLive(const store::LogSubscription::Taken& taken, Page& page) {
  bool joined = true;
  for (const auto& batch : taken.batches) {
    for (const auto& l : *batch) {
      if ((query_.rank && l.rank() != *query_.rank) ||
          (query_.node_rank && l.node_rank() != *query_.node_rank)) {
        continue;
      }
      int64_t& next = query_.from_sequence[{l.rank(), l.stream()}];
      if (l.sequence() < next) continue;  // read already
      if (store::FirstSequence(l) <= next) {
        page.lines.push_back(l);
        next = l.sequence() + 1;
      } else {
        joined = false;  // this stream's later lines are beyond the gap too: left to the read
      }
    }
  }
  // In display order, as a read gives them, but never a stream's line before an earlier one of
  // the same stream: each line sorts at the latest time of its stream so far.
  struct Slot {
    int64_t at;
    size_t index;
  };
  std::vector<Slot> order;
  order.reserve(page.lines.size());
  std::map<store::LogStreamKey, int64_t> latest;
  for (size_t i = 0; i < page.lines.size(); ++i) {
    const v1::LogLine& l = page.lines[i];
    const int64_t at = l.time().seconds() * 1'000'000'000 + l.time().nanos();
    auto [it, fresh] = latest.try_emplace({l.rank(), l.stream()}, at);
    if (!fresh) it->second = std::max(it->second, at);
    order.push_back({it->second, i});
  }
  std::stable_sort(order.begin(), order.end(), [&](const Slot& a, const Slot& b) {
    const v1::LogLine &x = page.lines[a.index], &y = page.lines[b.index];
    return std::make_tuple(a.at, x.rank(), x.stream()) <
           std::make_tuple(b.at, y.rank(), y.stream());
  });
  std::vector<v1::LogLine> sorted;
  sorted.reserve(page.lines.size());
  for (const Slot& s : order) sorted.push_back(std::move(page.lines[s.index]));
  page.lines = std::move(sorted);
  return joined;
}

int LogReader::PerStreamLimit() const {
  // The attempt's streams are counted (a small query) rather than taken from the last read: a
  // rank that starts printing late must not make a page of many streams hold 16 times the lines.
  auto streams = store_->ListLogStreams(query_.run_id, query_.resumption_index);
  if (!streams.ok() || streams->empty()) return page_size_;
  // At most 16 pages (one stream); never under a page of each.
  const int64_t share = int64_t{16} * page_size_ / static_cast<int64_t>(streams->size());
  return static_cast<int>(std::max<int64_t>(share, page_size_));
}

absl::StatusOr<LogReader::Page> LogReader::Read(bool skip_gaps) {
  store::LogQuery q = query_;
  const int per_stream = PerStreamLimit();
  q.limit_per_stream = per_stream;
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
    if (n < per_stream) continue;
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
