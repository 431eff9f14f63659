#pragma once
// How a node's failed pre-flight checks are summed up in one line: the worker's attempt detail
// and the scheduler's cordon reason and run event say it the same way.

#include <string>

#include "google/protobuf/repeated_ptr_field.h"
#include "tessera/v1/health.pb.h"

namespace tessera {

// "shm: /dev/shm has 0.06 GiB free ...; script:ib.sh: ... exited with 3": the failed checks.
std::string FailedPreflightChecks(
    const google::protobuf::RepeatedPtrField<v1::PreflightCheck>& checks);

// How a hot spare's warm-up answer (WarmSpare's ack) starts when its pre-flight checks failed:
// the scheduler then cordons the node, as it does one that fails them before a run.
inline constexpr char kSpareChecksFailedPrefix[] = "pre-flight checks failed: ";

}  // namespace tessera
