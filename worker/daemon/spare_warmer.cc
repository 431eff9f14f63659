#include "worker/daemon/spare_warmer.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "proto/policy/preflight.h"
#include "worker/daemon/preflight.h"
#include "worker/daemon/rank_secrets.h"

namespace tessera::worker {

SpareWarmer::SpareWarmer(SpareWarmerOptions options)
    : options_(std::move(options)), thread_([this] { Loop(); }) {}

SpareWarmer::~SpareWarmer() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    // The worker is going away: a pull under way ends now rather than when it is done.
    if (warming_ && options_.images) options_.images->CancelPulls();
  }
  thread_.join();
}

void SpareWarmer::Warm(v1::WarmSpare warm, Done done) {
  std::optional<std::pair<v1::WarmSpare, Done>> replaced;
  {
    absl::MutexLock lock(&mu_);
    replaced = std::exchange(next_, std::make_pair(std::move(warm), std::move(done)));
  }
  if (replaced) replaced->second("superseded by a newer warm-up");
}

void SpareWarmer::Loop() {
  while (true) {
    std::pair<v1::WarmSpare, Done> job;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](SpareWarmer* w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(w->mu_) {
            return w->stopping_ || w->next_.has_value();
          },
          this));
      if (stopping_) {
        if (next_) next_->second("the worker is stopping");
        return;
      }
      job = std::move(*next_);
      next_.reset();
      warming_ = true;
    }
    const std::string error = WarmNow(job.first);
    {
      absl::MutexLock lock(&mu_);
      warming_ = false;
    }
    if (error.empty()) {
      spdlog::info("ready as a hot spare: {} image(s) cached, pre-flight checks passed",
                   job.first.images_size());
    } else {
      spdlog::warn("not ready as a hot spare: {}", error);
    }
    job.second(error);
  }
}

std::string SpareWarmer::WarmNow(const v1::WarmSpare& warm) const {
  if (options_.preflight) {
    v1::StartAttempt start;  // what the checks read of a start: the GPUs and expectations
    *start.mutable_gpu_indices() = warm.gpu_indices();
    *start.mutable_preflight() = warm.preflight();
    const std::vector<v1::PreflightCheck> checks = options_.preflight(start);
    if (!AllPassed(checks)) {
      google::protobuf::RepeatedPtrField<v1::PreflightCheck> all(checks.begin(), checks.end());
      return absl::StrCat(kSpareChecksFailedPrefix, FailedPreflightChecks(all));
    }
  }
  if (warm.images_size() > 0 && !options_.images) {
    return "this node runs no images (its worker has no image cache)";
  }
  std::vector<std::string> failed;
  for (const auto& image : warm.images()) {
    // The owner's credentials for this image's registry only, for this pull only.
    v1::StartAttempt owner;
    *owner.mutable_secrets() = image.registry_credentials();
    std::string auth_file;
    if (const v1::SecretValue* creds =
            RegistrySecretFor(owner, options_.images->RegistryOf(image.image()))) {
      auth_file = absl::StrCat(options_.state_dir, "/runs/spare-registry-auth.json");
      if (auto st = WriteRegistryAuth(auth_file, *creds); !st.ok()) {
        spdlog::warn("spare warm-up: {}", st.ToString());
        auth_file.clear();
      }
    }
    auto got = options_.images->Acquire(
        image.image(), image.image_digest(), [](const std::string&) {}, auth_file);
    if (!auth_file.empty()) {
      std::error_code ignored;
      std::filesystem::remove(auth_file, ignored);
    }
    if (!got.ok()) {
      failed.push_back(absl::StrCat(image.image(), ": ", got.status().message()));
      continue;
    }
    options_.images->Release(got->digest);  // cached, in use by nothing until a run lands
  }
  if (failed.empty()) return "";
  return absl::StrCat("images not pulled: ", absl::StrJoin(failed, "; "));
}

}  // namespace tessera::worker
