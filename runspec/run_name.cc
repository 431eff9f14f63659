#include "runspec/run_name.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "runspec/spec_limits.h"

namespace tessera::spec {
namespace {

bool IsNameChar(char c) {
  const auto u = static_cast<unsigned char>(c);
  return absl::ascii_islower(u) || absl::ascii_isdigit(u) || c == '-';
}

bool IsLetterOrDigit(char c) {
  const auto u = static_cast<unsigned char>(c);
  return absl::ascii_islower(u) || absl::ascii_isdigit(u);
}

// Code points of UTF-8 text (bytes that do not continue a sequence).
std::size_t CodePoints(std::string_view text) {
  return static_cast<std::size_t>(std::count_if(text.begin(), text.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  }));
}

// mcli's ends rule: a '1' in front when the first character is not a letter or digit (dropping
// the last, so the length stays), and a '1' in place of a last character that is not one.
void FixEnds(std::string& name) {
  if (name.empty()) return;
  if (!IsLetterOrDigit(name.front())) {
    name.insert(name.begin(), '1');
    name.pop_back();
  }
  if (!IsLetterOrDigit(name.back())) name.back() = '1';
}

}  // namespace

bool IsValidRunName(std::string_view name) {
  return !name.empty() && name.size() <= kMaxRunNameLength &&
         std::all_of(name.begin(), name.end(), IsNameChar) && IsLetterOrDigit(name.front()) &&
         IsLetterOrDigit(name.back());
}

std::string NormalizeRunName(std::string_view name) {
  if (IsValidRunName(name)) return std::string(name);
  const std::size_t length = CodePoints(name);
  if (length == 0 || length > kMaxMcliRunNameLength) return std::string(name);
  std::string out;
  out.reserve(length);
  for (char c : name) {
    const auto u = static_cast<unsigned char>(c);
    if ((u & 0xC0) == 0x80) continue;  // the rest of a character already written as '-'
    const char lower = absl::ascii_tolower(u);
    out += u < 0x80 && IsNameChar(lower) ? lower : '-';
  }
  FixEnds(out);
  if (out.size() > kMaxRunNameLength) {
    out.resize(kMaxRunNameLength);
    FixEnds(out);
  }
  return out;
}

}  // namespace tessera::spec
