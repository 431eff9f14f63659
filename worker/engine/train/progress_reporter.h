#pragma once
// How tessera-train tells its worker how it is doing: one JSON object per line appended to the
// file named by TESSERA_PROGRESS_FILE (the worker tails it and forwards the newest to the
// control plane). Each rank writes its own file; the worker uses the files for hang detection.

#include <cstdint>
#include <cstdio>
#include <string>

#include "absl/status/statusor.h"

namespace tessera::engine {

struct ProgressRecord {
  int64_t step = 0;
  int64_t total_steps = 0;
  double loss = 0;
  double learning_rate = 0;
  double tokens_per_second = 0;
  double mfu = 0;
  int64_t resumed_from_step = 0;
  double time = 0;  // Unix seconds
};

std::string ProgressToJsonLine(const ProgressRecord& r);
absl::StatusOr<ProgressRecord> ProgressFromJsonLine(const std::string& line);

class ProgressReporter {
 public:
  // An empty path reports nothing.
  explicit ProgressReporter(const std::string& path);
  ~ProgressReporter();
  void Report(const ProgressRecord& record);

 private:
  FILE* file_ = nullptr;
};

}  // namespace tessera::engine
