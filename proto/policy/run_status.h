#pragma once
// What a run's status means where several parts must agree: a run that has ended (completed,
// stopped or failed) changes no more, runs no rank and keeps its logs only for the retention.

#include <optional>

#include "tessera/v1/runs.pb.h"

namespace tessera {

inline bool IsTerminal(v1::RunStatus status) {
  return status == v1::RUN_STATUS_COMPLETED || status == v1::RUN_STATUS_STOPPED ||
         status == v1::RUN_STATUS_FAILED;
}

// The status a run has right after an event of this type (services/runs/lifecycle.cc emits
// each with its change), or nullopt for events that do not change it (a GPU fault, a setup
// note) or that are followed by one that does (preempted, node failure: then requeued or
// failed). A watcher shows each event with its own status, not the run's status when the event
// was read, which may be later.
inline std::optional<v1::RunStatus> StatusAfterEvent(v1::RunEventType type) {
  switch (type) {
    case v1::RUN_EVENT_TYPE_CREATED:
      return v1::RUN_STATUS_PENDING;
    case v1::RUN_EVENT_TYPE_QUEUED:
    case v1::RUN_EVENT_TYPE_REQUEUED:
      return v1::RUN_STATUS_QUEUED;
    case v1::RUN_EVENT_TYPE_PLACED:
      return v1::RUN_STATUS_STARTING;
    case v1::RUN_EVENT_TYPE_STARTED:
      return v1::RUN_STATUS_RUNNING;
    case v1::RUN_EVENT_TYPE_STOP_REQUESTED:
      return v1::RUN_STATUS_TERMINATING;
    case v1::RUN_EVENT_TYPE_COMPLETED:
      return v1::RUN_STATUS_COMPLETED;
    case v1::RUN_EVENT_TYPE_STOPPED:
      return v1::RUN_STATUS_STOPPED;
    case v1::RUN_EVENT_TYPE_FAILED:
      return v1::RUN_STATUS_FAILED;
    default:
      return std::nullopt;
  }
}

}  // namespace tessera
