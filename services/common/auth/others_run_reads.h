#pragma once
// A person's read of another user's run (an operator or admin reading its spec, events, logs or
// metrics, or cloning it) goes to the audit log. Only the handler knows whose run it let the
// caller read, and only the call's admission (AdmittedCall, rpc.h) writes audit records, so the
// handler notes the read on its thread (NoteRunRead) and the admission, listening around the
// handler, records the call when the role table audits its method's reads of others' runs
// (Audit::kReadsOfOthersRuns). Lists and watches carry run summaries (no command, environment or
// parameters) and are not audited.

#include <atomic>
#include <string>

#include "services/common/auth/principal.h"

namespace tessera::auth {

// What a call's handler noted of the runs it let its caller read.
class OthersRunReads {
 public:
  OthersRunReads() = default;
  OthersRunReads(const OthersRunReads&) = delete;
  OthersRunReads& operator=(const OthersRunReads&) = delete;

  // While it lives, NoteRunRead on this thread reaches `reads` (and no outer listener).
  class Listening {
   public:
    explicit Listening(OthersRunReads& reads);
    ~Listening();
    Listening(const Listening&) = delete;
    Listening& operator=(const Listening&) = delete;

   private:
    OthersRunReads* previous_;
  };

  // Whether a person was let read a run of another user.
  bool noted() const { return noted_.load(std::memory_order_acquire); }

 private:
  friend void NoteRunRead(const Principal& who, const std::string& owner);
  // Set on the thread that runs the handler, read where the call is answered (a stream's pump may
  // answer on another thread).
  std::atomic<bool> noted_{false};
};

// Notes that `who` was let read a run owned by `owner`: heard by the call listening on this
// thread. Nothing is noted for Tessera's services and nodes, or for a person's own runs.
void NoteRunRead(const Principal& who, const std::string& owner);

}  // namespace tessera::auth
