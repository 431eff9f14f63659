#include "services/common/auth/others_run_reads.h"

namespace tessera::auth {
namespace {
// The reads of the call whose handler runs on this thread (null: none listens).
thread_local OthersRunReads* listening = nullptr;
}  // namespace

OthersRunReads::Listening::Listening(OthersRunReads& reads) : previous_(listening) {
  listening = &reads;
}

OthersRunReads::Listening::~Listening() { listening = previous_; }

void NoteRunRead(const Principal& who, const std::string& owner) {
  if (listening == nullptr || !who.is_person() || owner == who.user) return;
  listening->noted_.store(true, std::memory_order_release);
}

}  // namespace tessera::auth
