#include <pqxx/pqxx>

#include "absl/strings/str_cat.h"
#include "services/store/postgres/pg_codec.h"
#include "services/store/postgres/pg_stores.h"

namespace tessera::store {
namespace {

absl::StatusOr<int64_t> InsertNodeEvent(pqxx::work& tx, const v1::NodeEvent& event) {
  v1::NodeEvent body = event;
  body.clear_id();  // the id is the row's
  const pqxx::result r = tx.exec_params(
      absl::StrCat("INSERT INTO node_events (node_name, type, time, body) VALUES ($1, $2, ",
                   MicrosParam(3), ", $4) RETURNING id"),
      event.node_name(), static_cast<int>(event.type()), ToMicros(event.time()),
      EncodeMessage(body));
  return r[0][0].as<int64_t>();
}

// A node's last heartbeat and lease expiry as RecordHeartbeats stores them (beside the body,
// which a state change writes): read with the body and put on it where later.
constexpr char kHeartbeatColumns[] = "last_heartbeat_micros, lease_expires_micros";

absl::Status DecodeNodeRow(const pqxx::row& row, v1::Node* node) {
  TESSERA_RETURN_IF_ERROR(DecodeMessage(row[0], node));
  node->set_version(row[1].as<int64_t>());
  if (!row[2].is_null()) {
    KeepLaterHeartbeat(*node, absl::FromUnixMicros(row[2].as<int64_t>()),
                       absl::FromUnixMicros(row[3].as<int64_t>()));
  }
  return absl::OkStatus();
}

class PgNodeStore final : public NodeStore {
 public:
  explicit PgNodeStore(std::shared_ptr<PgPool> pool) : pool_(std::move(pool)) {}

  absl::StatusOr<v1::Node> CreateNode(const v1::Node& node,
                                      const std::optional<WriteFence>& fence) override {
    v1::Node stored = node;
    stored.set_version(1);
    absl::Status st = pool_->Transact("registering a node", [&](pqxx::work& tx) -> absl::Status {
      if (auto fenced = CheckFence(tx, fence); !fenced.ok()) return fenced;
      tx.exec_params(
          "INSERT INTO nodes (name, cluster, gpu_type, liveness, admin_state, version, body)"
          " VALUES ($1, $2, $3, $4, $5, 1, $6)",
          stored.name(), stored.cluster(), stored.gpu_type(), static_cast<int>(stored.liveness()),
          static_cast<int>(stored.admin_state()), EncodeMessage(stored));
      return absl::OkStatus();
    });
    if (absl::IsAlreadyExists(st)) {
      return absl::AlreadyExistsError(absl::StrCat("node ", node.name(), " already exists"));
    }
    if (!st.ok()) return st;
    return stored;
  }

  absl::StatusOr<v1::Node> GetNode(std::string_view name) override {
    v1::Node node;
    absl::Status st = pool_->Transact("reading a node", [&](pqxx::work& tx) -> absl::Status {
      const pqxx::result rows = tx.exec_params(
          absl::StrCat("SELECT body, version, ", kHeartbeatColumns, " FROM nodes WHERE name = $1"),
          std::string(name));
      if (rows.empty())
        return absl::NotFoundError(absl::StrCat("node ", std::string(name), " not found"));
      return DecodeNodeRow(rows[0], &node);
    });
    if (!st.ok()) return st;
    return node;
  }

  absl::StatusOr<std::vector<v1::Node>> ListNodes(const v1::NodeFilter& filter) override {
    std::vector<int> liveness(filter.liveness().begin(), filter.liveness().end());
    std::vector<int> admin(filter.admin_states().begin(), filter.admin_states().end());
    std::vector<std::string> names(filter.names().begin(), filter.names().end());
    std::vector<v1::Node> out;
    absl::Status st = pool_->Transact("listing nodes", [&](pqxx::work& tx) -> absl::Status {
      const pqxx::result rows = tx.exec_params(
          absl::StrCat(
              "SELECT body, version, ", kHeartbeatColumns,
              " FROM nodes WHERE ($1 = '' OR cluster = $1)"
              " AND ($2 = '' OR gpu_type = $2)"
              " AND (cardinality($3::int[]) = 0 OR liveness = ANY ($3::int[]))"
              " AND (cardinality($4::int[]) = 0 OR admin_state = ANY ($4::int[]))"
              " AND (cardinality($5::text[]) = 0 OR name = ANY ($5::text[]))"
              " ORDER BY name COLLATE \"C\" LIMIT CASE WHEN $6 <= 0 THEN NULL ELSE $6 END"),
          filter.cluster(), filter.gpu_type(), PgIntArray(liveness), PgIntArray(admin),
          PgTextArray(names), filter.limit());
      for (const auto& row : rows) {
        v1::Node node;
        if (auto s = DecodeNodeRow(row, &node); !s.ok()) return s;
        out.push_back(std::move(node));
      }
      return absl::OkStatus();
    });
    if (!st.ok()) return st;
    return out;
  }

