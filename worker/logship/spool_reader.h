// One rank stream's spool file (the file the rank's stdout or stderr is written to), read as
// numbered lines. Sequence numbers follow from the byte offset where reading resumes, so a
// worker that restarts from its last acknowledged position numbers every line exactly as before
// and the log service can drop what it already has.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace tessera::worker {

struct SpoolPosition {
  int64_t offset = 0;    // bytes
  int64_t sequence = 0;  // number of the line that starts at `offset`
};

struct SpoolLine {
  std::string text;   // without the newline
  SpoolPosition end;  // the position after this line
};

class SpoolReader {
 public:
  // A line longer than this is cut into pieces of this size (each its own line).
  static constexpr size_t kMaxLine = 64 * 1024;

  SpoolReader(std::string path, SpoolPosition start);
  ~SpoolReader();
  SpoolReader(const SpoolReader&) = delete;
  SpoolReader& operator=(const SpoolReader&) = delete;

  // Reads complete lines from the current position, up to `max_lines` / about `max_bytes`.
  // With `final` (the writer has exited) a last line without a newline is returned too.
  // A file that does not exist yet reads as empty.
  absl::Status Read(size_t max_lines, size_t max_bytes, bool final, std::vector<SpoolLine>& out);
  // Goes back to `p` (after a lost connection, to resend what was not acknowledged).
  void Rewind(SpoolPosition p);
  SpoolPosition position() const { return pos_; }
  // True when `final` reading has consumed every byte of the file.
  bool AtEnd(bool final);

 private:
  const std::string path_;
  int fd_ = -1;
  SpoolPosition pos_;
  std::string buf_;  // bytes read past pos_ that do not yet end a line
  int64_t buf_start_ = 0;
};

// The acknowledged position is kept next to the spool file (<path>.acked) so a restarted worker
// resumes there; "done" marks a file shipped completely.
struct AckState {
  SpoolPosition acked;
  bool done = false;
};
AckState LoadAckState(const std::string& spool_path);
absl::Status SaveAckState(const std::string& spool_path, const AckState& state);

}  // namespace tessera::worker
