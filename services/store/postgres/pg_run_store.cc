#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <pqxx/pqxx>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "proto/policy/run_status.h"
#include "services/store/filters.h"
#include "services/store/postgres/pg_codec.h"
#include "services/store/postgres/pg_stores.h"

namespace tessera::store {
namespace {

absl::Status InsertEvents(pqxx::work& tx, const std::string& run_id,
                          const std::vector<v1::RunEvent>& events) {
  for (const auto& e : events) {
    v1::RunEvent body = e;
    body.set_run_id(run_id);
    body.clear_id();  // the id is the row's
    tx.exec_params(absl::StrCat("INSERT INTO run_events (run_id, time, body) VALUES ($1, ",
                                MicrosParam(2), ", $3)"),
                   run_id, ToMicros(e.time()), EncodeMessage(body));
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::Run> DecodeRun(const pqxx::row& row, int body_col, int version_col) {
  v1::Run run;
  if (auto st = DecodeMessage(row[body_col], &run); !st.ok()) return st;
  run.set_version(row[version_col].as<int64_t>());
  return run;
}

// Rows of (body, version), appended to `out`.
absl::Status DecodeRuns(const pqxx::result& rows, std::vector<v1::Run>& out) {
  for (const auto& row : rows) {
    auto run = DecodeRun(row, 0, 1);
    if (!run.ok()) return run.status();
    out.push_back(*std::move(run));
  }
  return absl::OkStatus();
}

// The runs.summary column (migration 0017): what ListRuns reads, so that a list never moves the
// commands and parameters its runs' owners wrote (up to a few MiB a run) out of the database.
pqxx::binarystring EncodeSummary(const v1::Run& run) {
  v1::Run summary = run;
  SummarizeRun(&summary);
  return EncodeMessage(summary);
}

// A map of strings as a JSON object (the runs.metadata column, and the filter matched against
// it). PostgreSQL's JSON holds no NUL: a pair with one is left out (filters refuse NUL, so it
// could never be matched). Text is valid UTF-8 (the validator's TextProblem, for specs and
// filters); anything else would be replaced, never thrown on.
std::string MetadataJson(const google::protobuf::Map<std::string, std::string>& metadata) {
  nlohmann::json object = nlohmann::json::object();
  for (const auto& [key, value] : metadata) {
    if (key.find('\0') != std::string::npos || value.find('\0') != std::string::npos) continue;
    object[key] = value;
  }
  return object.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// The runs.ended_at column: when a run that has ended ended; NULL while it has not (a restarted
// run keeps its old ended_at in the body until it ends again).
std::optional<int64_t> EndedAtMicros(const v1::Run& run) {
  if (!IsTerminal(run.status()) || !run.has_ended_at()) return std::nullopt;
  return ToMicros(run.ended_at());
}

class PgRunStore final : public RunStore {
 public:
  explicit PgRunStore(std::shared_ptr<PgPool> pool) : pool_(std::move(pool)) {}

  absl::StatusOr<v1::Run> CreateRun(const v1::Run& run, const std::vector<v1::RunEvent>& events,
                                    const std::optional<IdempotentRunWrite>& idem) override {
    v1::Run stored = run;
    stored.set_version(1);
    absl::Status st = pool_->Transact("creating a run", [&](pqxx::work& tx) -> absl::Status {
      if (idem) TESSERA_RETURN_IF_ERROR(ClaimIdempotencyKey(tx, idem->key));
      tx.exec_params(
          absl::StrCat("INSERT INTO runs (id, name, user_name, status, cluster, "
                       "gpu_type, created_at, version, body, ended_at, team, summary, metadata) "
                       "VALUES ($1, $2, $3, $4, $5, $6, ",
                       MicrosParam(7), ", 1, $8, ", MicrosParam(9), ", $10, $11, $12::jsonb)"),
          stored.id(), stored.name(), stored.user(), static_cast<int>(stored.status()),
          stored.spec().compute().cluster(), stored.spec().compute().gpu_type(),
          ToMicros(stored.created_at()), EncodeMessage(stored), EndedAtMicros(stored),
          stored.team(), EncodeSummary(stored), MetadataJson(stored.spec().metadata()));
      TESSERA_RETURN_IF_ERROR(InsertEvents(tx, stored.id(), events));
      if (idem) RecordClaimedResponse(tx, idem->key, idem->response(stored));
      return absl::OkStatus();
    });
    if (absl::IsAlreadyExists(st)) {
      return absl::AlreadyExistsError(absl::StrCat("run ", run.name(), " already exists"));
    }
    if (!st.ok()) return st;
    return stored;
  }

  absl::StatusOr<v1::Run> GetRun(std::string_view name) override {
    return GetOne("name", name, absl::StrCat("run ", std::string(name), " not found"));
  }

  absl::StatusOr<v1::Run> GetRunById(std::string_view id) override {
    return GetOne("id", id, absl::StrCat("run id ", std::string(id), " not found"));
  }

  absl::StatusOr<std::vector<v1::Run>> ListRuns(const v1::RunFilter& filter) override {
    std::vector<std::string> likes;
    for (const auto& g : filter.name_globs()) likes.push_back(GlobToSqlLike(g));
    std::vector<int> statuses(filter.statuses().begin(), filter.statuses().end());
    const int limit = filter.latest() ? 1 : (filter.limit() > 0 ? filter.limit() : -1);
    const std::string sql = absl::StrCat(
        // Runs written before migration 0017 have no summary until their next write.
        "SELECT COALESCE(summary, body), version FROM runs WHERE"
        " (cardinality($1::text[]) = 0 OR name LIKE ANY ($1::text[]))"
        " AND (cardinality($2::int[]) = 0 OR status = ANY ($2::int[]))"
        " AND ($3 = '' OR user_name = $3)"
        " AND ($4 = '' OR cluster = $4)"
        " AND ($5 = '' OR gpu_type = $5)"
        " AND ($13::jsonb = '{}'::jsonb OR metadata @> $13::jsonb)"
        " AND (NOT $6 OR created_at < ",
        MicrosParam(7), ") AND (NOT $8 OR created_at > ", MicrosParam(9),
        ") AND ($11 = '' OR created_at < ", MicrosParam(12), " OR (created_at = ", MicrosParam(12),
        " AND id COLLATE \"C\" < $11))"
        " ORDER BY created_at DESC, id COLLATE \"C\" DESC"
        " LIMIT CASE WHEN $10 < 0 THEN NULL ELSE $10 END");
    std::vector<v1::Run> out;
    absl::Status st = pool_->Transact("listing runs", [&](pqxx::work& tx) -> absl::Status {
      const pqxx::result rows =
          tx.exec_params(sql, PgTextArray(likes), PgIntArray(statuses), filter.user(),
                         filter.cluster(), filter.gpu_type(), filter.has_created_before(),
                         ToMicros(filter.created_before()), filter.has_created_after(),
                         ToMicros(filter.created_after()), limit, filter.page_after_id(),
                         ToMicros(filter.page_after_created_at()), MetadataJson(filter.metadata()));
      return DecodeRuns(rows, out);
    });
    if (!st.ok()) return st;
    for (auto& run : out) SummarizeRun(&run);  // a run read from its body
    return out;
  }

  absl::StatusOr<v1::Run> UpdateRun(const v1::Run& run, int64_t expected_version,
                                    const std::vector<v1::RunEvent>& events,
                                    const std::vector<v1::Attempt>& attempts,
                                    const std::optional<WriteFence>& fence,
                                    const std::optional<IdempotentRunWrite>& idem) override {
    v1::Run stored = run;
    stored.set_version(expected_version + 1);
    absl::Status st = pool_->Transact("updating a run", [&](pqxx::work& tx) -> absl::Status {
      if (auto fenced = CheckFence(tx, fence); !fenced.ok()) return fenced;
      if (idem) TESSERA_RETURN_IF_ERROR(ClaimIdempotencyKey(tx, idem->key));
      const pqxx::result r = tx.exec_params(
          absl::StrCat("UPDATE runs SET name = $2, user_name = $3, status = $4, cluster = $5,"
                       " gpu_type = $6, version = $7 + 1, body = $8, summary = $10,"
                       " metadata = $11::jsonb, ended_at = ",
                       MicrosParam(9), " WHERE id = $1 AND version = $7"),
          stored.id(), stored.name(), stored.user(), static_cast<int>(stored.status()),
          stored.spec().compute().cluster(), stored.spec().compute().gpu_type(), expected_version,
          EncodeMessage(stored), EndedAtMicros(stored), EncodeSummary(stored),
          MetadataJson(stored.spec().metadata()));
      if (r.affected_rows() == 0) {
        const pqxx::result current =
            tx.exec_params("SELECT version FROM runs WHERE id = $1", stored.id());
        if (current.empty()) {
          return absl::NotFoundError(absl::StrCat("run ", run.name(), " not found"));
        }
        return absl::AbortedError(
            absl::StrCat("run ", run.name(), " changed concurrently (version ",
                         current[0][0].as<int64_t>(), ", expected ", expected_version, ")"));
      }
      for (const auto& a : attempts) UpsertAttempt(tx, stored.id(), a);
      TESSERA_RETURN_IF_ERROR(InsertEvents(tx, stored.id(), events));
      if (idem) RecordClaimedResponse(tx, idem->key, idem->response(stored));
      return absl::OkStatus();
    });
    if (absl::IsAlreadyExists(st)) {
      return absl::AlreadyExistsError(absl::StrCat("run ", run.name(), " already exists"));
    }
    if (!st.ok()) return st;
    return stored;
  }

  absl::Status DeleteRun(std::string_view id, const std::optional<IdempotentRunWrite>& idem,
                         std::optional<int64_t> expected_version) override {
    return pool_->Transact("deleting a run", [&](pqxx::work& tx) -> absl::Status {
      if (idem) TESSERA_RETURN_IF_ERROR(ClaimIdempotencyKey(tx, idem->key));
      // Attempts and events go with it (ON DELETE CASCADE).
      const pqxx::result r = tx.exec_params(
          "DELETE FROM runs WHERE id = $1 AND ($2::bigint IS NULL OR version = $2)"
          " RETURNING body, version",
          std::string(id), expected_version);
      if (r.empty()) {
        const pqxx::result current =
            tx.exec_params("SELECT version FROM runs WHERE id = $1", std::string(id));
        if (current.empty())
          return absl::NotFoundError(absl::StrCat("run id ", std::string(id), " not found"));
        return absl::AbortedError(
            absl::StrCat("run id ", std::string(id), " changed concurrently (version ",
                         current[0][0].as<int64_t>(), ", expected ", *expected_version, ")"));
      }
      if (idem) {
        auto deleted = DecodeRun(r[0], 0, 1);
        if (!deleted.ok()) return deleted.status();
        RecordClaimedResponse(tx, idem->key, idem->response(*deleted));
      }
      return absl::OkStatus();
    });
  }

  absl::StatusOr<std::vector<v1::Run>> ListRunsEndedBefore(absl::Time before, int limit) override {
    std::vector<v1::Run> out;
    absl::Status st = pool_->Transact("listing ended runs", [&](pqxx::work& tx) -> absl::Status {
      const pqxx::result rows = tx.exec_params(
          absl::StrCat("SELECT body, version FROM runs WHERE ended_at < ", MicrosParam(1),
                       " ORDER BY ended_at, id COLLATE \"C\" LIMIT $2"),
          absl::ToUnixMicros(before), limit);
      return DecodeRuns(rows, out);
    });
    if (!st.ok()) return st;
    return out;
  }

  absl::Status PutAttempt(const v1::Attempt& attempt) override {
    return pool_->Transact("recording an attempt", [&](pqxx::work& tx) -> absl::Status {
      const pqxx::result exists =
          tx.exec_params("SELECT 1 FROM runs WHERE id = $1 FOR UPDATE", attempt.run_id());
      if (exists.empty()) {
        return absl::NotFoundError(absl::StrCat("run id ", attempt.run_id(), " not found"));
      }
      UpsertAttempt(tx, attempt.run_id(), attempt);
      return absl::OkStatus();
    });
  }

  absl::StatusOr<std::vector<v1::Attempt>> ListAttempts(std::string_view run_id) override {
    std::vector<v1::Attempt> out;
    absl::Status st = pool_->Transact("listing attempts", [&](pqxx::work& tx) -> absl::Status {
      return DecodeBodyRows(
          tx.exec_params(
              "SELECT body FROM run_attempts WHERE run_id = $1 ORDER BY resumption_index",
              std::string(run_id)),
          &out);
    });
    if (!st.ok()) return st;
    return out;
  }

  absl::Status AddProgressPoint(std::string_view run_id, const ProgressPoint& point, int64_t stride,
                                int64_t thin_from) override {
    if (stride < 1) return absl::InvalidArgumentError("stride: at least 1");
    return pool_->Transact("keeping a progress point", [&](pqxx::work& tx) -> absl::Status {
      // The run's row is not locked: the foreign key refuses a point of a deleted run.
      try {
        tx.exec_params(absl::StrCat("INSERT INTO run_progress (run_id, resumption_index, step,"
                                    " time, loss, learning_rate, tokens_per_second, mfu)"
                                    " VALUES ($1, $2, $3, ",
                                    MicrosParam(4),
                                    ", $5, $6, $7, $8) ON CONFLICT (run_id, resumption_index, step)"
                                    " DO UPDATE SET time = EXCLUDED.time, loss = EXCLUDED.loss,"
                                    " learning_rate = EXCLUDED.learning_rate,"
                                    " tokens_per_second = EXCLUDED.tokens_per_second,"
                                    " mfu = EXCLUDED.mfu"),
                       std::string(run_id), point.resumption_index, point.step,
                       absl::ToUnixMicros(point.time), point.loss, point.learning_rate,
                       point.tokens_per_second, point.mfu);
      } catch (const pqxx::foreign_key_violation&) {
        return absl::NotFoundError(absl::StrCat("run id ", std::string(run_id), " not found"));
      }
      if (stride > 1 && thin_from < point.step) {
        // Each point in the range whose bucket holds an earlier point goes (the earliest of a
        // bucket may lie before thin_from).
        tx.exec_params(
            "DELETE FROM run_progress p WHERE p.run_id = $1 AND p.resumption_index = $2"
            " AND p.step >= $3 AND p.step < $4 AND EXISTS (SELECT 1 FROM run_progress q"
            " WHERE q.run_id = $1 AND q.resumption_index = $2 AND q.step < p.step"
            " AND q.step >= (p.step / $5) * $5)",
            std::string(run_id), point.resumption_index, thin_from, point.step, stride);
      }
      return absl::OkStatus();
    });
  }

  absl::StatusOr<std::vector<ProgressPoint>> ListProgress(std::string_view run_id) override {
    std::vector<ProgressPoint> out;
    absl::Status st = pool_->Transact("listing progress", [&](pqxx::work& tx) -> absl::Status {
      for (const auto& row : tx.exec_params(
               "SELECT resumption_index, step, (extract(epoch FROM time) * 1000000)::bigint,"
               " loss, learning_rate, tokens_per_second, mfu FROM run_progress"
               " WHERE run_id = $1 ORDER BY resumption_index, step",
               std::string(run_id))) {
        ProgressPoint p;
        p.resumption_index = row[0].as<int32_t>();
        p.step = row[1].as<int64_t>();
        p.time = absl::FromUnixMicros(row[2].as<int64_t>());
        p.loss = row[3].as<double>();
        p.learning_rate = row[4].as<double>();
        p.tokens_per_second = row[5].as<double>();
        p.mfu = row[6].as<double>();
        out.push_back(p);
      }
      return absl::OkStatus();
    });
    if (!st.ok()) return st;
    return out;
  }

  absl::StatusOr<v1::RunEvent> AppendEvent(const v1::RunEvent& event) override {
    v1::RunEvent stored = event;
    absl::Status st = pool_->Transact("appending a run event", [&](pqxx::work& tx) -> absl::Status {
      const pqxx::result exists =
          tx.exec_params("SELECT 1 FROM runs WHERE id = $1", event.run_id());
      if (exists.empty()) {
        return absl::NotFoundError(absl::StrCat("run id ", event.run_id(), " not found"));
      }
      v1::RunEvent body = event;
      body.clear_id();
      const pqxx::result r =
          tx.exec_params(absl::StrCat("INSERT INTO run_events (run_id, time, body) VALUES ($1, ",
                                      MicrosParam(2), ", $3) RETURNING id"),
                         event.run_id(), ToMicros(event.time()), EncodeMessage(body));
      stored.set_id(r[0][0].as<int64_t>());
      return absl::OkStatus();
    });
    if (!st.ok()) return st;
    return stored;
  }

  absl::StatusOr<int64_t> UserUid(std::string_view user) override {
    if (user.empty()) return absl::InvalidArgumentError("user: required for a uid");
    int64_t uid = 0;
    absl::Status st = pool_->Transact("giving a user a uid", [&](pqxx::work& tx) -> absl::Status {
      // Two control planes asking at once: one insert wins, both read the winner's uid.
      tx.exec_params(
          "INSERT INTO user_uids (user_name, uid) VALUES ($1, $2 + nextval('user_uid_seq')) "
          "ON CONFLICT (user_name) DO NOTHING",
          std::string(user), kFirstUserUid - 1);
      uid = tx.exec_params1("SELECT uid FROM user_uids WHERE user_name = $1", std::string(user))[0]
                .as<int64_t>();
      return absl::OkStatus();
    });
    if (!st.ok()) return st;
    return uid;
  }

  absl::StatusOr<std::vector<v1::RunEvent>> ListEvents(std::string_view run_id, int64_t after_id,
                                                       int limit) override {
    std::vector<v1::RunEvent> out;
    absl::Status st = pool_->Transact("listing run events", [&](pqxx::work& tx) -> absl::Status {
      return DecodeIdRows(
          tx.exec_params("SELECT id, body FROM run_events WHERE run_id = $1 AND id > $2 ORDER BY id"
                         " LIMIT CASE WHEN $3 <= 0 THEN NULL ELSE $3 END",
                         std::string(run_id), after_id, limit),
          &out);
    });
    if (!st.ok()) return st;
    return out;
  }

  absl::StatusOr<std::vector<v1::RunEvent>> ListAllEvents(int64_t after_id, int limit) override {
    std::vector<v1::RunEvent> out;
    absl::Status st = pool_->Transact("listing run events", [&](pqxx::work& tx) -> absl::Status {
      return DecodeIdRows(tx.exec_params("SELECT id, body FROM run_events WHERE id > $1 ORDER BY id"
                                         " LIMIT CASE WHEN $2 <= 0 THEN NULL ELSE $2 END",
                                         after_id, limit),
                          &out);
    });
    if (!st.ok()) return st;
    return out;
  }

 private:
  static void UpsertAttempt(pqxx::work& tx, const std::string& run_id, const v1::Attempt& attempt) {
    // The start and end as columns too, for usage (UsageStore); kNoTime (not a std::optional,
    // which GCC 12 takes for uninitialized through libpqxx) stands for NULL.
    constexpr int64_t kNoTime = std::numeric_limits<int64_t>::min();
    const auto nullable = [](int n) {
      return absl::StrCat("(timestamptz 'epoch' + NULLIF($", n,
                          "::bigint, '-9223372036854775808'::bigint) * interval '1 microsecond')");
    };
    const int64_t started = attempt.has_started_at() ? ToMicros(attempt.started_at()) : kNoTime;
    const int64_t ended = attempt.has_ended_at() ? ToMicros(attempt.ended_at()) : kNoTime;
    tx.exec_params(
        absl::StrCat("INSERT INTO run_attempts (run_id, resumption_index, body, started_at, "
                     "ended_at) VALUES ($1, $2, $3, ",
                     nullable(4), ", ", nullable(5),
                     ") ON CONFLICT (run_id, resumption_index) DO UPDATE SET body = "
                     "EXCLUDED.body, started_at = EXCLUDED.started_at, ended_at = "
                     "EXCLUDED.ended_at"),
        run_id, attempt.resumption_index(), EncodeMessage(attempt), started, ended);
  }

  absl::StatusOr<v1::Run> GetOne(const char* column, std::string_view key,
                                 const std::string& not_found) {
    v1::Run run;
    absl::Status st = pool_->Transact("reading a run", [&](pqxx::work& tx) -> absl::Status {
      const pqxx::result rows = tx.exec_params(
          absl::StrCat("SELECT body, version FROM runs WHERE ", column, " = $1"), std::string(key));
      if (rows.empty()) return absl::NotFoundError(not_found);
      auto decoded = DecodeRun(rows[0], 0, 1);
      if (!decoded.ok()) return decoded.status();
      run = *std::move(decoded);
      return absl::OkStatus();
    });
    if (!st.ok()) return st;
    return run;
  }

  std::shared_ptr<PgPool> pool_;
};

}  // namespace

absl::Status BackfillRunMetadata(PgPool& pool) {
  constexpr int kBatch = 200;
  for (;;) {
    int filled = 0;
    TESSERA_RETURN_IF_ERROR(
        pool.Transact("filling in runs' metadata", [&](pqxx::work& tx) -> absl::Status {
          const pqxx::result rows =
              tx.exec_params("SELECT id, body FROM runs WHERE metadata IS NULL LIMIT $1", kBatch);
          for (const auto& row : rows) {
            v1::Run run;
            // A body that does not decode has no metadata to find runs by: '{}', so that the
            // loop ends (its reads fail the same way, loudly).
            const std::string metadata = DecodeMessage(row[1], &run).ok()
                                             ? MetadataJson(run.spec().metadata())
                                             : std::string("{}");
            tx.exec_params("UPDATE runs SET metadata = $2::jsonb WHERE id = $1",
                           row[0].as<std::string>(), metadata);
          }
          filled = static_cast<int>(rows.size());
          return absl::OkStatus();
        }));
    if (filled < kBatch) return absl::OkStatus();
  }
}

std::shared_ptr<RunStore> MakePgRunStore(std::shared_ptr<PgPool> pool) {
  return std::make_shared<PgRunStore>(std::move(pool));
}

}  // namespace tessera::store
