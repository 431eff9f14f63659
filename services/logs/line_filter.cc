#include "services/logs/line_filter.h"

#include <re2/re2.h>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/timestamps.h"

namespace tessera::logs {

namespace {

absl::StatusOr<absl::Time> TimeField(const char* field, const google::protobuf::Timestamp& ts) {
  if (ts.nanos() < 0 || ts.nanos() > 999'999'999) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": nanos must be 0 to 999,999,999"));
  }
  return FromProtoTime(ts);
}

}  // namespace

LineFilter::LineFilter(LineFilter&&) noexcept = default;
LineFilter& LineFilter::operator=(LineFilter&&) noexcept = default;
LineFilter::~LineFilter() = default;

absl::StatusOr<LineFilter> LineFilter::FromRequest(const v1::GetLogsRequest& req) {
  LineFilter f;
  if (req.has_since()) {
    TESSERA_ASSIGN_OR_RETURN(f.since_, TimeField("since", req.since()));
  }
  if (req.has_until()) {
    TESSERA_ASSIGN_OR_RETURN(f.until_, TimeField("until", req.until()));
  }
  if (f.since_ && f.until_ && *f.until_ <= *f.since_) {
    return absl::InvalidArgumentError("until: must be later than since");
  }
  if (!req.grep().empty()) {
    if (req.grep().size() > kMaxGrepBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("grep: at most ", kMaxGrepBytes, " bytes, not ", req.grep().size()));
    }
    RE2::Options options;
    options.set_log_errors(false);
    // Lines are bytes as the rank printed them: match bytes, not UTF-8 (invalid UTF-8 neither
    // fails nor hides a line).
    options.set_encoding(RE2::Options::EncodingLatin1);
    auto pattern = std::make_unique<RE2>(req.grep(), options);
    if (!pattern->ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("grep: not a regular expression (RE2 syntax): ", pattern->error()));
    }
    f.pattern_ = std::move(pattern);
  }
  return f;
}

bool LineFilter::Matches(const v1::LogLine& line) const {
  if (since_ || until_) {
    const absl::Time t = FromProtoTime(line.time());
    if (since_ && t < *since_) return false;
    if (until_ && t >= *until_) return false;
  }
  return pattern_ == nullptr || RE2::PartialMatch(line.text(), *pattern_);
}

}  // namespace tessera::logs
