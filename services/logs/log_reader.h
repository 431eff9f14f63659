#pragma once
// Reads one attempt's lines page by page in display order (time, then rank, stream, sequence),
// keeping per (rank, stream) the next sequence to show. Only contiguous sequences are shown: a
// line after a gap waits until the missing line is stored (its batch has not committed yet), so
// a reader never loses, skips or repeats a line. A gap that outlasts `gap_timeout` is given up
// (the line is lost for good) with a warning.
//
// A follow (Next without skip_gaps) subscribes to the store's fan-out before its first read. Once
// a read found everything stored, it takes the lines the store hands over instead of reading
// again, for as long as they join up and nothing may have been committed elsewhere
// (LogSubscription::Taken::complete); otherwise it reads.

#include <algorithm>
#include <map>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "services/store/log_store.h"

namespace tessera::logs {

class LogReader {
 public:
  // A read takes at least `page_size` lines of each stream, and more when the attempt has few
  // streams: up to 16 times `page_size` lines in all (a follower catching up with ranks that
  // print fast reads big chunks in few queries; one of a thousand ranks does not hold more).
  LogReader(std::shared_ptr<store::LogStore> store, store::LogQuery query,
            std::shared_ptr<Clock> clock, absl::Duration gap_timeout, int page_size = 2000);

  // Packed lines handed over as they were pushed (KeepPacked): the bytes of `group`'s lines
  // from the first one not shown yet.
  struct PackedSlice {
    const v1::PackedLogLines* group = nullptr;
    absl::string_view lines;
    int64_t count = 0;
    int64_t newest_micros = 0;
  };

  struct Page {
    // The lines in display order: read from the store or taken apart from the fan-out's packed
    // lines (held in `read`), or handed over by the fan-out (shared with the attempt's other
    // followers, kept alive by `held`). None is copied: a follower's copies of every line were
    // much of its time at full speed.
    std::vector<const v1::LogLine*> lines;
    std::vector<v1::LogLine> read;
    std::vector<store::LogLineBatch> held;
    // With KeepPacked, the fan-out's packed lines, in the order published, after `lines`.
    std::vector<PackedSlice> packed;
    bool empty() const { return lines.empty() && packed.empty(); }
    // More is stored now: read again before waiting.
    bool more = false;
    // Lines are stored behind a gap that is still awaited.
    bool waiting_on_gap = false;
  };
  // The next lines. `skip_gaps`: do not wait for missing lines (a one-off read).
  absl::StatusOr<Page> Next(bool skip_gaps);
  // Packed lines from the fan-out stay packed in pages (Page::packed), for a caller that sends
  // them so and filters nothing by line: taking them apart into messages was most of a
  // follower's time.
  void KeepPacked() { keep_packed_ = true; }
  // Calls `wake` when this reader's attempt has news in this process (LogSubscription::
  // WakeOnNews); nothing before the first Next(skip_gaps = false) subscribed.
  void WakeOnNews(std::function<void()> wake) {
    if (subscription_) subscription_->WakeOnNews(std::move(wake));
  }
  // For each stream with one set, the sequence of the next line to show: everything before it
  // was shown or skipped (a follow's start, LogLines.start).
  const std::map<store::LogStreamKey, int64_t>& positions() const { return query_.from_sequence; }
  // Whether the last Next was served from the fan-out, without reading the store.
  bool served_from_fanout() const { return served_from_fanout_; }

  // Starts each stream at the given sequence, or later where a start is already set: a time's
  // first chunks (LogStore::SequencesSince) and a follow's cursor (log_cursor.h) together.
  void StartAt(const std::map<store::LogStreamKey, int64_t>& next) {
    for (const auto& [key, seq] : next) {
      int64_t& from = query_.from_sequence[key];
      from = std::max(from, seq);
    }
  }
  // Continues after `shown` (the lines already shown, e.g. a tail) and, for streams with no line
  // among them, after everything stored now.
  void StartAfter(const std::vector<v1::LogLine>& shown,
                  const std::vector<store::LogStreamInfo>& streams);

 private:
  std::shared_ptr<store::LogStore> store_;
  store::LogQuery query_;
  std::shared_ptr<Clock> clock_;
  absl::Duration gap_timeout_;
  int page_size_;
  std::map<store::LogStreamKey, absl::Time> gap_since_;
  std::unique_ptr<store::LogSubscription> subscription_;
  // The last read found everything stored: the fan-out may serve the next Next.
  bool live_ = false;
  bool served_from_fanout_ = false;
  bool keep_packed_ = false;

  // The lines taken from the fan-out that come next in their streams; false when one does not
  // join up (a read must find what lies between).
  bool TakeLive(const store::LogSubscription::Taken& taken, Page& page);
  absl::StatusOr<Page> Read(bool skip_gaps);
  // How many lines of each stream the next read takes.
  int PerStreamLimit() const;
};

}  // namespace tessera::logs
