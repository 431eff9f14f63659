#pragma once
// A node whose pre-flight checks failed before a run's ranks started there is cordoned by the
// scheduler itself (as a flapping node is), so that the run's next placement, and every other
// run's, avoids it. The cordon's node event keeps every check, passed or not, as evidence; an
// operator returns the node after fixing it (sweeps never do: they do not measure what failed).

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "services/store/node_store.h"
#include "tessera/v1/health.pb.h"
#include "tessera/v1/runs.pb.h"

namespace tessera::scheduler {

inline constexpr char kPreflightCordonPrefix[] = "preflight: ";

using PreflightChecks = google::protobuf::RepeatedPtrField<v1::PreflightCheck>;

// Cordons `node` (unless an operator or another rule already took it out of service), with a
// CORDONED event whose evidence holds every check and the run. Retries a lost compare-and-set.
absl::Status CordonAfterPreflight(store::NodeStore& nodes, const std::string& node,
                                  const v1::Run& run, const PreflightChecks& checks,
                                  absl::Time now);

// A hot spare whose warm-up found failed pre-flight checks (spare_nodes.h): cordoned the same
// way, with the worker's account of the checks that failed as evidence.
absl::Status CordonSpareAfterPreflight(store::NodeStore& nodes, const std::string& node,
                                       const std::string& failed, absl::Time now);

}  // namespace tessera::scheduler
