#include "services/runs/run_manager.h"

#include <spdlog/spdlog.h>

#include <deque>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "base/timestamps.h"
#include "proto/policy/images.h"
#include "runspec/integrations.h"
#include "runspec/run_spec_parser.h"
#include "services/common/rpc.h"
#include "services/runs/describe.h"
#include "services/runs/run_pages.h"
#include "services/runs/run_requests.h"
#include "services/store/filters.h"

namespace tessera::runs {
namespace {

// The record of a call answered with the run its write leaves (or with nothing, for DeleteRun),
// written in that write's transaction.
template <typename Response>
std::optional<store::IdempotentRunWrite> RecordWithRun(
    const std::optional<store::IdempotencyKey>& key) {
  if (!key) return std::nullopt;
  return store::IdempotentRunWrite{*key, [](const v1::Run& run) {
                                     Response response;
                                     if constexpr (requires { response.mutable_run(); }) {
                                       *response.mutable_run() = run;
                                     }
                                     return response.SerializeAsString();
                                   }};
}

}  // namespace

RunManager::RunManager(std::shared_ptr<store::RunStore> runs,
                       std::shared_ptr<const RunWriter> writer,
                       std::shared_ptr<IdempotentCalls> idem, std::shared_ptr<FitChecker> fit,
                       std::shared_ptr<Clock> clock, std::shared_ptr<LogDeleter> logs,
                       std::shared_ptr<Random> random, RunManagerOptions options,
                       std::shared_ptr<store::ChangeFeed> changes,
                       std::shared_ptr<store::SecretStore> secrets,
                       std::shared_ptr<ClusterReliability> reliability)
    : runs_(std::move(runs)),
      writer_(std::move(writer)),
      idem_(std::move(idem)),
      fit_(std::move(fit)),
      clock_(std::move(clock)),
      logs_(std::move(logs)),
      random_(std::move(random)),
      options_(options),
      admission_(runs_, fit_, clock_, options.admission, std::move(secrets)),
      changes_(changes ? std::move(changes) : std::make_shared<store::ChangeFeed>()),
      event_tail_(std::make_shared<RunEventTail>(runs_, changes_, clock_)),
      reliability_(std::move(reliability)) {}

std::string RunManager::RandomSuffix(int length) {
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::string out;
  for (int i = 0; i < length; ++i) {
    out.push_back(kAlphabet[random_->Uniform(sizeof(kAlphabet) - 1)]);
  }
  return out;
}

absl::StatusOr<v1::Run> RunManager::CreateFromSpec(
    const Who& who, const v1::RunSpec& written, std::vector<std::string> notes,
    const std::string& message, const std::optional<store::IdempotentRunWrite>& idem) {
  if (notes.size() > kMaxSpecNotes) notes.resize(kMaxSpecNotes);
  for (auto& note : notes) {
    if (note.size() > kMaxSpecNoteBytes) note = note.substr(0, kMaxSpecNoteBytes) + "...";
  }
  // A run over the API gets what mcli's YAML gets: older names mapped, its name made valid.
  v1::RunSpec spec = written;
  TESSERA_RETURN_IF_ERROR(spec::NormalizeRunSpec(&spec, &notes));
  TESSERA_RETURN_IF_ERROR(spec::ValidateIntegrations(spec));
  const double hang = spec.scheduling().hang_timeout_seconds();
  if (hang > 0 && absl::Seconds(hang) < options_.min_hang_timeout) {
    return absl::InvalidArgumentError(absl::StrCat(
        "scheduling.hang_timeout: at least ", absl::ToDoubleSeconds(options_.min_hang_timeout),
        " seconds on this cluster (got ", hang, "), or leave it out"));
  }
  if (IsHostImage(spec.image()) && !options_.allow_host_image) {
    return absl::InvalidArgumentError(
        spec.image().empty()
            ? "image: required on this cluster (it runs every rank in its image; an admin may "
              "allow runs on the nodes' own system with tessera-server --allow-host-image)"
            : "image: 'host' runs on the nodes' own system, which this cluster does not allow "
              "(tessera-server --allow-host-image); name an image");
  }
  // First: a user past their rate is refused before anything is read for them.
  TESSERA_RETURN_IF_ERROR(admission_.CheckSubmitRate(who));
  TESSERA_RETURN_IF_ERROR(admission_.CheckWaitingRuns(who.user));
  TESSERA_RETURN_IF_ERROR(admission_.CheckSecrets(who.user, spec, &notes));
  // The team whose quota the run uses is the owner's at submit.
  TESSERA_ASSIGN_OR_RETURN(const std::string team, fit_->CheckFit(spec.compute(), who.user,
                                                                  spec.scheduling().preemptible()));
  TESSERA_RETURN_IF_ERROR(admission_.CheckPriority(who, team, spec.scheduling().priority()));
  // One uid per user on every node: the sandbox runs the user's ranks as it.
  auto uid = runs_->UserUid(who.user);
  if (!uid.ok()) return uid.status();
  // mcli appends a short random suffix so that the same YAML can be submitted many times.
  for (int attempt = 0; attempt < 8; ++attempt) {
    const absl::Time now = clock_->Now();
    v1::Run run;
    run.set_id(absl::StrCat("run-", RandomSuffix(20)));
    run.set_name(absl::StrCat(spec.name(), "-", RandomSuffix(4 + attempt / 2)));
    run.set_user(who.user);
    run.set_user_uid(*uid);
    run.set_team(team);
    *run.mutable_spec() = spec;
    run.set_status(v1::RUN_STATUS_PENDING);
    *run.mutable_created_at() = ToProtoTime(now);
    *run.mutable_updated_at() = ToProtoTime(now);
    run.set_resumption_index(-1);
    std::vector<v1::RunEvent> events = {MakeEvent(run, v1::RUN_EVENT_TYPE_CREATED, message, now)};
    for (const auto& note : notes) {
      events.push_back(
          MakeEvent(run, v1::RUN_EVENT_TYPE_CREATED, absl::StrCat("Note: ", note), now));
    }
    for (const auto& type : spec::RecordedOnlyIntegrations(spec)) {
      events.push_back(MakeEvent(
          run, v1::RUN_EVENT_TYPE_SETUP,
          absl::StrCat("Warning: integration ", type,
                       " is recorded with the run; Tessera runs only git_repo, pip_packages, "
                       "apt_packages and local"),
          now));
    }
    auto created = runs_->CreateRun(run, events, idem);
    if (!absl::IsAlreadyExists(created.status())) return created;
  }
  return absl::InternalError("could not find a free run name after 8 tries");
}

absl::Status RunManager::SubmitRun(const Who& who, const v1::SubmitRunRequest& req,
                                   v1::SubmitRunResponse* resp) {
  std::vector<std::string> notes(req.spec_notes().begin(), req.spec_notes().end());
  auto spec = SpecOfSubmit(req, &notes);
  if (!spec.ok()) return spec.status();
  return idem_->RunAtomically(
      absl::StrCat("SubmitRun/", who.user), req.idempotency_key(), req, resp,
      [&](const auto& key) -> absl::Status {
        auto run = CreateFromSpec(who, *spec, notes, "Run created",
                                  RecordWithRun<v1::SubmitRunResponse>(key));
        if (!run.ok()) return run.status();
        *resp->mutable_run() = *std::move(run);
        spdlog::info("run {} submitted by {}", resp->run().name(), who.user);
        return absl::OkStatus();
      });
}

absl::Status RunManager::GetRun(const Who& who, const v1::GetRunRequest& req,
                                v1::GetRunResponse* resp) {
  auto run = writer_->ReadVisible(who, req.name());
  if (!run.ok()) return run.status();
  *resp->mutable_run() = *std::move(run);
  return absl::OkStatus();
}

absl::Status RunManager::ListRuns(const Who& who, const v1::ListRunsRequest& req,
                                  v1::ListRunsResponse* resp) {
  v1::RunFilter filter = req.filter();
  TESSERA_RETURN_IF_ERROR(CheckRunFilter(filter));
  if (!who.sees_all_runs()) {
    if (!filter.user().empty() && filter.user() != who.user) {
      return absl::PermissionDeniedError(
          "filter.user: listing another user's runs requires an operator or admin API key");
    }
    filter.set_user(who.user);
  }
  if (req.page_size() < 0 || req.page_size() > kMaxRunsPage) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_size: must be between 0 and ", kMaxRunsPage, ", got ", req.page_size()));
  }
  if (!req.page_token().empty()) {
    TESSERA_RETURN_IF_ERROR(ApplyRunPageToken(req.page_token(), &filter));
  }
  // One run more than the page tells whether another page follows. The filter's own limit
  // caps the whole list; a caller that pages lowers it by what it already has.
  const int page = req.page_size() > 0 ? req.page_size() : kMaxRunsPage;
  const bool capped = filter.latest() || (filter.limit() > 0 && filter.limit() <= page);
  if (!capped) filter.set_limit(page + 1);
  auto runs = runs_->ListRuns(filter);
  if (!runs.ok()) return runs.status();
  if (!capped && static_cast<int>(runs->size()) > page) {
    runs->resize(page);
    resp->set_next_page_token(RunPageToken(runs->back()));
  }
  // Runs come summarized from the store (SummarizeRun: no command, env, parameters or
  // metadata, whatever omit_parameters says); the page also ends at a size in bytes.
  size_t bytes = 0;
  for (size_t i = 0; i < runs->size(); ++i) {
    v1::Run& r = (*runs)[i];
    bytes += r.ByteSizeLong();
    if (bytes > options_.max_list_reply_bytes && resp->runs_size() > 0) {
      resp->set_next_page_token(RunPageToken(resp->runs(resp->runs_size() - 1)));
      break;
    }
    *resp->add_runs() = std::move(r);
  }
  return absl::OkStatus();
}

