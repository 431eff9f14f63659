#include "cli/spec_diff.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"

namespace tessera::cli {
namespace {

// The most cells of the LCS table (lines of the middle part, before × after) computed.
constexpr std::size_t kMaxTableCells = 4'000'000;

std::vector<std::string_view> Lines(std::string_view text) {
  std::vector<std::string_view> lines;
  if (text.empty()) return lines;
  if (text.back() == '\n') text.remove_suffix(1);
  for (std::size_t start = 0;;) {
    const std::size_t end = text.find('\n', start);
    lines.push_back(text.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) return lines;
    start = end + 1;
  }
}

// The middle part's diff by a longest common subsequence (lengths of the suffixes' LCS).
void DiffMiddle(const std::vector<std::string_view>& a, std::size_t a0, std::size_t a1,
                const std::vector<std::string_view>& b, std::size_t b0, std::size_t b1,
                std::vector<DiffLine>& out) {
  const std::size_t n = a1 - a0, m = b1 - b0;
  if (n == 0 || m == 0 || n * m > kMaxTableCells) {
    for (std::size_t i = a0; i < a1; ++i) out.push_back({DiffOp::kRemoved, std::string(a[i])});
    for (std::size_t j = b0; j < b1; ++j) out.push_back({DiffOp::kAdded, std::string(b[j])});
    return;
  }
  std::vector<std::uint32_t> lcs((n + 1) * (m + 1), 0);
  const auto at = [&](std::size_t i, std::size_t j) -> std::uint32_t& {
    return lcs[i * (m + 1) + j];
  };
  for (std::size_t i = n; i-- > 0;) {
    for (std::size_t j = m; j-- > 0;) {
      at(i, j) =
          a[a0 + i] == b[b0 + j] ? at(i + 1, j + 1) + 1 : std::max(at(i + 1, j), at(i, j + 1));
    }
  }
  std::size_t i = 0, j = 0;
  while (i < n && j < m) {
    if (a[a0 + i] == b[b0 + j]) {
      out.push_back({DiffOp::kSame, std::string(a[a0 + i])});
      ++i;
      ++j;
    } else if (at(i + 1, j) >= at(i, j + 1)) {
      out.push_back({DiffOp::kRemoved, std::string(a[a0 + i++])});
    } else {
      out.push_back({DiffOp::kAdded, std::string(b[b0 + j++])});
    }
  }
  for (; i < n; ++i) out.push_back({DiffOp::kRemoved, std::string(a[a0 + i])});
  for (; j < m; ++j) out.push_back({DiffOp::kAdded, std::string(b[b0 + j])});
}

// A line as shown: control characters (a spec's text is a stranger's: escape sequences could
// rewrite the terminal) as \xNN, tabs kept.
std::string Shown(std::string_view line) {
  std::string out;
  out.reserve(line.size());
  for (const char c : line) {
    const auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\t') || u == 0x7f) {
      absl::StrAppend(&out, "\\x", absl::Hex(u, absl::kZeroPad2));
    } else {
      out.push_back(c);
    }
  }
  return out;
}

// "start,count" of a hunk's side, as diff -u writes it (a side without lines starts before).
std::string Range(std::size_t first, std::size_t count) {
  if (count == 0) return absl::StrCat(first, ",0");
  if (count == 1) return absl::StrCat(first + 1);
  return absl::StrCat(first + 1, ",", count);
}

}  // namespace

std::vector<DiffLine> DiffLines(std::string_view before, std::string_view after) {
  const std::vector<std::string_view> a = Lines(before), b = Lines(after);
  std::size_t prefix = 0;
  while (prefix < a.size() && prefix < b.size() && a[prefix] == b[prefix]) ++prefix;
  std::size_t suffix = 0;
  while (suffix < a.size() - prefix && suffix < b.size() - prefix &&
         a[a.size() - 1 - suffix] == b[b.size() - 1 - suffix]) {
    ++suffix;
  }
  std::vector<DiffLine> out;
  for (std::size_t i = 0; i < prefix; ++i) out.push_back({DiffOp::kSame, std::string(a[i])});
  DiffMiddle(a, prefix, a.size() - suffix, b, prefix, b.size() - suffix, out);
  for (std::size_t i = a.size() - suffix; i < a.size(); ++i) {
    out.push_back({DiffOp::kSame, std::string(a[i])});
  }
  return out;
}

std::string UnifiedDiff(std::string_view before, std::string_view after,
                        const std::string& before_label, const std::string& after_label,
                        int context) {
  const std::vector<DiffLine> lines = DiffLines(before, after);
  const auto changed = [&](std::size_t k) { return lines[k].op != DiffOp::kSame; };
  const std::size_t ctx = static_cast<std::size_t>(std::max(context, 0));
  std::string out;
  std::size_t k = 0, hunk_end = 0;
  // Line numbers (0-based) on each side of lines[k].
  std::size_t line_a = 0, line_b = 0;
  while (k < lines.size()) {
    if (!changed(k)) {
      ++k;
      ++line_a;
      ++line_b;
      continue;
    }
    if (out.empty()) {
      out = absl::StrCat("--- ", Shown(before_label), "\n+++ ", Shown(after_label), "\n");
    }
    // A hunk: `ctx` unchanged lines before the change (not those of the hunk before), then on
    // until more than `2 * ctx` unchanged lines in a row (or the end) separate it from the next
    // change, keeping `ctx` of them.
    const std::size_t back = std::min(ctx, k - hunk_end);
    const std::size_t start = k - back;
    const std::size_t first_a = line_a - back, first_b = line_b - back;
    std::size_t end = k, same_run = 0;
    while (end < lines.size() && (changed(end) || same_run < 2 * ctx)) {
      same_run = changed(end) ? 0 : same_run + 1;
      ++end;
    }
    while (end > k && !changed(end - 1) && same_run > ctx) {
      --end;
      --same_run;
    }
    std::string body;
    std::size_t count_a = 0, count_b = 0;
    for (std::size_t i = start; i < end; ++i) {
      const char* mark = " ";
      if (lines[i].op != DiffOp::kAdded) ++count_a;
      if (lines[i].op != DiffOp::kRemoved) ++count_b;
      if (lines[i].op == DiffOp::kRemoved) mark = "-";
      if (lines[i].op == DiffOp::kAdded) mark = "+";
      absl::StrAppend(&body, mark, Shown(lines[i].text), "\n");
    }
    absl::StrAppend(&out, "@@ -", Range(first_a, count_a), " +", Range(first_b, count_b), " @@\n",
                    body);
    line_a = first_a + count_a;
    line_b = first_b + count_b;
    k = hunk_end = end;
  }
  return out;
}

}  // namespace tessera::cli
