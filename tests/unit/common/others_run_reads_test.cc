// A person's reads of other users' runs, as the audit log learns of them: noted by the handler
// on its thread, heard only by the call listening there (auth/others_run_reads.h).
#include "services/common/auth/others_run_reads.h"

#include <catch2/catch.hpp>
#include <thread>

namespace tessera::auth {
namespace others_run_reads_test {

TEST_CASE("a read of another user's run is noted by a person's call listening on its thread") {
  const Principal ops{"ops", v1::ROLE_OPERATOR, ""};
  OthersRunReads own_run, others_run, service, outer, inner;
  {
    OthersRunReads::Listening listening(own_run);
    NoteRunRead(ops, "ops");
  }
  CHECK_FALSE(own_run.noted());
  {
    OthersRunReads::Listening listening(others_run);
    NoteRunRead(ops, "bob");
  }
  CHECK(others_run.noted());
  {
    OthersRunReads::Listening listening(service);
    NoteRunRead(Principal{"scheduler", v1::ROLE_SYSTEM, ""}, "bob");
    NoteRunRead(Principal{"w", v1::ROLE_NODE, "n1"}, "bob");
  }
  CHECK_FALSE(service.noted());
  // Nothing listens: nothing noted anywhere, and no crash.
  NoteRunRead(ops, "bob");
  // A call served inside another's handler (in process) is heard by the inner call only, and the
  // outer listens again once it ends.
  {
    OthersRunReads::Listening a(outer);
    {
      OthersRunReads::Listening b(inner);
      NoteRunRead(ops, "bob");
    }
    CHECK_FALSE(outer.noted());
    NoteRunRead(ops, "carol");
  }
  CHECK(inner.noted());
  CHECK(outer.noted());
  // Another thread's reads are not this call's.
  OthersRunReads elsewhere;
  {
    OthersRunReads::Listening listening(elsewhere);
    std::thread([&] { NoteRunRead(ops, "bob"); }).join();
  }
  CHECK_FALSE(elsewhere.noted());
}

}  // namespace others_run_reads_test
}  // namespace tessera::auth