absl::Status RunManager::DescribeRun(const Who& who, const v1::DescribeRunRequest& req,
                                     v1::DescribeRunResponse* resp) {
  absl::StatusOr<v1::Run> run;
  if (!req.run_id().empty()) {
    // By id: how Tessera's services look runs up (the log service checks a node's pushes).
    if (!req.name().empty()) return absl::InvalidArgumentError("name and run_id: give one");
    run = runs_->GetRunById(req.run_id());
    if (run.ok() && !who.may_see(run->user())) {
      return absl::NotFoundError(absl::StrCat("run ", req.run_id(), " not found"));
    }
    if (run.ok()) auth::NoteRunRead(who, run->user());
  } else {
    run = writer_->ReadVisible(who, req.name());
  }
  if (!run.ok()) return run.status();
  auto attempts = runs_->ListAttempts(run->id());
  if (!attempts.ok()) return attempts.status();
  auto events = runs_->ListEvents(run->id());
  if (!events.ok()) return events.status();
  auto progress = runs_->ListProgress(run->id());
  if (!progress.ok()) return progress.status();
  v1::RunDescription& d = *resp->mutable_description();
  d = Describe(*run, *attempts, *events, *progress, clock_->Now());
  if (reliability_ == nullptr) return absl::OkStatus();
  // The cluster's figures are advice: without them the description is still whole.
  if (auto figures = reliability_->Figures(); figures.ok()) {
    if (auto advice = AdviseCheckpointInterval(run->progress(), d.step_seconds(),
                                               run->spec().compute().gpus(), *figures)) {
      *d.mutable_checkpoint_advice() = *std::move(advice);
    }
  } else {
    spdlog::warn("describe {}: the cluster's interruptions: {}", run->name(),
                 figures.status().ToString());
  }
  if (auto goodput = reliability_->running_goodput()) d.set_cluster_goodput(*goodput);
  return absl::OkStatus();
}

