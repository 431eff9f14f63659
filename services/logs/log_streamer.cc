#include "services/logs/log_streamer.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <deque>

#include "base/timestamps.h"
#include "proto/policy/run_status.h"
#include "services/logs/log_handler.h"

namespace tessera::logs {

LogStreamer::LogStreamer(LogHandler& handler, const v1::GetLogsRequest& req, LineFilter filter,
                         std::optional<LogCursorPositions> resume, LogTarget target, LogSinks sinks)
    : h_(handler),
      req_(req),
      filter_(std::move(filter)),
      resume_(std::move(resume)),
      t_(std::move(target)),
      sinks_(std::move(sinks)),
      reader_(h_.logs_, t_.query, h_.clock_, h_.options_.gap_timeout) {}

LogStreamer::~LogStreamer() {
  if (following_) h_.followers_->Decrement();
}

StreamStep LogStreamer::Step(const std::function<bool()>& done) {
  switch (phase_) {
    case Phase::kBegin:
      return Begin(done);
    case Phase::kReadAll:
      return ReadAll();
    case Phase::kFollow:
      return FollowOnce();
  }
  return StreamStep::End(absl::InternalError("a log read in no phase"));
}

StreamStep LogStreamer::Begin(const std::function<bool()>& done) {
  if (req_.first_exception()) return StreamStep::End(h_.SendFirstException(t_, sinks_.send));
  // From a time: each stream starts at its first chunk then, not at line 0.
  if (filter_.since()) {
    auto starts = h_.logs_->SequencesSince(t_.query.run_id, t_.resumption, *filter_.since());
    if (!starts.ok()) return StreamStep::End(starts.status());
    reader_.StartAt(*starts);
  }
  if (resume_) reader_.StartAt(*resume_);
  if (req_.tail() > 0 && filter_.empty()) {
    auto tail = h_.logs_->TailLogs(t_.query, req_.tail());
    if (!tail.ok()) return StreamStep::End(tail.status());
    if (req_.follow()) {
      auto streams = h_.logs_->ListLogStreams(t_.query.run_id, t_.resumption);
      if (!streams.ok()) return StreamStep::End(streams.status());
      reader_.StartAfter(*tail, *streams);
    }
    for (const auto& l : *tail) {
      if (!Send(l)) return StreamStep::End(absl::OkStatus());
    }
    if (!req_.follow()) return StreamStep::End(absl::OkStatus());
  } else if (req_.tail() > 0) {
    // The last lines that pass the filter: the attempt is read page by page, keeping only the
    // last `tail` of them (never the whole log in memory); a follow goes on from there.
    std::deque<v1::LogLine> last;
    while (!done()) {
      auto page = reader_.Next(/*skip_gaps=*/true);
      if (!page.ok()) return StreamStep::End(page.status());
      for (const v1::LogLine* l : page->lines) {
        if (!filter_.Matches(*l)) continue;
        last.push_back(*l);
        if (static_cast<int>(last.size()) > req_.tail()) last.pop_front();
      }
      if (page->lines.empty() && !page->more) break;
    }
    for (const auto& l : last) {
      if (!sinks_.send(l)) return StreamStep::End(absl::OkStatus());
    }
    if (!req_.follow()) return StreamStep::End(absl::OkStatus());
  } else if (!req_.follow()) {
    phase_ = Phase::kReadAll;
    return StreamStep::Again();
  }
  if (sinks_.send_start && !resume_ && !reader_.positions().empty()) {
    if (!sinks_.send_start(MakeLogCursor(t_.resumption, reader_.positions()))) {
      return StreamStep::End(absl::OkStatus());
    }
  }
  if (sinks_.send_packed && filter_.empty()) reader_.KeepPacked();
  phase_ = Phase::kFollow;
  following_ = true;
  h_.followers_->Increment();
  return StreamStep::Again();
}

StreamStep LogStreamer::ReadAll() {
  auto page = reader_.Next(/*skip_gaps=*/true);
  if (!page.ok()) return StreamStep::End(page.status());
  for (const v1::LogLine* l : page->lines) {
    if (!Send(*l)) return StreamStep::End(absl::OkStatus());
  }
  if (page->lines.empty() && !page->more) return StreamStep::End(absl::OkStatus());
  return StreamStep::Again();
}

StreamStep LogStreamer::FollowOnce() {
  const uint64_t seen = news_wakes_ ? h_.changes_->ForeignGeneration(store::ChangeTopic::kLogs)
                                    : h_.changes_->Generation(store::ChangeTopic::kLogs);
  auto page = reader_.Next(/*skip_gaps=*/false);
  if (!page.ok()) {
    if (!absl::IsUnavailable(page.status())) return StreamStep::End(page.status());
    spdlog::warn("following {}: {}", t_.what, std::string(page.status().message()));
  } else {
    absl::Time newest = absl::InfinitePast();
    for (const v1::LogLine* l : page->lines) {
      newest = std::max(newest, FromProtoTime(l->time()));
      if (!Send(*l)) return StreamStep::End(absl::OkStatus());
    }
    for (const LogReader::PackedSlice& slice : page->packed) {  // only with KeepPacked
      newest = std::max(newest, absl::FromUnixMicros(slice.newest_micros));
      if (!sinks_.send_packed(*slice.group, slice.lines, slice.count)) {
        return StreamStep::End(absl::OkStatus());
      }
    }
    // What `send` gathered goes out whenever nothing more is at hand, before any wait.
    if (!page->more && !Flushed()) return StreamStep::End(absl::OkStatus());
    if (!ended_at_ && !page->empty()) {
      h_.follower_lag_->Observe(std::max(0.0, absl::ToDoubleSeconds(h_.clock_->Now() - newest)));
    }
    if (!page->empty()) {
      last_line_at_ = h_.clock_->Now();
      return StreamStep::Again();
    }
  }
  if (!Flushed()) return StreamStep::End(absl::OkStatus());
  const absl::Time now = h_.clock_->Now();
  if (!ended_at_ && now - last_check_ >= h_.options_.run_check_interval) {
    last_check_ = now;
    auto desc = h_.run_checks_.DescribeRun(t_.run_name);
    if (absl::IsNotFound(desc.status()))
      return StreamStep::End(desc.status());  // deleted meanwhile
    if (!desc.ok()) {
      spdlog::warn("following {}: {}", t_.what, std::string(desc.status().message()));
    } else if (IsTerminal(desc->run().status()) || desc->run().resumption_index() > t_.resumption) {
      ended_at_ = now;
      for (const auto& a : desc->attempts()) {
        if (a.resumption_index() == t_.resumption && a.has_ended_at()) {
          ended_at_ = std::min(now, FromProtoTime(a.ended_at()));
        }
      }
    }
  }
  if (ended_at_ && page.ok() && !page->more && !page->waiting_on_gap &&
      now - std::max(*ended_at_, last_line_at_) >= h_.options_.end_grace) {
    return StreamStep::End(absl::OkStatus());
  }
  // A feed that hears every commit wakes the follow for new lines: it only has to look again for
  // its run check. A feed that may miss commits (its listener reconnecting), and the end grace,
  // want the poll interval.
  const absl::Duration pause =
      ended_at_ || !h_.changes_->live()
          ? h_.options_.poll_interval
          : std::max(h_.options_.poll_interval, h_.options_.run_check_interval);
  return StreamStep::WaitFor(seen, now + pause);
}

}  // namespace tessera::logs
