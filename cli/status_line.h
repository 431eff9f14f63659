#pragma once
// A line of status kept under what a command prints. On a terminal it is redrawn in place
// ("\r", erase the line) and output printed meanwhile goes above it; elsewhere (a pipe, a
// file) each status is a line of its own, among the output.

#include <ostream>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace tessera::cli {

class StatusLine {
 public:
  StatusLine(std::ostream& out, bool terminal) : out_(out), terminal_(terminal) {}
  ~StatusLine() { Clear(); }
  StatusLine(const StatusLine&) = delete;
  StatusLine& operator=(const StatusLine&) = delete;

  bool terminal() const { return terminal_; }

  // Shows `text` as the status (on a terminal, replacing the one shown; elsewhere, as a line).
  void Show(const std::string& text);
  // Erases the status from a terminal; it is not drawn again until the next Show.
  void Clear();

  // While it lives, the output stream may be written to: the status is erased first and drawn
  // again below what was written. Other writers of the status wait.
  class Hold {
   public:
    explicit Hold(StatusLine* line);  // null: holds nothing
    ~Hold();
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;

   private:
    StatusLine* line_;
  };

 private:
  void EraseLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::ostream& out_;
  const bool terminal_;
  absl::Mutex mu_;
  // On a terminal: the status drawn now ("" when none).
  std::string shown_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera::cli
