#pragma once
// Human-readable tables: a header row and aligned columns, two spaces apart, long cells cut to
// the column's limit with "...", no trailing blanks. Widths count UTF-8 code points.

#include <cstddef>
#include <iosfwd>
#include <string>
#include <vector>

namespace tessera::cli {

class Table {
 public:
  // `max_width` bounds every column's width (0: no bound); SetMaxWidth overrides it per column.
  explicit Table(std::vector<std::string> headers, size_t max_width = 48);

  void SetMaxWidth(size_t column, size_t max_width);
  // Rows with fewer cells than headers are padded with empty cells; extra cells are dropped.
  void AddRow(std::vector<std::string> cells);
  size_t rows() const { return rows_.size(); }

  // Writes the header and the rows, each line starting with `indent`.
  void Print(std::ostream& out, const std::string& indent = "") const;

 private:
  std::vector<std::string> headers_;
  std::vector<size_t> max_widths_;
  std::vector<std::vector<std::string>> rows_;
};

// `text` made inert for a terminal: every control character but newline and tab (an escape
// sequence's ESC, a bell, backspace, DEL, the C1 controls) shown as \xNN (\u00NN for C1), so that
// nothing a user stored (a run's name, an event's message, a refusal in the audit log) can move
// the cursor, recolour, retitle or clear the terminal that mcli prints it to.
std::string InertText(const std::string& text);

// Number of UTF-8 code points in `text`.
size_t DisplayWidth(const std::string& text);

// `text` cut to at most `width` code points, ending in "..." when it was cut; newlines and tabs
// become spaces so that one cell stays on one line, and other control characters are shown
// (InertText).
std::string FitCell(const std::string& text, size_t width);

// `text` fitted to `width` code points and padded with blanks to exactly that width, for lines
// printed one at a time (follow) where a whole table cannot be measured first.
std::string PadRight(const std::string& text, size_t width);

// "-" for an empty cell, `text` otherwise.
std::string OrDash(const std::string& text);

// Key/value lines ("Status:      RUNNING") with the values aligned, as describe prints them.
class Fields {
 public:
  void Add(const std::string& key, const std::string& value);
  void Print(std::ostream& out, const std::string& indent = "") const;

 private:
  std::vector<std::pair<std::string, std::string>> fields_;
};

}  // namespace tessera::cli
