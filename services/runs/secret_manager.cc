#include "services/runs/secret_manager.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/timestamps.h"
#include "runspec/text_rules.h"
#include "services/runs/run_secrets.h"

namespace tessera::runs {
namespace {

// Sealed with the owner and name bound in: a value copied to another row does not open.
std::string AssociatedData(const v1::Secret& s) { return absl::StrCat(s.user(), "\n", s.name()); }

bool IsVariableName(const std::string& key) {
  if (key.empty() || key.size() > 256 || absl::ascii_isdigit(key.front())) return false;
  return std::all_of(key.begin(), key.end(),
                     [](char c) { return absl::ascii_isalnum(c) || c == '_'; });
}

absl::Status CheckMountPath(const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("secret.mount_path: required");
  if (path.front() != '/' || path.size() > 1024 || absl::StrContains(path, "/../") ||
      absl::EndsWith(path, "/..") || absl::EndsWith(path, "/")) {
    return absl::InvalidArgumentError(
        absl::StrCat("secret.mount_path: '", path, "' is not an absolute path to a file"));
  }
  for (const char* owned : {"/proc", "/dev", "/sys", "/run/tessera"}) {
    if (path == owned || absl::StartsWith(path, absl::StrCat(owned, "/"))) {
      return absl::InvalidArgumentError(
          absl::StrCat("secret.mount_path: ", owned, " belongs to the sandbox"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateSecret(const v1::Secret& s, size_t value_bytes) {
  if (!spec::IsSecretName(s.name())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "secret.name: '", s.name(),
        "' must be 1 to 63 lower-case letters, digits and '-', not starting with '-'"));
  }
  if (value_bytes == 0) return absl::InvalidArgumentError("value: required");
  if (value_bytes > kMaxSecretBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("value: at most ", kMaxSecretBytes, " bytes, got ", value_bytes));
  }
  switch (s.type()) {
    case v1::SECRET_TYPE_ENVIRONMENT:
      if (!IsVariableName(s.env_key())) {
        return absl::InvalidArgumentError(absl::StrCat("secret.env_key: '", s.env_key(),
                                                       "' is not an environment variable name"));
      }
      return absl::OkStatus();
    case v1::SECRET_TYPE_MOUNTED:
    case v1::SECRET_TYPE_GIT_SSH:
    case v1::SECRET_TYPE_SSH:
      return CheckMountPath(s.mount_path());
    case v1::SECRET_TYPE_DOCKER_REGISTRY:
      if (s.server().empty() || absl::StrContains(s.server(), "/") ||
          absl::StrContains(s.server(), " ")) {
        return absl::InvalidArgumentError(
            absl::StrCat("secret.server: '", s.server(), "' is not a registry host[:port]"));
      }
      if (s.username().empty()) return absl::InvalidArgumentError("secret.username: required");
      return absl::OkStatus();
    default:
      return absl::InvalidArgumentError(
          "secret.type: one of environment, mounted, docker-registry, git-ssh, ssh");
  }
}

SecretManager::SecretManager(std::shared_ptr<store::SecretStore> secrets,
                             std::shared_ptr<store::RunStore> runs, std::optional<SecretBox> box,
                             std::shared_ptr<Clock> clock)
    : secrets_(std::move(secrets)),
      runs_(std::move(runs)),
      box_(std::move(box)),
      clock_(std::move(clock)) {}

absl::Status SecretManager::CreateSecret(const Who& who, const v1::CreateSecretRequest& req,
                                         v1::CreateSecretResponse* resp) {
  if (!box_) {
    return absl::FailedPreconditionError(
        "this cluster keeps no secrets: its run manager was started without "
        "--secrets-key-file");
  }
  v1::Secret s = req.secret();
  s.set_user(who.user);
  *s.mutable_created_at() = ToProtoTime(clock_->Now());
  if (auto st = ValidateSecret(s, req.value().size()); !st.ok()) return st;
  auto existing = secrets_->ListSecrets(who.user);
  if (!existing.ok()) return existing.status();
  if (existing->size() >= kMaxSecretsPerUser) {
    return absl::ResourceExhaustedError(
        absl::StrCat("you have ", kMaxSecretsPerUser, " secrets, the most a user may have"));
  }
  auto sealed = box_->Seal(req.value(), AssociatedData(s));
  if (!sealed.ok()) return sealed.status();
  if (auto st = secrets_->CreateSecret({s, *sealed}); !st.ok()) return st;
  spdlog::info("secret {} ({}) created by {}", s.name(), v1::SecretType_Name(s.type()), who.user);
  *resp->mutable_secret() = std::move(s);
  return absl::OkStatus();
}

absl::Status SecretManager::ListSecrets(const Who& who, const v1::ListSecretsRequest&,
                                        v1::ListSecretsResponse* resp) {
  auto records = secrets_->ListSecrets(who.user);
  if (!records.ok()) return records.status();
  for (auto& r : *records) *resp->add_secrets() = std::move(r.secret);
  return absl::OkStatus();
}

absl::Status SecretManager::DeleteSecret(const Who& who, const v1::DeleteSecretRequest& req,
                                         v1::DeleteSecretResponse*) {
  if (req.name().empty()) return absl::InvalidArgumentError("name: required");
  // A run that names the secret would wait for it for ever once it is gone (it never starts
  // without a secret it names).
  v1::RunFilter waiting_or_running;
  waiting_or_running.set_user(who.user);
  for (v1::RunStatus s : {v1::RUN_STATUS_PENDING, v1::RUN_STATUS_QUEUED, v1::RUN_STATUS_STARTING,
                          v1::RUN_STATUS_RUNNING, v1::RUN_STATUS_TERMINATING}) {
    waiting_or_running.add_statuses(s);
  }
  auto runs = runs_->ListRuns(waiting_or_running);
  if (!runs.ok()) return runs.status();
  for (const v1::Run& run : *runs) {
    const auto& names = run.spec().secrets();
    if (std::find(names.begin(), names.end(), req.name()) != names.end()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "secret ", req.name(), " is named by run ", run.name(), " (",
          v1::RunStatus_Name(run.status()), "); stop it first (mcli stop run ", run.name(), ")"));
    }
  }
  return secrets_->DeleteSecret(who.user, req.name());
}

absl::Status SecretManager::GetRunSecrets(const Who& who, const v1::GetRunSecretsRequest& req,
                                          v1::GetRunSecretsResponse* resp) {
  if (!who.is_system()) {
    return absl::PermissionDeniedError("GetRunSecrets is for Tessera's scheduler only");
  }
  if (req.run_id().empty()) return absl::InvalidArgumentError("run_id: required");
  auto run = runs_->GetRunById(req.run_id());
  if (!run.ok()) return run.status();
  auto records = secrets_->ListSecrets(run->user());
  if (!records.ok()) return records.status();
  std::vector<std::string> owned;
  for (const auto& r : *records) owned.push_back(r.secret.name());
  if (auto st = CheckNamedSecretsExist(run->spec(), owned); !st.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("run ", run->name(), " cannot start: ", st.message()));
  }
  // Only what the run gets leaves the run manager: its nodes never see the owner's others.
  records->erase(std::remove_if(records->begin(), records->end(),
                                [&](const store::SecretRecord& r) {
                                  return !RunGetsSecret(run->spec(), r.secret);
                                }),
                 records->end());
  if (records->empty()) return absl::OkStatus();
  if (!box_) {
    return absl::FailedPreconditionError(
        "the run's owner has secrets, and this run manager has no --secrets-key-file to open "
        "them");
  }
  for (auto& r : *records) {
    auto value = box_->Open(r.sealed, AssociatedData(r.secret));
    if (!value.ok()) {
      return absl::DataLossError(absl::StrCat("secret ", r.secret.name(), " of ", run->user(), ": ",
                                              value.status().message()));
    }
    auto* out = resp->add_secrets();
    *out->mutable_secret() = std::move(r.secret);
    out->set_value(std::move(*value));
  }
  return absl::OkStatus();
}

}  // namespace tessera::runs
