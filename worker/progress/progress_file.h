#pragma once
// How tessera-train tells its worker how it is doing: one JSON object per line appended to the
// file named by TESSERA_PROGRESS_FILE (the worker tails it and forwards the newest to the
// control plane). Each rank writes its own file; the worker uses the files for hang detection.

#include <sys/types.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "absl/status/statusor.h"

namespace tessera::progress {

// One loss rollback of the engine (a NaN or spiking loss sent every rank back to a checkpoint).
struct LossRollbackRecord {
  int number = 0;  // which of the run's rollbacks (1 for the first); 0: none
  int max = 0;     // the most the run allows
  int64_t bad_step = 0;
  int64_t checkpoint_step = 0;
  std::string reason;  // "loss nan", "loss 9.1 over 5 x the median ..."
};

struct ProgressRecord {
  int64_t step = 0;
  // A record of no step: the rank is set up (its checkpoint loaded, its peers met) and takes its
  // first step, from `step`, now. The worker's hang watch runs from here, so that a first step
  // that never ends (a GPU kernel that never returns, a first collective that never completes)
  // is a hang like any later one; silence before it is start-up, which may take any time.
  bool ready = false;
  int64_t total_steps = 0;
  double loss = 0;
  double learning_rate = 0;
  double tokens_per_second = 0;
  double mfu = 0;
  int64_t resumed_from_step = 0;
  double time = 0;  // Unix seconds
  // Seconds per step this rank spent computing (forward and backward), not waiting for the other
  // ranks: a slow node shows here while every rank's step time is the same.
  double compute_seconds = 0;
  // The newest checkpoint save's blocking seconds, and the interval between saves in steps (0:
  // none): what the control plane's checkpoint interval advice weighs.
  double checkpoint_save_seconds = 0;
  int64_t checkpoint_interval_steps = 0;
  // The newest checkpoint step the run has committed (the one it resumed from, or a later one
  // this rank committed); 0: none, or unknown. A run on fewer nodes than it asks for grows back
  // right after a new one.
  int64_t checkpoint_step = 0;
  // The run's loss rollbacks so far (through its checkpoints), and the newest this process made.
  int loss_rollbacks = 0;
  LossRollbackRecord last_rollback;
};

std::string ProgressToJsonLine(const ProgressRecord& r);
// A line a rank wrote: anything but a JSON object with an integer "step" and fields of their
// types is an error, never an exception (the rank is a stranger).
absl::StatusOr<ProgressRecord> ProgressFromJsonLine(const std::string& line);

class ProgressReporter {
 public:
  // An empty path reports nothing.
  explicit ProgressReporter(const std::string& path);
  ~ProgressReporter();
  void Report(const ProgressRecord& record);
  // Whether the rank is waiting in a collective for the other ranks, in PATH.wait ("waiting" or
  // "running"), overwritten in place: when a job hangs, the worker blames the ranks that stopped
  // outside a collective, not the ones waiting for them.
  void MarkWaiting(bool waiting);

 private:
  FILE* file_ = nullptr;
  int wait_fd_ = -1;
};

// The marker MarkWaiting writes; true when it says "waiting".
bool ReadWaitingMarker(const std::string& progress_path);

// Opens a file a rank wrote, for reading by the worker: only a regular file, never through a
// symbolic link and never blocking (a rank owns its files and may replace them with a link to
// /dev/zero, a FIFO or another user's file). -1 when it is absent or not a regular file.
int OpenRankFile(const std::string& path);

}  // namespace tessera::progress
