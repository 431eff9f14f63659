#include "base/byte_size.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace tessera {

absl::StatusOr<int64_t> ParseByteSize(const std::string& text) {
  std::string t = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  struct Unit {
    const char* suffix;
    int64_t factor;
  };
  static constexpr Unit kUnits[] = {{"gib", 1LL << 30}, {"mib", 1LL << 20},
                                    {"kib", 1LL << 10}, {"gb", 1000000000},
                                    {"mb", 1000000},    {"kb", 1000},
                                    {"g", 1LL << 30},   {"m", 1LL << 20},
                                    {"k", 1LL << 10},   {"b", 1}};
  int64_t factor = 1;
  for (const auto& u : kUnits) {
    const std::string suffix = u.suffix;
    if (t.size() > suffix.size() &&
        t.compare(t.size() - suffix.size(), suffix.size(), suffix) == 0) {
      factor = u.factor;
      t = t.substr(0, t.size() - suffix.size());
      break;
    }
  }
  int64_t n = 0;
  if (!absl::SimpleAtoi(t, &n) || n <= 0 || n > (int64_t{1} << 40) / factor) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", text, "\" is not a size (like 4096, 64MiB or 1GiB)"));
  }
  return n * factor;
}

absl::StatusOr<std::vector<int64_t>> ParseByteSizes(const std::string& text) {
  std::vector<int64_t> sizes;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    auto size = ParseByteSize(std::string(part));
    if (!size.ok()) return size.status();
    sizes.push_back(*size);
  }
  if (sizes.empty()) return absl::InvalidArgumentError("no sizes given");
  return sizes;
}

std::string FormatByteSize(int64_t bytes) {
  static constexpr std::pair<const char*, int64_t> kUnits[] = {
      {"TiB", int64_t{1} << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}};
  for (const auto& [suffix, factor] : kUnits) {
    if (bytes != 0 && bytes % factor == 0) return absl::StrCat(bytes / factor, suffix);
  }
  return absl::StrCat(bytes, "B");
}

}  // namespace tessera
