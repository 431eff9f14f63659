#include "services/logs/first_exception.h"

#include <string_view>

namespace tessera::logs {
namespace {

constexpr std::string_view kTraceback = "Traceback (most recent call last):";
constexpr std::string_view kTerminate = "terminate called";

std::string_view Trimmed(std::string_view s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

}  // namespace

bool ExceptionFinder::Add(const v1::LogLine& line) {
  if (complete_) return true;
  const Key key{line.rank(), line.stream()};
  const std::string_view text = Trimmed(line.text());
  if (kind_ != Kind::kNone) {
    if (key != key_) return false;
    if (kind_ == Kind::kCpp) {
      if (text.find("what():") != std::string_view::npos) captured_.push_back(line);
      complete_ = true;
      return true;
    }
    captured_.push_back(line);
    std::string_view body = text;
    if (body.substr(0, prefix_.size()) == prefix_) body.remove_prefix(prefix_.size());
    // The traceback's frames are indented; its first unindented line names the exception.
    if (!body.empty() && body[0] != ' ' && body[0] != '\t' && body.find(kTraceback) != 0) {
      complete_ = true;
    }
    return complete_;
  }
  auto& recent = recent_[line.rank()];
  const size_t traceback = text.find(kTraceback);
  const bool terminate = text.find(kTerminate) != std::string_view::npos;
  if (traceback != std::string_view::npos || terminate) {
    kind_ = traceback != std::string_view::npos ? Kind::kPython : Kind::kCpp;
    key_ = key;
    if (kind_ == Kind::kPython) prefix_ = std::string(text.substr(0, traceback));
    captured_.assign(recent.begin(), recent.end());
    captured_.push_back(line);
    recent_.clear();
    return false;
  }
  recent.push_back(line);
  if (static_cast<int>(recent.size()) > context_lines_) recent.pop_front();
  return false;
}

std::vector<v1::LogLine> ExceptionFinder::Result() const { return captured_; }

}  // namespace tessera::logs
