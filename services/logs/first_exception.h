#pragma once
// Finds the first exception in a run's output: a Python traceback ("Traceback (most recent call
// last):" through its final "XxxError: ..." line) or a C++ "terminate called ..." line (with its
// "what():" line), with a few lines of context before it from the same rank (either stream).

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tessera/v1/logs.pb.h"

namespace tessera::logs {

class ExceptionFinder {
 public:
  explicit ExceptionFinder(int context_lines = 5) : context_lines_(context_lines) {}

  // Feeds the next line, in the order lines are shown. Returns true once the first exception is
  // complete (later lines are not needed).
  bool Add(const v1::LogLine& line);
  // The exception with its context (an exception cut short by the end of the log is returned as
  // far as it goes); empty when there is none.
  std::vector<v1::LogLine> Result() const;

 private:
  enum class Kind { kNone, kPython, kCpp };
  using Key = std::pair<int32_t, int32_t>;  // (rank, stream)

  const int context_lines_;
  std::map<int32_t, std::deque<v1::LogLine>> recent_;  // by rank
  // The exception being captured (context first), its stream, and what ends it.
  Kind kind_ = Kind::kNone;
  Key key_;
  std::string prefix_;  // what the rank printed before "Traceback" on its lines ("[rank0]: ")
  std::vector<v1::LogLine> captured_;
  bool complete_ = false;
};

}  // namespace tessera::logs
