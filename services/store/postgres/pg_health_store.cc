#include <pqxx/pqxx>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "services/store/postgres/pg_codec.h"
#include "services/store/postgres/pg_stores.h"

namespace tessera::store {
namespace {

class PgHealthStore final : public HealthStore {
 public:
  explicit PgHealthStore(std::shared_ptr<PgPool> pool) : pool_(std::move(pool)) {}

  absl::Status CreateSweep(const v1::Sweep& sweep) override {
    absl::Status st = pool_->Transact("creating a sweep", [&](pqxx::work& tx) {
      tx.exec_params(absl::StrCat("INSERT INTO health_sweeps (id, created_at, body) VALUES ($1, ",
                                  MicrosParam(2), ", $3)"),
                     sweep.id(), ToMicros(sweep.created_at()), EncodeMessage(sweep));
      return absl::OkStatus();
    });
    if (absl::IsAlreadyExists(st)) {
      return absl::AlreadyExistsError(absl::StrCat("sweep ", sweep.id(), " already exists"));
    }
    return st;
  }

  absl::StatusOr<v1::Sweep> GetSweep(std::string_view id) override {
    v1::Sweep sweep;
    absl::Status st = pool_->Transact("reading a sweep", [&](pqxx::work& tx) -> absl::Status {
      const pqxx::result rows =
          tx.exec_params("SELECT body FROM health_sweeps WHERE id = $1", std::string(id));
      if (rows.empty())
        return absl::NotFoundError(absl::StrCat("sweep ", std::string(id), " not found"));
      return DecodeMessage(rows[0][0], &sweep);
    });
    if (!st.ok()) return st;
    return sweep;
  }

  absl::Status UpdateSweep(const v1::Sweep& sweep) override {
    return pool_->Transact("updating a sweep", [&](pqxx::work& tx) -> absl::Status {
      const pqxx::result r = tx.exec_params("UPDATE health_sweeps SET body = $2 WHERE id = $1",
                                            sweep.id(), EncodeMessage(sweep));
      if (r.affected_rows() == 0) {
        return absl::NotFoundError(absl::StrCat("sweep ", sweep.id(), " not found"));
      }
      return absl::OkStatus();
    });
  }

  absl::StatusOr<std::vector<v1::Sweep>> ListSweeps(int limit) override {
    std::vector<v1::Sweep> out;
    absl::Status st = pool_->Transact("listing sweeps", [&](pqxx::work& tx) -> absl::Status {
      return DecodeBodyRows(
          tx.exec_params(
              "SELECT body FROM health_sweeps ORDER BY created_at DESC, id COLLATE \"C\" DESC"
              " LIMIT CASE WHEN $1 <= 0 THEN NULL ELSE $1 END",
              limit),
          &out);
    });
    if (!st.ok()) return st;
    return out;
  }

  absl::StatusOr<int64_t> DeleteSweepsBefore(absl::Time before, int limit) override {
    int64_t deleted = 0;
    absl::Status st = pool_->Transact("removing old sweeps", [&](pqxx::work& tx) -> absl::Status {
      deleted = 0;
      // The state is in the body: the oldest candidates are read, the running ones kept.
      std::vector<v1::Sweep> old;
      TESSERA_RETURN_IF_ERROR(DecodeBodyRows(
          tx.exec_params(
              absl::StrCat("SELECT body FROM health_sweeps WHERE created_at < ", MicrosParam(1),
                           " ORDER BY created_at, id COLLATE \"C\""
                           " LIMIT CASE WHEN $2 <= 0 THEN NULL ELSE $2 END"
                           " FOR UPDATE"),
              absl::ToUnixMicros(before), limit),
          &old));
      std::vector<std::string> ids;
      for (const auto& sweep : old) {
        if (sweep.state() != v1::SWEEP_STATE_RUNNING) ids.push_back(sweep.id());
      }
      if (ids.empty()) return absl::OkStatus();
      tx.exec_params("DELETE FROM health_results WHERE sweep_id = ANY ($1::text[])",
                     PgTextArray(ids));
      deleted = static_cast<int64_t>(
          tx.exec_params("DELETE FROM health_sweeps WHERE id = ANY ($1::text[])", PgTextArray(ids))
              .affected_rows());
      return absl::OkStatus();
    });
    if (!st.ok()) return st;
    return deleted;
  }

  absl::StatusOr<v1::HealthCheckResult> AddResult(const v1::HealthCheckResult& result) override {
    v1::HealthCheckResult stored = result;
    absl::Status st = pool_->Transact("recording a health result", [&](pqxx::work& tx) {
      v1::HealthCheckResult body = result;
      body.clear_id();
      const pqxx::result r = tx.exec_params(
          "INSERT INTO health_results (sweep_id, node_name, body) VALUES ($1, $2, $3)"
          " RETURNING id",
          result.sweep_id(), result.node_name(), EncodeMessage(body));
      stored.set_id(r[0][0].as<int64_t>());
      return absl::OkStatus();
    });
    if (!st.ok()) return st;
    return stored;
  }

  absl::StatusOr<std::vector<v1::HealthCheckResult>> ListResults(
      const std::vector<std::string>& node_names, std::string_view sweep_id, int limit) override {
    std::vector<v1::HealthCheckResult> out;
    absl::Status st =
        pool_->Transact("listing health results", [&](pqxx::work& tx) -> absl::Status {
          return DecodeIdRows(
              tx.exec_params("SELECT id, body FROM health_results WHERE"
                             " (cardinality($1::text[]) = 0 OR node_name = ANY ($1::text[]))"
                             " AND ($2 = '' OR sweep_id = $2)"
                             " ORDER BY id DESC LIMIT CASE WHEN $3 <= 0 THEN NULL ELSE $3 END",
                             PgTextArray(node_names), std::string(sweep_id), limit),
              &out);
        });
    if (!st.ok()) return st;
    return out;
  }

 private:
  std::shared_ptr<PgPool> pool_;
};

}  // namespace

std::shared_ptr<HealthStore> MakePgHealthStore(std::shared_ptr<PgPool> pool) {
  return std::make_shared<PgHealthStore>(std::move(pool));
}

}  // namespace tessera::store
