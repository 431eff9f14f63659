#pragma once
// Runs, their attempts and their event log (owned by the run manager).

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "services/store/idempotency_store.h"
#include "services/store/progress_point.h"
#include "services/store/write_fence.h"
#include "tessera/v1/runs.pb.h"

namespace tessera::store {

// A call's idempotency record, written in the same transaction as the run write it makes.
// `response` serializes the call's response from the run as that write leaves it.
struct IdempotentRunWrite {
  IdempotencyKey key;
  std::function<std::string(const v1::Run&)> response;
};

class RunStore {
 public:
  virtual ~RunStore() = default;

  // Stores a new run with version 1, together with its first events (atomically).
  // ALREADY_EXISTS when the id or the name is taken. With `idem`, its record is written in the
  // same transaction, or nothing is written and the result is KeyTakenError.
  virtual absl::StatusOr<v1::Run> CreateRun(const v1::Run& run,
                                            const std::vector<v1::RunEvent>& events,
                                            const std::optional<IdempotentRunWrite>& idem = {}) = 0;

  virtual absl::StatusOr<v1::Run> GetRun(std::string_view name) = 0;
  virtual absl::StatusOr<v1::Run> GetRunById(std::string_view id) = 0;

  // Newest first, each as SummarizeRun leaves it (filters.h: without its command, env variables,
  // parameters and metadata, which are never read for a list). Name globs use shell syntax
  // (* and ?); an empty filter lists every run.
  virtual absl::StatusOr<std::vector<v1::Run>> ListRuns(const v1::RunFilter& filter) = 0;

  // Compare-and-set: replaces the run only when its stored version is `expected_version`, and
  // appends `events` and upserts `attempts` in the same transaction. The stored run gets
  // version + 1. ABORTED when another writer moved the run first; NOT_FOUND when it does not
  // exist. With a `fence` (a write on a leader's behalf), FAILED_PRECONDITION (StaleTermError)
  // unless its term is still current, checked in the same transaction. `idem` as for CreateRun.
  virtual absl::StatusOr<v1::Run> UpdateRun(const v1::Run& run, int64_t expected_version,
                                            const std::vector<v1::RunEvent>& events,
                                            const std::vector<v1::Attempt>& attempts = {},
                                            const std::optional<WriteFence>& fence = {},
                                            const std::optional<IdempotentRunWrite>& idem = {}) = 0;

  // Removes the run with its attempts and events. NOT_FOUND when absent; with
  // `expected_version`, ABORTED when the run has moved on since it was read (a restart between
  // the check that it ended and the delete). `idem` as for CreateRun (its response is made
  // from the run as it was before the delete).
  virtual absl::Status DeleteRun(std::string_view id,
                                 const std::optional<IdempotentRunWrite>& idem = {},
                                 std::optional<int64_t> expected_version = {}) = 0;

  // Runs that ended (a terminal status) before `before`, the earliest ended first, at most
  // `limit`: what the retention of finished runs removes.
  virtual absl::StatusOr<std::vector<v1::Run>> ListRunsEndedBefore(absl::Time before,
                                                                   int limit) = 0;

  // Inserts or replaces the attempt (run_id, resumption_index). NOT_FOUND without its run.
  virtual absl::Status PutAttempt(const v1::Attempt& attempt) = 0;
  // In resumption order.
  virtual absl::StatusOr<std::vector<v1::Attempt>> ListAttempts(std::string_view run_id) = 0;

  // Assigns the event an id (increasing across all runs) and its run's next position.
  virtual absl::StatusOr<v1::RunEvent> AppendEvent(const v1::RunEvent& event) = 0;
  // Oldest first; only ids above `after_id`; at most `limit` (0: all).
  virtual absl::StatusOr<std::vector<v1::RunEvent>> ListEvents(std::string_view run_id,
                                                               int64_t after_id = 0,
                                                               int limit = 0) = 0;
  // Events of every run with ids above `after_id`, oldest first, at most `limit` (0: all):
  // what a watcher polls to follow every change.
  virtual absl::StatusOr<std::vector<v1::RunEvent>> ListAllEvents(int64_t after_id, int limit) = 0;

  // Stores a point of an attempt's progress history (replacing the point at the same step),
  // then drops each point of that attempt with thin_from <= step < point.step that is not the
  // earliest of its `stride` steps (steps [k * stride, (k + 1) * stride)); stride 1 drops
  // nothing. One transaction. NOT_FOUND without the run; the points go when the run is deleted.
  virtual absl::Status AddProgressPoint(std::string_view run_id, const ProgressPoint& point,
                                        int64_t stride, int64_t thin_from) = 0;
  // Every attempt's points, by resumption index, then step.
  virtual absl::StatusOr<std::vector<ProgressPoint>> ListProgress(std::string_view run_id) = 0;

  // The unprivileged uid every node runs `user`'s ranks as: given once, on first asking, from
  // kFirstUserUid up, and never reused, so two users never share one and a user's files on a
  // shared file system stay theirs across nodes and restarts.
  virtual absl::StatusOr<int64_t> UserUid(std::string_view user) = 0;
};

// Far above the ids of the nodes' own accounts (useradd hands out 1000 to 59999).
inline constexpr int64_t kFirstUserUid = 100000;

}  // namespace tessera::store
