// Table formatting: aligned columns, truncation, no trailing blanks, UTF-8 widths.

#include "cli/table.h"

#include <catch2/catch.hpp>
#include <sstream>
#include <vector>

namespace table_test {

using tessera::cli::DisplayWidth;
using tessera::cli::Fields;
using tessera::cli::FitCell;
using tessera::cli::InertText;
using tessera::cli::PadRight;
using tessera::cli::Table;

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

TEST_CASE("table columns are aligned two blanks apart", "[cli][table]") {
  Table table({"NAME", "STATUS", "GPUS"});
  table.AddRow({"a", "RUNNING", "8"});
  table.AddRow({"much-longer-name", "QUEUED", "128"});
  std::ostringstream out;
  table.Print(out);
  const auto lines = Lines(out.str());
  REQUIRE(lines.size() == 3);
  CHECK(lines[0] == "NAME              STATUS   GPUS");
  CHECK(lines[1] == "a                 RUNNING  8");
  CHECK(lines[2] == "much-longer-name  QUEUED   128");
}

TEST_CASE("table lines have no trailing blanks and keep the indent", "[cli][table]") {
  Table table({"A", "B"});
  table.AddRow({"long value", ""});
  std::ostringstream out;
  table.Print(out, "  ");
  const auto lines = Lines(out.str());
  REQUIRE(lines.size() == 2);
  CHECK(lines[0] == "  A           B");
  CHECK(lines[1] == "  long value");
}

TEST_CASE("table cells over the limit are cut with dots", "[cli][table]") {
  Table table({"NAME", "REASON"}, 10);
  table.SetMaxWidth(0, 0);  // unbounded
  table.AddRow({"a-name-longer-than-ten", "a reason longer than ten"});
  std::ostringstream out;
  table.Print(out);
  const auto lines = Lines(out.str());
  REQUIRE(lines.size() == 2);
  CHECK(lines[1] == "a-name-longer-than-ten  a reaso...");
}

TEST_CASE("short rows are padded and long rows cut to the header", "[cli][table]") {
  Table table({"A", "B", "C"});
  table.AddRow({"1"});
  table.AddRow({"1", "2", "3", "4"});
  CHECK(table.rows() == 2);
  std::ostringstream out;
  table.Print(out);
  const auto lines = Lines(out.str());
  CHECK(lines[1] == "1");
  CHECK(lines[2] == "1  2  3");
}

TEST_CASE("widths count UTF-8 code points", "[cli][table]") {
  CHECK(DisplayWidth("abc") == 3);
  CHECK(DisplayWidth("h\xC3\xA9llo") == 5);  // héllo
  Table table({"X", "Y"});
  table.AddRow({"h\xC3\xA9llo", "1"});
  table.AddRow({"hello", "2"});
  std::ostringstream out;
  table.Print(out);
  const auto lines = Lines(out.str());
  CHECK(lines[1] == "h\xC3\xA9llo  1");
  CHECK(lines[2] == "hello  2");
  // Cutting never splits a multi-byte character.
  CHECK(FitCell("\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9", 4) == "\xC3\xA9...");
}

TEST_CASE("cells stay on one line", "[cli][table]") {
  CHECK(FitCell("line one\nline\ttwo", 0) == "line one line two");
  // What a user stored cannot drive the terminal: ESC, BEL, backspace, DEL and C1 controls
  // are shown, not sent.
  CHECK(FitCell("run\x1b]0;pwned\x07\x1b[2J\b\x7f\xc2\x9b", 0) ==
        "run\\x1b]0;pwned\\x07\\x1b[2J\\x08\\x7f\\u009b");
  CHECK(InertText("two\nlines \xC3\xA9") == "two\nlines \xC3\xA9");  // text, UTF-8 kept
  CHECK(FitCell("abcdef", 3) == "abc");
  CHECK(FitCell("abcdef", 6) == "abcdef");
  CHECK(PadRight("ab", 4) == "ab  ");
  CHECK(PadRight("abcdefgh", 6) == "abc...");
}

TEST_CASE("fields align their values", "[cli][table]") {
  Fields fields;
  fields.Add("Run", "train-1");
  fields.Add("Status", "RUNNING");
  fields.Add("Empty", "");
  std::ostringstream out;
  fields.Print(out, "  ");
  const auto lines = Lines(out.str());
  REQUIRE(lines.size() == 3);
  CHECK(lines[0] == "  Run:     train-1");
  CHECK(lines[1] == "  Status:  RUNNING");
  CHECK(lines[2] == "  Empty:");
}

}  // namespace table_test