absl::Status RunManager::StopRun(const Who& who, const v1::StopRunRequest& req,
                                 v1::StopRunResponse* resp) {
  auto run = writer_->ReadChangeable(who, req.name());
  if (!run.ok()) return run.status();
  if (req.reason().size() > 1024)
    return absl::InvalidArgumentError("reason: at most 1024 characters");
  return idem_->RunAtomically(
      absl::StrCat("StopRun/", who.user), req.idempotency_key(), req, resp,
      [&](const auto& key) -> absl::Status {
        auto stopped = writer_->Mutate(
            run->id(),
            [&](const v1::Run& r, const auto& attempts) {
              return absl::StatusOr<Transition>(RequestStop(r, CurrentAttempt(r, attempts),
                                                            who.user, req.reason(), clock_->Now()));
            },
            std::nullopt, RecordWithRun<v1::StopRunResponse>(key));
        if (!stopped.ok()) return stopped.status();
        *resp->mutable_run() = *std::move(stopped);
        return absl::OkStatus();
      });
}

absl::Status RunManager::DeleteRun(const Who& who, const v1::DeleteRunRequest& req,
                                   v1::DeleteRunResponse* resp) {
  return idem_->RunAtomically(
      absl::StrCat("DeleteRun/", who.user), req.idempotency_key(), req, resp,
      [&](const auto& key) -> absl::Status {
        auto run = writer_->ReadChangeable(who, req.name());
        if (!run.ok()) return run.status();
        if (IsActive(run->status())) {
          return absl::FailedPreconditionError(
              absl::StrCat("run ", run->name(), " is ", v1::RunStatus_Name(run->status()),
                           "; stop it first (mcli stop run ", run->name(), ")"));
        }
        TESSERA_RETURN_IF_ERROR(
            runs_->DeleteRun(run->id(), RecordWithRun<v1::DeleteRunResponse>(key), run->version()));
        if (logs_) {
          if (auto st = logs_->DeleteRunLogs(run->id()); !st.ok()) {
            spdlog::warn(
                "run {} ({}) was deleted but its logs remain: {}; delete them with "
                "DeleteRunLogs",
                run->name(), run->id(), std::string(st.message()));
          }
        }
        return absl::OkStatus();
      });
}

