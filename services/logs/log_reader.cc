#include "services/logs/log_reader.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>
#include <tuple>

#include "proto/policy/packed_log_lines.h"

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
  page.held = taken.batches;
  const auto wanted = [&](int32_t rank, int32_t node_rank) {
    return (!query_.rank || rank == *query_.rank) &&
           (!query_.node_rank || node_rank == *query_.node_rank);
  };
  // Packed lines are unpacked here, on the follower's thread; first all of them, so that the
  // lines in `read` stay where they are once pointed to.
  std::vector<std::pair<size_t, size_t>> unpacked;  // per batch: its range in page.read
  for (const auto& batch : taken.batches) {
    const size_t begin = page.read.size();
    for (const auto& group : batch->packed) {
      if (keep_packed_ || !wanted(group.rank(), group.node_rank())) continue;
      if (absl::Status st = UnpackLines(group, page.read); !st.ok()) {
        // Checked when it was pushed: not expected. The store has the lines.
        spdlog::warn("logs of run {} attempt {}: {}", query_.run_id, query_.resumption_index,
                     st.ToString());
        joined = false;
      }
    }
    unpacked.emplace_back(begin, page.read.size());
  }
  // Lines come in runs of one stream: its next sequence is looked up once per run. (No stream
  // has a negative rank.)
  store::LogStreamKey last_key{-1, -1};
  int64_t* next = nullptr;
  const auto take = [&](const v1::LogLine& l) {
    const store::LogStreamKey key{l.rank(), l.stream()};
    if (key != last_key) {
      next = &query_.from_sequence[key];  // a map's values stay where they are
      last_key = key;
    }
    if (l.sequence() < *next) return;  // read already
    if (store::FirstSequence(l) <= *next) {
      page.lines.push_back(&l);
      *next = l.sequence() + 1;
    } else {
      joined = false;  // this stream's later lines are beyond the gap too: left to the read
    }
  };
  // A packed group kept packed: the slice of its lines from the first not shown, up to any gap.
  const auto take_packed = [&](const v1::PackedLogLines& group) {
    int64_t& next = query_.from_sequence[{group.rank(), group.stream()}];
    last_key = {-1, -1};
    const absl::string_view bytes = group.lines();
    PackedSlice slice;
    slice.group = &group;
    size_t begin = std::string::npos, end = 0;
    ChunkLine l;
    for (size_t at = 0; at < bytes.size();) {
      const size_t after = ReadChunkLine(bytes, at, l);
      if (after == 0) {  // checked when it was pushed: not expected; the store has the lines
        joined = false;
        break;
      }
      if (l.sequence < next && begin != std::string::npos) {
        joined = false;  // out of order within the group (no worker sends that): read instead
        break;
      }
      if (l.sequence >= next) {
        const int64_t first = l.dropped > 1 ? l.sequence - l.dropped + 1 : l.sequence;
        if (first > next) {
          joined = false;  // beyond a gap, and so is the rest of the group: left to the read
          break;
        }
        if (begin == std::string::npos) begin = at;
        end = after;
        next = l.sequence + 1;
        ++slice.count;
        slice.newest_micros = std::max(slice.newest_micros, l.micros);
      }
      at = after;
    }
    if (slice.count == 0) return;
    slice.lines = bytes.substr(begin, end - begin);
    page.packed.push_back(slice);
  };
  for (size_t b = 0; b < taken.batches.size(); ++b) {
    for (const auto& l : taken.batches[b]->lines) {
      if (wanted(l.rank(), l.node_rank())) take(l);
    }
    if (keep_packed_) {
      for (const auto& group : taken.batches[b]->packed) {
        if (wanted(group.rank(), group.node_rank())) take_packed(group);
      }
    }
    for (size_t i = unpacked[b].first; i < unpacked[b].second; ++i) take(page.read[i]);
  }
  // In display order, as a read gives them, but never a stream's line before an earlier one of
  // the same stream: each line sorts at the latest time of its stream so far.
  struct Slot {
    int64_t at;
    int32_t rank;
    int32_t stream;
    const v1::LogLine* line;
  };
  std::vector<Slot> order;
  order.reserve(page.lines.size());
  last_key = {-1, -1};
  std::map<store::LogStreamKey, int64_t> latest;
  int64_t* stream_latest = nullptr;
  for (const v1::LogLine* l : page.lines) {
    const int64_t at = l->time().seconds() * 1'000'000'000 + l->time().nanos();
    const store::LogStreamKey key{l->rank(), l->stream()};
    if (key != last_key) {
      stream_latest = &latest.try_emplace(key, at).first->second;
      last_key = key;
    }
    *stream_latest = std::max(*stream_latest, at);
    order.push_back({*stream_latest, l->rank(), l->stream(), l});
  }
  std::stable_sort(order.begin(), order.end(), [](const Slot& a, const Slot& b) {
    return std::tie(a.at, a.rank, a.stream) < std::tie(b.at, b.rank, b.stream);
  });
  for (size_t i = 0; i < order.size(); ++i) page.lines[i] = order[i].line;
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
      page.lines.push_back(&l);  // in `read` below (a vector's move keeps its elements' places)
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
  page.read = std::move(*lines);
  return page;
}

}  // namespace tessera::logs
