#pragma once
// What a run must pass to be had, besides its spec's own checks: the rules that keep one tenant
// from crowding out or outranking the rest. A submit and a clone are held to the user's submit
// rate, the user's waiting runs and to who may ask for priority high; an update to the same
// priority rule, and a run that stops being preemptible to its team's quota (borrowing must not
// become owning).

#include <memory>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "base/clock.h"
#include "base/rate_budgets.h"
#include "services/common/auth/principal.h"
#include "services/runs/fit_checker.h"
#include "services/store/run_store.h"
#include "services/store/secret_store.h"

namespace tessera::runs {

struct AdmissionPolicy {
  // How many runs one user may have waiting (pending or queued) at once; a submit or clone past
  // it is refused (RESOURCE_EXHAUSTED, naming the limit). Zero: no limit. People and their
  // scripts get this far; the scheduler's cycle reads every waiting run 5 times a second.
  int max_waiting_runs_per_user = 1000;
  // How fast one user may submit (and clone) runs: this many a second, ten seconds' worth at
  // once; past it, RESOURCE_EXHAUSTED says when to submit again, before anything is read from
  // the database. Operators and admins are not held to it. Zero: no limit. One user submitting
  // as fast as the server answers made everyone else's runs start 25 times later (bench/README,
  // bench_control_plane --flood).
  double max_submits_per_user_per_second = 10;
  // Who may ask for priority high (which preempts other teams' preemptible runs and is never
  // preempted by priority): operators and admins always; beyond them, these users and the
  // members of these teams (tessera-server --high-priority-users, --high-priority-teams).
  std::set<std::string> high_priority_users = {};
  std::set<std::string> high_priority_teams = {};
};

class RunAdmission {
 public:
  // `secrets`: the users' secrets, whose names a run's `secrets:` are checked against (null:
  // not checked, for tests of the other rules).
  // `clock`: what the submit rate is measured by.
  RunAdmission(std::shared_ptr<store::RunStore> runs, std::shared_ptr<FitChecker> fit,
               std::shared_ptr<Clock> clock, AdmissionPolicy policy,
               std::shared_ptr<store::SecretStore> secrets = nullptr);

  // RESOURCE_EXHAUSTED when `who` (a user) has submitted runs faster than
  // policy.max_submits_per_user_per_second allows; else counts this submit.
  absl::Status CheckSubmitRate(const auth::Principal& who);

  // RESOURCE_EXHAUSTED when `user` has policy.max_waiting_runs_per_user runs waiting already.
  absl::Status CheckWaitingRuns(const std::string& user) const;
  // PERMISSION_DENIED when `who` may not give a run of `team` this priority.
  absl::Status CheckPriority(const auth::Principal& who, const std::string& team,
                             v1::Priority priority) const;
  // Whether `run` may stop being preemptible now: while it waits, when its team's quota holds
  // it (the fit check again); while it runs, only outside any team (it may hold GPUs borrowed
  // beyond its quota, which reclaim takes only from preemptible runs).
  absl::Status CheckPreemptibleOff(const v1::Run& run) const;
  // NOT_FOUND when `spec` names a secret `user` does not have. When it gives none of the
  // user's environment, file or SSH secrets (run_secrets.h), a note in `notes` says which it
  // leaves out and how to give them (mcli gave every one).
  absl::Status CheckSecrets(const std::string& user, const v1::RunSpec& spec,
                            std::vector<std::string>* notes) const;

 private:
  const std::shared_ptr<store::RunStore> runs_;
  const std::shared_ptr<FitChecker> fit_;
  const AdmissionPolicy policy_;
  const std::shared_ptr<store::SecretStore> secrets_;
  RateBudgets submits_;  // per user
};

}  // namespace tessera::runs
