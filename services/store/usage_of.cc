#include "base/timestamps.h"
#include "services/store/usage_store.h"

namespace tessera::store {

AttemptUsage UsageOf(const v1::Run& run, const v1::Attempt& attempt) {
  AttemptUsage usage;
  usage.run_id = run.id();
  usage.run_name = run.name();
  usage.user = run.user();
  usage.team = run.team();
  // Where the attempt ran; what the run asked for when an older attempt did not say.
  usage.cluster = attempt.cluster().empty() ? run.spec().compute().cluster() : attempt.cluster();
  usage.gpu_type =
      attempt.gpu_type().empty() ? run.spec().compute().gpu_type() : attempt.gpu_type();
  usage.resumption_index = attempt.resumption_index();
  for (const auto& node : attempt.nodes()) usage.gpus += node.gpu_indices_size();
  usage.started_at = FromProtoTime(attempt.started_at());
  if (attempt.has_ended_at()) usage.ended_at = FromProtoTime(attempt.ended_at());
  usage.end_reason = attempt.end_reason();
  return usage;
}

}  // namespace tessera::store
