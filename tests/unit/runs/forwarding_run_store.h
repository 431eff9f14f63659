#pragma once
// A RunStore that hands every call to another: tests derive from it and change only the calls
// they are about (a reply lost while committing, a restart racing the retention).

#include <memory>

#include "services/store/run_store.h"

namespace tessera::runs::testing {

class ForwardingRunStore : public store::RunStore {
 public:
  explicit ForwardingRunStore(std::shared_ptr<store::RunStore> inner) : inner_(std::move(inner)) {}

  absl::StatusOr<v1::Run> CreateRun(const v1::Run& run, const std::vector<v1::RunEvent>& events,
                                    const std::optional<store::IdempotentRunWrite>& idem) override {
    return inner_->CreateRun(run, events, idem);
  }
  absl::StatusOr<v1::Run> GetRun(std::string_view name) override { return inner_->GetRun(name); }
  absl::StatusOr<v1::Run> GetRunById(std::string_view id) override {
    return inner_->GetRunById(id);
  }
  absl::StatusOr<std::vector<v1::Run>> ListRuns(const v1::RunFilter& filter) override {
    return inner_->ListRuns(filter);
  }
  absl::StatusOr<v1::Run> UpdateRun(const v1::Run& run, int64_t expected_version,
                                    const std::vector<v1::RunEvent>& events,
                                    const std::vector<v1::Attempt>& attempts,
                                    const std::optional<store::WriteFence>& fence,
                                    const std::optional<store::IdempotentRunWrite>& idem) override {
    return inner_->UpdateRun(run, expected_version, events, attempts, fence, idem);
  }
  absl::Status DeleteRun(std::string_view id, const std::optional<store::IdempotentRunWrite>& idem,
                         std::optional<int64_t> expected_version) override {
    return inner_->DeleteRun(id, idem, expected_version);
  }
  absl::StatusOr<std::vector<v1::Run>> ListRunsEndedBefore(absl::Time before, int limit) override {
    return inner_->ListRunsEndedBefore(before, limit);
  }
  absl::Status PutAttempt(const v1::Attempt& attempt) override {
    return inner_->PutAttempt(attempt);
  }
  absl::StatusOr<std::vector<v1::Attempt>> ListAttempts(std::string_view run_id) override {
    return inner_->ListAttempts(run_id);
  }
  absl::StatusOr<v1::RunEvent> AppendEvent(const v1::RunEvent& event) override {
    return inner_->AppendEvent(event);
  }
  absl::StatusOr<std::vector<v1::RunEvent>> ListEvents(std::string_view run_id, int64_t after_id,
                                                       int limit) override {
    return inner_->ListEvents(run_id, after_id, limit);
  }
  absl::StatusOr<std::vector<v1::RunEvent>> ListAllEvents(int64_t after_id, int limit) override {
    return inner_->ListAllEvents(after_id, limit);
  }
  absl::Status AddProgressPoint(std::string_view run_id, const store::ProgressPoint& point,
                                int64_t stride, int64_t thin_from) override {
    return inner_->AddProgressPoint(run_id, point, stride, thin_from);
  }
  absl::StatusOr<std::vector<store::ProgressPoint>> ListProgress(std::string_view run_id) override {
    return inner_->ListProgress(run_id);
  }
  absl::StatusOr<int64_t> UserUid(std::string_view user) override { return inner_->UserUid(user); }

 protected:
  const std::shared_ptr<store::RunStore>& inner() const { return inner_; }

 private:
  std::shared_ptr<store::RunStore> inner_;
};

}  // namespace tessera::runs::testing
