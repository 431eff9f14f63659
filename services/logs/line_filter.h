#pragma once
// Which lines a GetLogs request wants beyond its attempt, ranks and tail: those printed within a
// time window (`since`, `until`) and whose text matches a regular expression (`grep`, RE2:
// linear time whatever the pattern, so a stranger's pattern cannot stall the service).

#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tessera/v1/logs.pb.h"

namespace re2 {
class RE2;
}

namespace tessera::logs {

inline constexpr size_t kMaxGrepBytes = 1024;

class LineFilter {
 public:
  // INVALID_ARGUMENT naming the field: a window that ends before it starts, a pattern too long
  // or not a regular expression.
  static absl::StatusOr<LineFilter> FromRequest(const v1::GetLogsRequest& req);

  LineFilter(LineFilter&&) noexcept;
  LineFilter& operator=(LineFilter&&) noexcept;
  ~LineFilter();

  // Whether every line passes (no window, no pattern).
  bool empty() const { return !since_ && !until_ && pattern_ == nullptr; }
  bool Matches(const v1::LogLine& line) const;
  const std::optional<absl::Time>& since() const { return since_; }

 private:
  LineFilter() = default;

  std::optional<absl::Time> since_, until_;
  std::unique_ptr<re2::RE2> pattern_;
};

}  // namespace tessera::logs
