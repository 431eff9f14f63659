#pragma once
// What a run's status means where several parts must agree: a run that has ended (completed,
// stopped or failed) changes no more, runs no rank and keeps its logs only for the retention.

#include "tessera/v1/runs.pb.h"

namespace tessera {

inline bool IsTerminal(v1::RunStatus status) {
  return status == v1::RUN_STATUS_COMPLETED || status == v1::RUN_STATUS_STOPPED ||
         status == v1::RUN_STATUS_FAILED;
}

}  // namespace tessera
