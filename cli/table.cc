#include "cli/table.h"

#include <algorithm>
#include <ostream>

#include "absl/strings/str_format.h"

namespace tessera::cli {
namespace {

bool IsContinuationByte(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

std::string OneLine(const std::string& text) {
  std::string line = text;
  std::replace_if(
      line.begin(), line.end(), [](char c) { return c == '\n' || c == '\r' || c == '\t'; }, ' ');
  return InertText(line);
}

// The byte offset just past the first `count` code points of `text`.
size_t PrefixBytes(const std::string& text, size_t count) {
  size_t seen = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (!IsContinuationByte(text[i])) {
      if (seen == count) return i;
      ++seen;
    }
  }
  return text.size();
}

}  // namespace

std::string InertText(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    const auto next = i + 1 < text.size() ? static_cast<unsigned char>(text[i + 1]) : 0;
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) {
      out += absl::StrFormat("\\x%02x", c);
    } else if (c == 0xc2 && next >= 0x80 && next <= 0x9f) {  // U+0080..U+009F, as UTF-8
      out += absl::StrFormat("\\u%04x", next);
      ++i;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

size_t DisplayWidth(const std::string& text) {
  return static_cast<size_t>(
      std::count_if(text.begin(), text.end(), [](char c) { return !IsContinuationByte(c); }));
}

std::string FitCell(const std::string& text, size_t width) {
  std::string line = OneLine(text);
  if (width == 0 || DisplayWidth(line) <= width) return line;
  if (width <= 3) return line.substr(0, PrefixBytes(line, width));
  return line.substr(0, PrefixBytes(line, width - 3)) + "...";
}

std::string OrDash(const std::string& text) { return text.empty() ? "-" : text; }

std::string PadRight(const std::string& text, size_t width) {
  std::string cell = FitCell(text, width);
  return cell + std::string(width - std::min(width, DisplayWidth(cell)), ' ');
}

Table::Table(std::vector<std::string> headers, size_t max_width)
    : headers_(std::move(headers)), max_widths_(headers_.size(), max_width) {}

void Table::SetMaxWidth(size_t column, size_t max_width) {
  if (column < max_widths_.size()) max_widths_[column] = max_width;
}

void Table::AddRow(std::vector<std::string> cells) {
  cells.resize(headers_.size());
  rows_.push_back(std::move(cells));
}

void Table::Print(std::ostream& out, const std::string& indent) const {
  std::vector<std::vector<std::string>> lines;
  lines.reserve(rows_.size() + 1);
  lines.push_back(headers_);
  for (const auto& row : rows_) {
    std::vector<std::string> fitted;
    for (size_t i = 0; i < row.size(); ++i) fitted.push_back(FitCell(row[i], max_widths_[i]));
    lines.push_back(std::move(fitted));
  }
  std::vector<size_t> widths(headers_.size(), 0);
  for (const auto& line : lines) {
    for (size_t i = 0; i < line.size(); ++i) widths[i] = std::max(widths[i], DisplayWidth(line[i]));
  }
  for (const auto& line : lines) {
    std::string text = indent;
    for (size_t i = 0; i < line.size(); ++i) {
      text += line[i];
      if (i + 1 < line.size()) text += std::string(widths[i] - DisplayWidth(line[i]) + 2, ' ');
    }
    while (text.size() > indent.size() && text.back() == ' ') text.pop_back();
    out << text << "\n";
  }
}

void Fields::Add(const std::string& key, const std::string& value) {
  fields_.emplace_back(key, value);
}

void Fields::Print(std::ostream& out, const std::string& indent) const {
  size_t width = 0;
  for (const auto& [key, value] : fields_) width = std::max(width, DisplayWidth(key) + 1);
  for (const auto& [key, value] : fields_) {
    std::string line = indent + InertText(key) + ":";
    if (!value.empty()) {
      line += std::string(width - DisplayWidth(key) - 1 + 2, ' ') + InertText(value);
    }
    out << line << "\n";
  }
}

}  // namespace tessera::cli
