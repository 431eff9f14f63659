// Usage in PostgreSQL: attempts by their start and end columns (migration 0016), with their
// run's owner, team and compute request.
#include <pqxx/pqxx>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "services/store/postgres/pg_codec.h"
#include "services/store/postgres/pg_stores.h"

namespace tessera::store {
namespace {

class PgUsageStore final : public UsageStore {
 public:
  explicit PgUsageStore(std::shared_ptr<PgPool> pool) : pool_(std::move(pool)) {}

  absl::StatusOr<std::vector<AttemptUsage>> ListAttemptUsage(absl::Time since,
                                                             absl::Time until) override {
    std::vector<AttemptUsage> out;
    absl::Status st = pool_->Transact("reading GPU usage", [&](pqxx::work& tx) -> absl::Status {
      const pqxx::result rows = tx.exec_params(
          absl::StrCat("SELECT a.body, r.id, r.name, r.user_name, r.team, r.cluster, r.gpu_type "
                       "FROM run_attempts a JOIN runs r ON r.id = a.run_id "
                       "WHERE a.started_at IS NOT NULL AND a.started_at < ",
                       MicrosParam(2), " AND (a.ended_at IS NULL OR a.ended_at >= ", MicrosParam(1),
                       ") ORDER BY a.started_at, a.run_id, a.resumption_index"),
          absl::ToUnixMicros(since), absl::ToUnixMicros(until));
      for (const auto& row : rows) {
        v1::Attempt attempt;
        TESSERA_RETURN_IF_ERROR(DecodeMessage(row[0], &attempt));
        v1::Run run;
        run.set_id(row[1].as<std::string>());
        run.set_name(row[2].as<std::string>());
        run.set_user(row[3].as<std::string>());
        run.set_team(row[4].as<std::string>());
        run.mutable_spec()->mutable_compute()->set_cluster(row[5].as<std::string>());
        run.mutable_spec()->mutable_compute()->set_gpu_type(row[6].as<std::string>());
        out.push_back(UsageOf(run, attempt));
      }
      return absl::OkStatus();
    });
    if (!st.ok()) return st;
    return out;
  }

 private:
  std::shared_ptr<PgPool> pool_;
};

}  // namespace

std::shared_ptr<UsageStore> MakePgUsageStore(std::shared_ptr<PgPool> pool) {
  return std::make_shared<PgUsageStore>(std::move(pool));
}

}  // namespace tessera::store