  absl::StatusOr<v1::Node> UpdateNode(const v1::Node& node, int64_t expected_version,
                                      const std::vector<v1::NodeEvent>& events,
                                      const std::optional<WriteFence>& fence) override {
    v1::Node stored = node;
    stored.set_version(expected_version + 1);
    absl::Status st = pool_->Transact("updating a node", [&](pqxx::work& tx) -> absl::Status {
      if (auto fenced = CheckFence(tx, fence); !fenced.ok()) return fenced;
      const pqxx::result r = tx.exec_params(
          "UPDATE nodes SET cluster = $2, gpu_type = $3, liveness = $4, admin_state = $5,"
          " version = $6 + 1, body = $7 WHERE name = $1 AND version = $6",
          stored.name(), stored.cluster(), stored.gpu_type(), static_cast<int>(stored.liveness()),
          static_cast<int>(stored.admin_state()), expected_version, EncodeMessage(stored));
      if (r.affected_rows() == 0) {
        const pqxx::result current =
            tx.exec_params("SELECT version FROM nodes WHERE name = $1", stored.name());
        if (current.empty()) {
          return absl::NotFoundError(absl::StrCat("node ", node.name(), " not found"));
        }
        return absl::AbortedError(
            absl::StrCat("node ", node.name(), " changed concurrently (version ",
                         current[0][0].as<int64_t>(), ", expected ", expected_version, ")"));
      }
      for (const auto& e : events) {
        auto id = InsertNodeEvent(tx, e);
        if (!id.ok()) return id.status();
      }
      return absl::OkStatus();
    });
    if (!st.ok()) return st;
    return stored;
  }

  absl::Status RecordHeartbeats(const std::vector<HeartbeatSummary>& beats) override {
    if (beats.empty()) return absl::OkStatus();
    std::vector<std::string> names;
    std::vector<int64_t> beat, expires;
    for (const auto& b : beats) {
      names.push_back(b.node);
      beat.push_back(absl::ToUnixMicros(b.last_heartbeat));
      expires.push_back(absl::ToUnixMicros(b.lease_expires));
    }
    return pool_->Transact("storing nodes' heartbeats", [&](pqxx::work& tx) -> absl::Status {
      // In name order, as every writer of several nodes locks them.
      tx.exec_params(
          "UPDATE nodes n SET last_heartbeat_micros = GREATEST(n.last_heartbeat_micros, u.beat),"
          " lease_expires_micros = GREATEST(n.lease_expires_micros, u.expires)"
          " FROM (SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[])"
          "   AS u(name, beat, expires) ORDER BY name) u WHERE n.name = u.name",
          PgTextArray(names), PgIntArray(beat), PgIntArray(expires));
      return absl::OkStatus();
    });
  }

  absl::Status DeleteNode(std::string_view name) override {
    return pool_->Transact("removing a node", [&](pqxx::work& tx) -> absl::Status {
      const pqxx::result r = tx.exec_params("DELETE FROM nodes WHERE name = $1", std::string(name));
      if (r.affected_rows() == 0)
        return absl::NotFoundError(absl::StrCat("node ", std::string(name), " not found"));
      return absl::OkStatus();
    });
  }

 private:
  std::shared_ptr<PgPool> pool_;
};

class PgNodeEventStore final : public NodeEventStore {
 public:
  explicit PgNodeEventStore(std::shared_ptr<PgPool> pool) : pool_(std::move(pool)) {}

  absl::StatusOr<v1::NodeEvent> AppendNodeEvent(const v1::NodeEvent& event) override {
    v1::NodeEvent stored = event;
    absl::Status st =
        pool_->Transact("appending a node event", [&](pqxx::work& tx) -> absl::Status {
          auto id = InsertNodeEvent(tx, event);
          if (!id.ok()) return id.status();
          stored.set_id(*id);
          return absl::OkStatus();
        });
    if (!st.ok()) return st;
    return stored;
  }

  absl::StatusOr<std::vector<v1::NodeEvent>> ListNodeEvents(
      const v1::NodeEventFilter& filter) override {
    std::vector<std::string> names(filter.node_names().begin(), filter.node_names().end());
    std::vector<int> types(filter.types().begin(), filter.types().end());
    std::vector<v1::NodeEvent> out;
    absl::Status st = pool_->Transact("listing node events", [&](pqxx::work& tx) -> absl::Status {
      const pqxx::result rows = tx.exec_params(
          "SELECT id, body FROM node_events WHERE id > $1"
          " AND (cardinality($2::text[]) = 0 OR node_name = ANY ($2::text[]))"
          " AND (cardinality($3::int[]) = 0 OR type = ANY ($3::int[]))"
          " ORDER BY id LIMIT CASE WHEN $4 <= 0 THEN NULL ELSE $4 END",
          filter.after_id(), PgTextArray(names), PgIntArray(types), filter.limit());
      return DecodeIdRows(rows, &out);
    });
    if (!st.ok()) return st;
    return out;
  }

  absl::StatusOr<int64_t> DeleteNodeEventsBefore(absl::Time before, int limit) override {
    int64_t deleted = 0;
    absl::Status st = pool_->Transact("removing old node events", [&](pqxx::work& tx) {
      deleted = static_cast<int64_t>(
          tx.exec_params(absl::StrCat("DELETE FROM node_events WHERE id IN (SELECT id FROM"
                                      " node_events WHERE time < ",
                                      MicrosParam(1),
                                      " ORDER BY time, id"
                                      " LIMIT CASE WHEN $2 <= 0 THEN NULL ELSE $2 END)"),
                         absl::ToUnixMicros(before), limit)
              .affected_rows());
      return absl::OkStatus();
    });
    if (!st.ok()) return st;
    return deleted;
  }

 private:
  std::shared_ptr<PgPool> pool_;
};

}  // namespace

std::shared_ptr<NodeStore> MakePgNodeStore(std::shared_ptr<PgPool> pool) {
  return std::make_shared<PgNodeStore>(std::move(pool));
}

std::shared_ptr<NodeEventStore> MakePgNodeEventStore(std::shared_ptr<PgPool> pool) {
  return std::make_shared<PgNodeEventStore>(std::move(pool));
}

}  // namespace tessera::store
