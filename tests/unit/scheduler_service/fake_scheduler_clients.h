#pragma once
// The scheduler's clients of other services as in-memory fakes, for its roles' unit tests.

#include <map>
#include <string>
#include <vector>

#include "scheduler/service/health_client.h"
#include "scheduler/service/runs_client.h"

namespace tessera::scheduler {

// The run manager as a list of runs: ListRuns filters it by status; RecordAttempt records the
// attempt and answers with the run it names (NOT_FOUND for another).
class ListedRuns final : public RunsClient {
 public:
  std::vector<v1::Run> runs;
  std::vector<v1::Attempt> recorded;

  absl::StatusOr<std::vector<v1::Run>> ListRuns(
      const std::vector<v1::RunStatus>& statuses) override {
    std::vector<v1::Run> out;
    for (const auto& r : runs) {
      for (auto s : statuses) {
        if (r.status() == s) out.push_back(r);
      }
    }
    return out;
  }
  // How many progress reports the run manager had taken when each attempt end was recorded.
  std::vector<size_t> progress_at_record;
  absl::StatusOr<v1::Run> RecordAttempt(const v1::Attempt& attempt) override {
    recorded.push_back(attempt);
    progress_at_record.push_back(progress.size());
    for (const auto& r : runs) {
      if (r.id() == attempt.run_id()) return r;
    }
    return absl::NotFoundError(attempt.run_id());
  }
  // What ReportProgress answers; the reports it took (answered OK), in order.
  absl::Status progress_answer = absl::OkStatus();
  std::vector<v1::ReportProgressRequest> progress;
  int progress_calls = 0;  // every call, answered or not
  absl::Status ReportProgress(const v1::ReportProgressRequest& req) override {
    ++progress_calls;
    if (progress_answer.ok()) progress.push_back(req);
    return progress_answer;
  }
  std::map<std::string, std::vector<v1::SecretValue>> secrets;  // by run id
  absl::StatusOr<std::vector<v1::SecretValue>> RunSecrets(const std::string& run_id) override {
    return secrets[run_id];
  }
  std::vector<std::string> notes;
  absl::Status RecordNote(const std::string&, int, const std::string& note) override {
    notes.push_back(note);
    return absl::OkStatus();
  }
};

// The health API: takes every report (or refuses all with `answer`), and keeps them.
class RecordingHealth final : public HealthClient {
 public:
  absl::Status answer = absl::OkStatus();
  std::vector<v1::HealthCheckResult> results;
  std::vector<v1::GpuFault> faults;
  std::vector<v1::ReportRankHangRequest> hangs;

  absl::Status ReportHealthResult(const v1::HealthCheckResult& r) override {
    results.push_back(r);
    return answer;
  }
  absl::Status ReportGpuFault(const v1::GpuFault& f) override {
    faults.push_back(f);
    return answer;
  }
  absl::Status ReportRankHang(const v1::ReportRankHangRequest& h) override {
    hangs.push_back(h);
    return answer;
  }
};

}  // namespace tessera::scheduler
