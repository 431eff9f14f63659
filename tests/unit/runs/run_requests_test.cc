// What people may ask of runs: filters and updates refused with the field they get wrong, and an
// update's changes (the watchdog among them) applied as its event says.
#include "services/runs/run_requests.h"

#include <catch2/catch.hpp>

#include "services/runs/lifecycle.h"

namespace tessera::runs {
namespace run_requests_test {

std::string FilterError(const v1::RunFilter& filter) {
  return std::string(CheckRunFilter(filter).message());
}

TEST_CASE("run filters: metadata pairs are bounded and must be text", "[runs][requests]") {
  v1::RunFilter f;
  (*f.mutable_metadata())["team"] = "nlp";
  CHECK(CheckRunFilter(f).ok());
  (*f.mutable_metadata())[""] = "x";
  CHECK(FilterError(f).find("filter.metadata: a key must have 1 to 256 bytes") == 0);
  f.mutable_metadata()->erase("");
  (*f.mutable_metadata())["bad"] = std::string("a\0b", 3);
  CHECK(FilterError(f) == "filter.metadata.bad: text holds a NUL byte");
  (*f.mutable_metadata())["bad"] = "\xff";
  CHECK(FilterError(f).find("filter.metadata.bad: text is not valid UTF-8") == 0);
  (*f.mutable_metadata())["bad"] = std::string(4097, 'v');
  CHECK(FilterError(f) == "filter.metadata.bad: a value has at most 4096 bytes");
  f.mutable_metadata()->clear();
  for (int i = 0; i <= kMaxMetadataFilters; ++i) (*f.mutable_metadata())[std::to_string(i)] = "";
  CHECK(FilterError(f) == "filter.metadata: at most 16 pairs, got 17");
}

TEST_CASE("run filters: limit, globs and statuses keep their checks", "[runs][requests]") {
  v1::RunFilter f;
  f.set_limit(kMaxListLimit + 1);
  CHECK(FilterError(f).find("filter.limit") == 0);
  f.set_limit(0);
  f.add_name_globs("");
  CHECK(FilterError(f).find("filter.name_globs") == 0);
  f.clear_name_globs();
  f.add_statuses(v1::RUN_STATUS_UNSPECIFIED);
  CHECK(FilterError(f).find("filter.statuses") == 0);
}

TEST_CASE("updates: each field checked, nothing to change refused", "[runs][requests]") {
  v1::UpdateRunRequest r;
  CHECK(CheckUpdateRequest(r).message().find("nothing to update") == 0);
  r.set_max_retries(-1);
  CHECK(CheckUpdateRequest(r).message() == "max_retries: must be between 0 and 1000, got -1");
  r.set_max_retries(3);
  CHECK(CheckUpdateRequest(r).ok());
  r.set_retry_on_system_failure(false);
  CHECK(CheckUpdateRequest(r).message().find("max_retries: not with retry_on_system_failure "
                                             "false") == 0);
  r.clear_max_retries();
  CHECK(CheckUpdateRequest(r).ok());
  r.set_max_duration_hours(-1);
  CHECK(CheckUpdateRequest(r).message().find("max_duration_hours") == 0);
  r.clear_max_duration_hours();
  r.set_priority(static_cast<v1::Priority>(99));
  CHECK(CheckUpdateRequest(r).message().find("priority") == 0);
}

TEST_CASE("the watchdog turns system-failure retries on and off", "[runs][requests]") {
  v1::RunSpec spec;
  CHECK(RetryLimit(spec) == 0);  // not asked for: no retries

  v1::UpdateRunRequest on;
  on.set_retry_on_system_failure(true);
  CHECK(ApplyUpdate(on, *spec.mutable_scheduling()) == std::vector<std::string>{"watchdog on"});
  CHECK(RetryLimit(spec) == 10);  // mcli's default

  v1::UpdateRunRequest more;
  more.set_retry_on_system_failure(true);
  more.set_max_retries(3);
  CHECK(ApplyUpdate(more, *spec.mutable_scheduling()) ==
        std::vector<std::string>{"watchdog on", "max_retries=3"});
  CHECK(RetryLimit(spec) == 3);

  // Off in so many words wins over the run's max_retries.
  v1::UpdateRunRequest off;
  off.set_retry_on_system_failure(false);
  CHECK(ApplyUpdate(off, *spec.mutable_scheduling()) == std::vector<std::string>{"watchdog off"});
  CHECK(RetryLimit(spec) == 0);
  CHECK(spec.scheduling().max_retries() == 3);  // kept for retry_on_exit_codes

  // Turned on over `max_retries: 0`, the default applies rather than no retries at all.
  spec.mutable_scheduling()->set_max_retries(0);
  ApplyUpdate(on, *spec.mutable_scheduling());
  CHECK_FALSE(spec.scheduling().has_max_retries());
  CHECK(RetryLimit(spec) == 10);
}

}  // namespace run_requests_test
}  // namespace tessera::runs
