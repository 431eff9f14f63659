#include "services/runs/run_writer.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "services/common/auth/others_run_reads.h"
#include "services/store/cas_retry.h"

namespace tessera::runs {
namespace {

absl::Status RequireName(const std::string& name) {
  if (name.empty()) return absl::InvalidArgumentError("name: required");
  if (name.size() > 128) return absl::InvalidArgumentError("name: at most 128 characters");
  return absl::OkStatus();
}

}  // namespace

RunWriter::RunWriter(std::shared_ptr<store::RunStore> runs, std::shared_ptr<Clock> clock,
                     metrics::Registry* registry)
    : runs_(std::move(runs)),
      clock_(std::move(clock)),
      metrics_(registry ? std::make_unique<LifecycleMetrics>(*registry) : nullptr) {}

absl::StatusOr<v1::Run> RunWriter::ReadVisible(const auth::Principal& who,
                                               const std::string& name) const {
  TESSERA_RETURN_IF_ERROR(RequireName(name));
  auto run = runs_->GetRun(name);
  if (!run.ok()) return run.status();
  if (!who.may_see(run->user())) {
    return absl::NotFoundError(absl::StrCat("run ", name, " not found"));
  }
  auth::NoteRunRead(who, run->user());
  return run;
}

absl::StatusOr<v1::Run> RunWriter::ReadChangeable(const auth::Principal& who,
                                                  const std::string& name) const {
  auto run = ReadVisible(who, name);
  if (run.ok() && !who.may_act_for(run->user())) {
    return absl::PermissionDeniedError(
        absl::StrCat("run ", name, " belongs to ", run->user(),
                     "; an operator sees every run but changes only their own"));
  }
  return run;
}

absl::StatusOr<v1::Run> RunWriter::Mutate(
    const std::string& run_id, const Change& change, const std::optional<store::WriteFence>& fence,
    const std::optional<store::IdempotentRunWrite>& idem) const {
  for (int i = 0; i < store::kMaxCasAttempts; ++i) {
    auto run = runs_->GetRunById(run_id);
    if (!run.ok()) return run.status();
    auto attempts = runs_->ListAttempts(run_id);
    if (!attempts.ok()) return attempts.status();
    auto t = change(*run, *attempts);
    if (!t.ok()) return t.status();
    if (!t->changed) return *run;
    auto updated = runs_->UpdateRun(t->run, run->version(), t->events, t->attempts, fence, idem);
    if (updated.ok() && metrics_) metrics_->Observe(*run, *updated, *attempts, clock_->Now());
    if (!absl::IsAborted(updated.status())) return updated;
  }
  return absl::AbortedError(absl::StrCat("run ", run_id, " is changing too often; try again"));
}

}  // namespace tessera::runs
