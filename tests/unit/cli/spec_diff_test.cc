// mcli diff run's unified diff: the fewest lines changed, hunks as diff -u writes them, and a
// stranger's control characters never reaching the terminal.
#include "cli/spec_diff.h"

#include <catch2/catch.hpp>

namespace tessera::cli {
namespace spec_diff_test {

std::string Numbered(int from, int to) {
  std::string text;
  for (int i = from; i <= to; ++i) text += "line " + std::to_string(i) + "\n";
  return text;
}

TEST_CASE("the same texts have no diff", "[cli][diff]") {
  CHECK(UnifiedDiff("a\nb\n", "a\nb\n", "x", "y").empty());
  CHECK(UnifiedDiff("", "", "x", "y").empty());
}

TEST_CASE("one changed line in the middle: three lines of context each side", "[cli][diff]") {
  std::string after = Numbered(1, 20);
  after.replace(after.find("line 10\n"), 8, "line ten\n");
  CHECK(UnifiedDiff(Numbered(1, 20), after, "a", "b") ==
        "--- a\n+++ b\n"
        "@@ -7,7 +7,7 @@\n"
        " line 7\n line 8\n line 9\n-line 10\n+line ten\n line 11\n line 12\n line 13\n");
}

TEST_CASE("changes far apart are separate hunks, near ones one hunk", "[cli][diff]") {
  std::string far = Numbered(1, 30);
  far.replace(far.find("line 2\n"), 7, "");                 // removed
  far.replace(far.find("line 25\n"), 8, "line 25\nnew\n");  // added after 25
  CHECK(UnifiedDiff(Numbered(1, 30), far, "a", "b") ==
        "--- a\n+++ b\n"
        "@@ -1,5 +1,4 @@\n line 1\n-line 2\n line 3\n line 4\n line 5\n"
        "@@ -23,6 +22,7 @@\n line 23\n line 24\n line 25\n+new\n line 26\n line 27\n line 28\n");

  std::string near = Numbered(1, 12);
  near.replace(near.find("line 3\n"), 7, "three\n");
  near.replace(near.find("line 9\n"), 7, "nine\n");  // 5 unchanged lines between: merged
  const std::string diff = UnifiedDiff(Numbered(1, 12), near, "a", "b");
  CHECK(diff.find("@@ -1,12 +1,12 @@\n") != std::string::npos);
  CHECK(diff.find("@@ -", diff.find("@@ -1,12") + 1) == std::string::npos);  // one hunk
}

TEST_CASE("lines added to an empty text, and all removed", "[cli][diff]") {
  CHECK(UnifiedDiff("", "a\nb\n", "x", "y") == "--- x\n+++ y\n@@ -0,0 +1,2 @@\n+a\n+b\n");
  CHECK(UnifiedDiff("a\n", "", "x", "y") == "--- x\n+++ y\n@@ -1 +0,0 @@\n-a\n");
}

TEST_CASE("the diff keeps the common lines: a moved line is one removed, one added",
          "[cli][diff]") {
  const auto lines = DiffLines("a\nb\nc\nd\n", "b\nc\na\nd\n");
  int removed = 0, added = 0;
  for (const auto& l : lines) {
    removed += l.op == DiffOp::kRemoved;
    added += l.op == DiffOp::kAdded;
  }
  CHECK(removed == 1);
  CHECK(added == 1);
}

TEST_CASE("control characters are shown escaped, tabs kept", "[cli][diff]") {
  const std::string diff = UnifiedDiff("cmd: a\n", "cmd: \x1b]0;pwned\x07\tb\n", "r\x1b", "s");
  CHECK(diff.find('\x1b') == std::string::npos);
  CHECK(diff.find('\x07') == std::string::npos);
  CHECK(diff.find("+cmd: \\x1b]0;pwned\\x07\tb\n") != std::string::npos);
  CHECK(diff.find("--- r\\x1b\n") == 0);
}

TEST_CASE("texts too large to compare line by line still give a correct diff", "[cli][diff]") {
  std::string a, b;
  for (int i = 0; i < 3000; ++i) {
    a += "a" + std::to_string(i) + "\n";
    b += "b" + std::to_string(i) + "\n";
  }
  const auto lines = DiffLines("head\n" + a + "tail\n", "head\n" + b + "tail\n");
  REQUIRE(lines.size() == 6002);
  CHECK(lines.front().op == DiffOp::kSame);
  CHECK(lines[1].op == DiffOp::kRemoved);
  CHECK(lines[3001].op == DiffOp::kAdded);
  CHECK(lines.back().text == "tail");
}

}  // namespace spec_diff_test
}  // namespace tessera::cli
