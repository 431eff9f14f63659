#pragma once
// Which of one caller's refusals the audit log writes one by one. Every refused attempt of an
// audited method is recorded, and a caller looping past its rate (a client retrying at once, a
// user flooding submits) would turn each of thousands of refusals a second into a record built
// (the request as JSON) and a database write, and grow the audit table as fast. So per caller (user
// and key), method and status code, the first refusal of each window is written in full, and the
// others in that window are only counted; the count is written as one record of its own
// (RefusalTally::Folded) when the window is over: with the next refusal of that kind, or when the
// audit log flushes. Nothing is hidden: every refusal is in a record or a count, and the records of
// a caller's refusals are bounded by one per window and kind.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "tessera/v1/admin.pb.h"

namespace tessera::auth {

class RefusalTally {
 public:
  // window <= 0: every refusal is written.
  explicit RefusalTally(absl::Duration window);

  // Refusals counted and not written one by one: `count` like `example` (the record written at the
  // window's start) from `since` to `until`.
  struct Folded {
    v1::AuditRecord example;
    int64_t count = 0;
    absl::Time since, until;
  };

  // Whether a refusal of `kind` (who, method and code) at `now` is written: the record to write
  // (made by `make`, which is called only then, and kept as its window's example), or nothing
  // when it is only counted. `due` receives the count folded in the kind's window before, if any.
  template <typename Make>
  std::optional<v1::AuditRecord> Admit(const std::string& kind, absl::Time now, Make make,
                                       std::vector<Folded>* due) {
    if (window_ <= absl::ZeroDuration()) return make();
    absl::MutexLock lock(&mu_);
    auto [it, fresh] = kinds_.try_emplace(kind);
    Window& w = it->second;
    if (!fresh && now < w.start + window_) {
      if (w.folded.count++ == 0) w.folded.since = now;
      w.folded.until = now;
      return std::nullopt;
    }
    if (w.folded.count > 0) due->push_back(std::move(w.folded));
    w.start = now;
    w.folded = {};
    w.folded.example = make();
    return w.folded.example;
  }

  // The counts of windows over by `now` (every window's with InfiniteFuture), taken: each is
  // written once. Kinds whose windows are over are forgotten, so the map holds only the kinds
  // refused in the last window.
  std::vector<Folded> TakeDue(absl::Time now);

 private:
  struct Window {
    absl::Time start;
    Folded folded;
  };
  const absl::Duration window_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Window> kinds_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera::auth
