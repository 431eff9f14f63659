#include "services/runs/run_pages.h"

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/timestamps.h"
#include "services/store/filters.h"

namespace tessera::runs {
namespace {
constexpr char kTokenVersion[] = "r1";
}  // namespace

std::string RunPageToken(const v1::Run& last) {
  return absl::WebSafeBase64Escape(
      absl::StrCat(kTokenVersion, ":", store::ToMicros(last.created_at()), ":", last.id()));
}

absl::Status ApplyRunPageToken(const std::string& token, v1::RunFilter* filter) {
  const absl::Status bad = absl::InvalidArgumentError(
      "page_token: not a token this server issued (pass next_page_token unchanged)");
  std::string raw;
  if (!absl::WebSafeBase64Unescape(token, &raw)) return bad;
  std::vector<std::string> parts = absl::StrSplit(raw, absl::MaxSplits(':', 2));
  int64_t micros = 0;
  if (parts.size() != 3 || parts[0] != kTokenVersion || !absl::SimpleAtoi(parts[1], &micros) ||
      parts[2].empty()) {
    return bad;
  }
  *filter->mutable_page_after_created_at() = ToProtoTime(absl::FromUnixMicros(micros));
  filter->set_page_after_id(parts[2]);
  return absl::OkStatus();
}

}  // namespace tessera::runs
