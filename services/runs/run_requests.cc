#include "services/runs/run_requests.h"

#include <cmath>
#include <optional>
#include <string_view>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "runspec/run_spec_parser.h"
#include "runspec/spec_limits.h"
#include "runspec/text_rules.h"

namespace tessera::runs {
namespace {

// The bounds of a metadata key and value a run spec may hold (run_spec_validator's CheckText).
constexpr size_t kMaxMetadataKey = 256;
constexpr size_t kMaxMetadataValue = 4096;

// Text a metadata filter may match: what a spec may hold, without NUL (which the database's
// JSON cannot hold: such pairs are never matched).
std::optional<std::string> FilterTextProblem(std::string_view text) {
  if (text.find('\0') != std::string_view::npos) return "text holds a NUL byte";
  return spec::TextProblem(text);
}

}  // namespace

absl::Status CheckRunFilter(const v1::RunFilter& f) {
  if (f.limit() < 0 || f.limit() > kMaxListLimit) {
    return absl::InvalidArgumentError(
        absl::StrCat("filter.limit: must be between 0 and ", kMaxListLimit, ", got ", f.limit()));
  }
  for (const auto& g : f.name_globs()) {
    if (g.empty() || g.size() > 128) {
      return absl::InvalidArgumentError("filter.name_globs: a glob must have 1 to 128 characters");
    }
  }
  for (int s : f.statuses()) {
    if (!v1::RunStatus_IsValid(s) || s == v1::RUN_STATUS_UNSPECIFIED) {
      return absl::InvalidArgumentError(absl::StrCat("filter.statuses: unknown status ", s));
    }
  }
  if (f.metadata_size() > kMaxMetadataFilters) {
    return absl::InvalidArgumentError(absl::StrCat("filter.metadata: at most ", kMaxMetadataFilters,
                                                   " pairs, got ", f.metadata_size()));
  }
  for (const auto& [key, value] : f.metadata()) {
    if (key.empty() || key.size() > kMaxMetadataKey) {
      return absl::InvalidArgumentError(
          absl::StrCat("filter.metadata: a key must have 1 to ", kMaxMetadataKey, " bytes"));
    }
    if (auto problem = FilterTextProblem(key)) {
      return absl::InvalidArgumentError(absl::StrCat("filter.metadata: a key's ", *problem));
    }
    if (value.size() > kMaxMetadataValue) {
      return absl::InvalidArgumentError(absl::StrCat(
          "filter.metadata.", key, ": a value has at most ", kMaxMetadataValue, " bytes"));
    }
    if (auto problem = FilterTextProblem(value)) {
      return absl::InvalidArgumentError(absl::StrCat("filter.metadata.", key, ": ", *problem));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::RunSpec> SpecOfSubmit(const v1::SubmitRunRequest& req,
                                         std::vector<std::string>* notes) {
  if (req.has_spec() && !req.spec_text().empty()) {
    return absl::InvalidArgumentError("spec_text: not with spec (give one of them)");
  }
  if (req.has_spec()) return req.spec();
  if (req.spec_text().empty()) return absl::InvalidArgumentError("spec: required");
  const absl::string_view text = absl::StripLeadingAsciiWhitespace(req.spec_text());
  absl::StatusOr<v1::RunSpec> spec =
      !text.empty() && text.front() == '{'
          ? spec::ParseRunSpecJson(std::string_view(text.data(), text.size()), notes)
          : spec::ParseRunSpec(req.spec_text(), notes);
  if (!spec.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("spec_text: ", spec.status().message()));
  }
  return spec;
}

absl::Status CheckUpdateRequest(const v1::UpdateRunRequest& req) {
  if (req.has_max_duration_hours() &&
      (req.max_duration_hours() < 0 || !std::isfinite(req.max_duration_hours()))) {
    return absl::InvalidArgumentError("max_duration_hours: must be 0 (unlimited) or positive");
  }
  if (req.has_priority() &&
      (!v1::Priority_IsValid(req.priority()) || req.priority() == v1::PRIORITY_UNSPECIFIED)) {
    return absl::InvalidArgumentError(absl::StrCat("priority: unknown priority ", req.priority()));
  }
  if (req.has_max_retries() &&
      (req.max_retries() < 0 || req.max_retries() > spec::kMaxRetriesLimit)) {
    return absl::InvalidArgumentError(absl::StrCat("max_retries: must be between 0 and ",
                                                   spec::kMaxRetriesLimit, ", got ",
                                                   req.max_retries()));
  }
  if (req.has_max_retries() && req.has_retry_on_system_failure() &&
      !req.retry_on_system_failure()) {
    return absl::InvalidArgumentError(
        "max_retries: not with retry_on_system_failure false (a run without the watchdog is "
        "not retried)");
  }
  if (!req.has_max_duration_hours() && !req.has_priority() && !req.has_preemptible() &&
      !req.has_retry_on_system_failure() && !req.has_max_retries()) {
    return absl::InvalidArgumentError(
        "nothing to update: set max_duration_hours, priority, preemptible, "
        "retry_on_system_failure or max_retries");
  }
  return absl::OkStatus();
}

std::vector<std::string> ApplyUpdate(const v1::UpdateRunRequest& req,
                                     v1::SchedulingSpec& scheduling) {
  std::vector<std::string> what;
  if (req.has_max_duration_hours()) {
    scheduling.set_max_duration_hours(req.max_duration_hours());
    what.push_back(absl::StrCat("max_duration=", req.max_duration_hours(), "h"));
  }
  if (req.has_priority()) {
    scheduling.set_priority(req.priority());
    what.push_back(absl::StrCat("priority=", v1::Priority_Name(req.priority())));
  }
  if (req.has_preemptible()) {
    scheduling.set_preemptible(req.preemptible());
    what.push_back(absl::StrCat("preemptible=", req.preemptible() ? "true" : "false"));
  }
  if (req.has_retry_on_system_failure()) {
    scheduling.set_retry_on_system_failure(req.retry_on_system_failure());
    what.push_back(req.retry_on_system_failure() ? "watchdog on" : "watchdog off");
    // A watchdog turned on over `max_retries: 0` would retry nothing: the default applies.
    if (req.retry_on_system_failure() && !req.has_max_retries() && scheduling.has_max_retries() &&
        scheduling.max_retries() == 0) {
      scheduling.clear_max_retries();
    }
  }
  if (req.has_max_retries()) {
    scheduling.set_max_retries(req.max_retries());
    what.push_back(absl::StrCat("max_retries=", req.max_retries()));
  }
  return what;
}

}  // namespace tessera::runs
