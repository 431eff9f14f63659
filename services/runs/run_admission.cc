#include "services/runs/run_admission.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "services/runs/run_secrets.h"

namespace tessera::runs {

RunAdmission::RunAdmission(std::shared_ptr<store::RunStore> runs, std::shared_ptr<FitChecker> fit,
                           std::shared_ptr<Clock> clock, AdmissionPolicy policy,
                           std::shared_ptr<store::SecretStore> secrets)
    : runs_(std::move(runs)),
      fit_(std::move(fit)),
      policy_(std::move(policy)),
      secrets_(std::move(secrets)),
      submits_(std::move(clock), policy_.max_submits_per_user_per_second,
               policy_.max_submits_per_user_per_second * 10) {}

absl::Status RunAdmission::CheckSubmitRate(const auth::Principal& who) {
  if (who.role == v1::ROLE_ADMIN || who.role == v1::ROLE_OPERATOR) return absl::OkStatus();
  const absl::Duration wait = submits_.TrySpend(who.user);
  if (wait == absl::ZeroDuration()) return absl::OkStatus();
  const double rate = policy_.max_submits_per_user_per_second;
  return absl::ResourceExhaustedError(absl::StrFormat(
      "user %s submitted runs faster than this cluster allows one user (%g a second, %g at "
      "once: tessera-server --max-submits-per-user-per-second %g); submit again in %.1f s",
      who.user, rate, rate * 10, rate, std::max(absl::ToDoubleSeconds(wait), 0.1)));
}

absl::Status RunAdmission::CheckSecrets(const std::string& user, const v1::RunSpec& spec,
                                        std::vector<std::string>* notes) const {
  if (secrets_ == nullptr || spec.all_secrets()) return absl::OkStatus();
  auto records = secrets_->ListSecrets(user);
  if (!records.ok()) return records.status();
  std::vector<std::string> owned, left_out;
  for (const auto& r : *records) {
    owned.push_back(r.secret.name());
    const v1::SecretType type = r.secret.type();
    if ((type == v1::SECRET_TYPE_ENVIRONMENT || type == v1::SECRET_TYPE_MOUNTED ||
         type == v1::SECRET_TYPE_SSH) &&
        !RunGetsSecret(spec, r.secret)) {
      left_out.push_back(r.secret.name());
    }
  }
  if (auto st = CheckNamedSecretsExist(spec, owned); !st.ok()) return st;
  if (!left_out.empty() && spec.secrets_size() == 0 && notes != nullptr) {
    notes->push_back(absl::StrCat(
        "secrets: this run gets none of your secrets ", absl::StrJoin(left_out, ", "),
        " (mcli gave every run all of them): name the ones it needs in secrets: [...], or "
        "secrets: all"));
  }
  return absl::OkStatus();
}

absl::Status RunAdmission::CheckPriority(const auth::Principal& who, const std::string& team,
                                         v1::Priority priority) const {
  if (priority != v1::PRIORITY_HIGH || who.may_operate_nodes() ||
      policy_.high_priority_users.contains(who.user) ||
      (!team.empty() && policy_.high_priority_teams.contains(team))) {
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(absl::StrCat(
      "scheduling.priority: high is for operators, admins and the users and teams this cluster "
      "names (tessera-server --high-priority-users, --high-priority-teams); ",
      who.user, team.empty() ? "" : absl::StrCat(" (team ", team, ")"),
      " is not one of them: use medium or lower"));
}

absl::Status RunAdmission::CheckPreemptibleOff(const v1::Run& run) const {
  if (run.status() == v1::RUN_STATUS_PENDING || run.status() == v1::RUN_STATUS_QUEUED) {
    // The run will be placed as what it is then: within its team's quota, or not at all.
    return fit_->CheckFit(run.spec().compute(), run.user(), /*preemptible=*/false).status();
  }
  if (run.team().empty()) return absl::OkStatus();  // no quota to borrow beyond
  return absl::FailedPreconditionError(absl::StrCat(
      "preemptible: run ", run.name(), " is ", v1::RunStatus_Name(run.status()),
      " and may hold GPUs borrowed beyond team ", run.team(),
      "'s quota, which reclaim takes back only from preemptible runs; it may stop being "
      "preemptible only while it waits (stop it and submit it again with preemptible: false)"));
}

absl::Status RunAdmission::CheckWaitingRuns(const std::string& user) const {
  const int limit = policy_.max_waiting_runs_per_user;
  if (limit <= 0) return absl::OkStatus();
  v1::RunFilter filter;
  filter.set_user(user);
  filter.add_statuses(v1::RUN_STATUS_PENDING);
  filter.add_statuses(v1::RUN_STATUS_QUEUED);
  filter.set_limit(limit);
  auto waiting = runs_->ListRuns(filter);
  if (!waiting.ok()) return waiting.status();
  if (static_cast<int>(waiting->size()) < limit) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      absl::StrCat("user ", user, " already has ", limit,
                   " runs waiting (pending or queued), the most this cluster allows a user "
                   "(tessera-server --max-waiting-runs-per-user ",
                   limit, "); stop or delete some, or submit again when some have started"));
}

}  // namespace tessera::runs