absl::Status RunManager::UpdateRun(const Who& who, const v1::UpdateRunRequest& req,
                                   v1::UpdateRunResponse* resp) {
  TESSERA_RETURN_IF_ERROR(CheckUpdateRequest(req));
  auto run = writer_->ReadChangeable(who, req.name());
  if (!run.ok()) return run.status();
  if (req.has_priority())
    TESSERA_RETURN_IF_ERROR(admission_.CheckPriority(who, run->team(), req.priority()));
  if (req.has_preemptible() && !req.preemptible() && run->spec().scheduling().preemptible()) {
    TESSERA_RETURN_IF_ERROR(admission_.CheckPreemptibleOff(*run));
  }
  return idem_->RunAtomically(
      absl::StrCat("UpdateRun/", who.user), req.idempotency_key(), req, resp,
      [&](const auto& key) -> absl::Status {
        auto updated = writer_->Mutate(
            run->id(),
            [&](const v1::Run& r, const auto&) -> absl::StatusOr<Transition> {
              if (IsTerminal(r.status())) {
                return absl::FailedPreconditionError(absl::StrCat(
                    "run ", r.name(), " has ended (", v1::RunStatus_Name(r.status()), ")"));
              }
              Transition t{r, {}, {}, true};
              const std::vector<std::string> what =
                  ApplyUpdate(req, *t.run.mutable_spec()->mutable_scheduling());
              *t.run.mutable_updated_at() = ToProtoTime(clock_->Now());
              t.events.push_back(MakeEvent(
                  t.run, v1::RUN_EVENT_TYPE_UPDATED,
                  absl::StrCat("Run updated by ", who.user, ": ", absl::StrJoin(what, ", ")),
                  clock_->Now()));
              return t;
            },
            std::nullopt, RecordWithRun<v1::UpdateRunResponse>(key));
        if (!updated.ok()) return updated.status();
        *resp->mutable_run() = *std::move(updated);
        return absl::OkStatus();
      });
}

