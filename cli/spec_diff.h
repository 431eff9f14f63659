#pragma once
// Line diffs of two texts as `diff -u` prints them: for mcli diff run, which compares two runs'
// specs as YAML.

#include <string>
#include <string_view>
#include <vector>

namespace tessera::cli {

enum class DiffOp { kSame, kRemoved, kAdded };

struct DiffLine {
  DiffOp op;
  std::string text;
};

// `before` turned into `after`, line by line: a longest common subsequence of the lines, so the
// fewest lines are shown removed and added. Texts whose differing middle part (after their
// common first and last lines) would need more than a few million comparisons show that part as
// removed, then added: still correct, less minimal.
std::vector<DiffLine> DiffLines(std::string_view before, std::string_view after);

// The unified diff: "--- before_label", "+++ after_label", then hunks ("@@ -3,7 +3,8 @@") of the
// changed lines with `context` unchanged lines around them; control characters shown as \xNN.
// Empty when the texts are the same.
std::string UnifiedDiff(std::string_view before, std::string_view after,
                        const std::string& before_label, const std::string& after_label,
                        int context = 3);

}  // namespace tessera::cli