absl::Status RunManager::RestartRun(const Who& who, const v1::RestartRunRequest& req,
                                    v1::RestartRunResponse* resp) {
  auto run = writer_->ReadChangeable(who, req.name());
  if (!run.ok()) return run.status();
  return idem_->RunAtomically(
      absl::StrCat("RestartRun/", who.user), req.idempotency_key(), req, resp,
      [&](const auto& key) -> absl::Status {
        auto restarted = writer_->Mutate(
            run->id(),
            [&](const v1::Run& r, const auto&) -> absl::StatusOr<Transition> {
              if (!IsTerminal(r.status())) {
                return absl::FailedPreconditionError(
                    absl::StrCat("run ", r.name(), " is ", v1::RunStatus_Name(r.status()),
                                 "; only an ended run can be restarted"));
              }
              const absl::Time now = clock_->Now();
              Transition t{r, {}, {}, true};
              t.run.set_status(v1::RUN_STATUS_PENDING);
              t.run.set_stop_requested(false);
              t.run.set_status_reason("");
              t.run.set_retries_used(0);
              t.run.clear_ended_at();
              *t.run.mutable_updated_at() = ToProtoTime(now);
              t.events.push_back(MakeEvent(t.run, v1::RUN_EVENT_TYPE_UPDATED,
                                           absl::StrCat("Run restarted by ", who.user), now));
              return t;
            },
            std::nullopt, RecordWithRun<v1::RestartRunResponse>(key));
        if (!restarted.ok()) return restarted.status();
        *resp->mutable_run() = *std::move(restarted);
        return absl::OkStatus();
      });
}

absl::Status RunManager::CloneRun(const Who& who, const v1::CloneRunRequest& req,
                                  v1::CloneRunResponse* resp) {
  auto source = writer_->ReadVisible(who, req.name());
  if (!source.ok()) return source.status();
  v1::RunSpec spec = source->spec();
  if (!req.new_name().empty()) spec.set_name(req.new_name());
  return idem_->RunAtomically(absl::StrCat("CloneRun/", who.user), req.idempotency_key(), req, resp,
                              [&](const auto& key) -> absl::Status {
                                auto run = CreateFromSpec(
                                    who, spec, {},
                                    absl::StrCat("Run created as a clone of ", source->name()),
                                    RecordWithRun<v1::CloneRunResponse>(key));
                                if (!run.ok()) return run.status();
                                *resp->mutable_run() = *std::move(run);
                                return absl::OkStatus();
                              });
}

absl::StatusOr<std::unique_ptr<RunChangeWatch>> RunManager::OpenWatch(
    const Who& who, const v1::WatchRunsRequest& req, absl::Duration poll_interval) {
  TESSERA_RETURN_IF_ERROR(CheckRunFilter(req.filter()));
  return std::make_unique<RunChangeWatch>(event_tail_, changes_, clock_, who, req.filter(),
                                          poll_interval);
}

absl::Status RunManager::WatchRuns(const Who& who, const v1::WatchRunsRequest& req,
                                   const std::function<bool(const v1::RunChange&)>& send,
                                   const std::function<bool()>& done, absl::Duration poll_interval,
                                   const std::function<void()>& started) {
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<RunChangeWatch> watch,
                           OpenWatch(who, req, poll_interval));
  return DriveOnThisThread<v1::RunChange>(*watch, *changes_, store::ChangeTopic::kRunEvents,
                                          *clock_, send, done, started);
}

}  // namespace tessera::runs
