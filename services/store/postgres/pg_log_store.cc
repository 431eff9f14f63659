// Rank output in PostgreSQL. A batch is stored with one INSERT over unnest()ed arrays (ON
// CONFLICT DO NOTHING skips resent lines) and one statement that advances the streams'
// watermarks, so ingest costs two round trips per batch whatever its size.
#include <algorithm>
#include <pqxx/pqxx>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "services/store/postgres/pg_codec.h"
#include "services/store/postgres/pg_stores.h"

namespace tessera::store {
namespace {

template <typename T>
std::string IntArray(const std::vector<T>& values) {
  return absl::StrCat("{", absl::StrJoin(values, ","), "}");
}

// Byte strings as a text[] of hex digits, for decode(x, 'hex').
std::string HexArray(const std::vector<const std::string*>& values) {
  static constexpr char kDigits[] = "0123456789abcdef";
  size_t size = 2;
  for (const auto* v : values) size += 2 * v->size() + 3;
  std::string out;
  out.reserve(size);
  out += '{';
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    if (values[i]->empty()) out += "\"\"";
    for (unsigned char c : *values[i]) {
      out += kDigits[c >> 4];
      out += kDigits[c & 15];
    }
  }
  out += '}';
  return out;
}

constexpr char kInsertLines[] =
    "INSERT INTO log_lines (run_id, resumption_index, rank, stream, sequence, node_rank,"
    " node_name, time, text)"
    " SELECT r, ri, rk, st, sq, nr, nn, timestamptz 'epoch' + tm * interval '1 microsecond',"
    " decode(tx, 'hex')"
    " FROM unnest($1::text[], $2::int[], $3::int[], $4::smallint[], $5::bigint[], $6::int[],"
    " $7::text[], $8::bigint[], $9::text[]) AS u(r, ri, rk, st, sq, nr, nn, tm, tx)"
    " ON CONFLICT DO NOTHING";

// For each key of the batch: from its current watermark, the lines that follow it without a
// gap (sequence - watermark = their row number) move the watermark up.
constexpr char kAdvanceWatermarks[] =
    "WITH k AS (SELECT * FROM unnest($1::text[], $2::int[], $3::int[], $4::smallint[],"
    "   $5::int[], $6::text[], $7::bigint[])"
    "   AS k(run_id, resumption_index, rank, stream, node_rank, node_name, batch_max)),"
    " cur AS (SELECT k.*, COALESCE(s.durable_sequence, -1) AS durable,"
    "   COALESCE(s.max_sequence, -1) AS max_seq"
    "   FROM k LEFT JOIN log_streams s USING (run_id, resumption_index, rank, stream)),"
    " nxt AS (SELECT c.run_id, c.resumption_index, c.rank, c.stream, l.sequence,"
    "   l.sequence - c.durable - row_number() OVER (PARTITION BY c.run_id, c.resumption_index,"
    "   c.rank, c.stream ORDER BY l.sequence) AS off"
    "   FROM cur c JOIN log_lines l ON l.run_id = c.run_id"
    "   AND l.resumption_index = c.resumption_index AND l.rank = c.rank AND l.stream = c.stream"
    "   AND l.sequence > c.durable),"
    " adv AS (SELECT run_id, resumption_index, rank, stream, max(sequence) AS durable"
    "   FROM nxt WHERE off = 0 GROUP BY 1, 2, 3, 4)"
    " INSERT INTO log_streams AS s (run_id, resumption_index, rank, stream, node_rank, node_name,"
    "   durable_sequence, max_sequence)"
    " SELECT c.run_id, c.resumption_index, c.rank, c.stream, c.node_rank, c.node_name,"
    "   COALESCE(a.durable, c.durable), GREATEST(c.max_seq, c.batch_max)"
    " FROM cur c LEFT JOIN adv a USING (run_id, resumption_index, rank, stream)"
    " ON CONFLICT (run_id, resumption_index, rank, stream) DO UPDATE SET"
    "   node_rank = EXCLUDED.node_rank, node_name = EXCLUDED.node_name,"
    "   durable_sequence = GREATEST(s.durable_sequence, EXCLUDED.durable_sequence),"
    "   max_sequence = GREATEST(s.max_sequence, EXCLUDED.max_sequence)"
    " RETURNING run_id, resumption_index, rank, stream, node_rank, node_name, durable_sequence,"
    "   max_sequence";

constexpr char kLineColumns[] =
    "l.rank, l.stream, l.sequence, l.node_rank, l.node_name,"
    " (extract(epoch FROM l.time) * 1000000)::bigint, l.text";

v1::LogLine DecodeLine(const pqxx::row& row, const std::string& run_id, int32_t resumption) {
  v1::LogLine line;
  line.set_run_id(run_id);
  line.set_resumption_index(resumption);
  line.set_rank(row[0].as<int32_t>());
  line.set_stream(static_cast<v1::LogStream>(row[1].as<int32_t>()));
  line.set_sequence(row[2].as<int64_t>());
  line.set_node_rank(row[3].as<int32_t>());
  line.set_node_name(row[4].as<std::string>());
  const int64_t micros = row[5].as<int64_t>();
  line.mutable_time()->set_seconds(micros >= 0 ? micros / 1'000'000
                                               : (micros - 999'999) / 1'000'000);
  line.mutable_time()->set_nanos(
      static_cast<int32_t>((micros - line.time().seconds() * 1'000'000) * 1000));
  const pqxx::binarystring text(row[6]);
  line.set_text(text.str());
  return line;
}

LogStreamInfo DecodeStream(const pqxx::row& row) {
  LogStreamInfo s;
  s.run_id = row[0].as<std::string>();
  s.resumption_index = row[1].as<int32_t>();
  s.rank = row[2].as<int32_t>();
  s.stream = static_cast<v1::LogStream>(row[3].as<int32_t>());
  s.node_rank = row[4].as<int32_t>();
  s.node_name = row[5].as<std::string>();
  s.durable_sequence = row[6].as<int64_t>();
  s.max_sequence = row[7].as<int64_t>();
  return s;
}

class PgLogStore final : public LogStore {
 public:
  explicit PgLogStore(std::shared_ptr<PgPool> pool) : pool_(std::move(pool)) {}

  absl::StatusOr<LogAppendResult> AppendLogs(const std::vector<v1::LogLine>& lines) override {
    LogAppendResult result;
    if (lines.empty()) return result;
    // Columns of the lines, and of their distinct keys in order of first appearance.
    std::vector<std::string> run_ids, node_names, key_runs, key_nodes;
    std::vector<int32_t> resumptions, ranks, streams, node_ranks, key_res, key_ranks, key_streams,
        key_node_ranks;
    std::vector<int64_t> sequences, times, key_max;
    std::vector<const std::string*> texts;
    using Key = std::tuple<std::string, int32_t, int32_t, int32_t>;
    std::vector<Key> keys;
    for (const auto& l : lines) {
      run_ids.push_back(l.run_id());
      resumptions.push_back(l.resumption_index());
      ranks.push_back(l.rank());
      streams.push_back(l.stream());
      sequences.push_back(l.sequence());
      node_ranks.push_back(l.node_rank());
      node_names.push_back(l.node_name());
      times.push_back(ToMicros(l.time()));
      texts.push_back(&l.text());
      Key key{l.run_id(), l.resumption_index(), l.rank(), l.stream()};
      auto at = std::find(keys.begin(), keys.end(), key);
      if (at == keys.end()) {
        keys.push_back(key);
        key_runs.push_back(l.run_id());
        key_res.push_back(l.resumption_index());
        key_ranks.push_back(l.rank());
        key_streams.push_back(l.stream());
        key_node_ranks.push_back(l.node_rank());
        key_nodes.push_back(l.node_name());
        key_max.push_back(l.sequence());
      } else {
        const size_t i = at - keys.begin();
        key_max[i] = std::max(key_max[i], l.sequence());
        key_node_ranks[i] = l.node_rank();
        key_nodes[i] = l.node_name();
      }
    }
    absl::Status st = pool_->Transact("storing log lines", [&](pqxx::work& tx) -> absl::Status {
      const pqxx::result inserted =
          tx.exec_params(kInsertLines, PgTextArray(run_ids), IntArray(resumptions), IntArray(ranks),
                         IntArray(streams), IntArray(sequences), IntArray(node_ranks),
                         PgTextArray(node_names), IntArray(times), HexArray(texts));
      result.inserted = inserted.affected_rows();
      const pqxx::result marks =
          tx.exec_params(kAdvanceWatermarks, PgTextArray(key_runs), IntArray(key_res),
                         IntArray(key_ranks), IntArray(key_streams), IntArray(key_node_ranks),
                         PgTextArray(key_nodes), IntArray(key_max));
      result.watermarks.clear();
      for (const auto& row : marks) result.watermarks.push_back(DecodeStream(row));
      return absl::OkStatus();
    });
    if (!st.ok()) return st;
    // In the batch's order.
    std::sort(result.watermarks.begin(), result.watermarks.end(),
              [&](const LogStreamInfo& a, const LogStreamInfo& b) {
                auto pos = [&](const LogStreamInfo& s) {
                  return std::find(keys.begin(), keys.end(),
                                   Key{s.run_id, s.resumption_index, s.rank, s.stream}) -
                         keys.begin();
                };
                return pos(a) < pos(b);
              });
    return result;
  }

  absl::StatusOr<std::vector<v1::LogLine>> ReadLogs(const LogQuery& q) override {
    std::vector<int32_t> ranks, streams;
    std::vector<int64_t> from;
    for (const auto& [key, seq] : q.from_sequence) {
      ranks.push_back(key.first);
      streams.push_back(key.second);
      from.push_back(seq);
    }
    std::vector<v1::LogLine> out;
    absl::Status st = pool_->Transact("reading log lines", [&](pqxx::work& tx) -> absl::Status {
      const pqxx::result rows = tx.exec_params(
          absl::StrCat(
              "SELECT ", kLineColumns,
              " FROM log_streams s"
              " LEFT JOIN unnest($3::int[], $4::int[], $5::bigint[]) AS c(rank, stream, next)"
              "   ON c.rank = s.rank AND c.stream = s.stream"
              " CROSS JOIN LATERAL (SELECT * FROM log_lines l WHERE l.run_id = s.run_id"
              "   AND l.resumption_index = s.resumption_index AND l.rank = s.rank"
              "   AND l.stream = s.stream AND l.sequence >= COALESCE(c.next, 0)"
              "   AND (NOT $8::bool OR l.node_rank = $9)"
              "   ORDER BY l.sequence LIMIT CASE WHEN $10::bigint > 0 THEN $10::bigint END) l"
              " WHERE s.run_id = $1 AND s.resumption_index = $2"
              "   AND (NOT $6::bool OR s.rank = $7) AND s.max_sequence >= COALESCE(c.next, 0)"
              " ORDER BY l.time, l.rank, l.stream, l.sequence"),
          q.run_id, q.resumption_index, IntArray(ranks), IntArray(streams), IntArray(from),
          q.rank.has_value(), q.rank.value_or(0), q.node_rank.has_value(), q.node_rank.value_or(0),
          static_cast<int64_t>(q.limit_per_stream));
      for (const auto& row : rows) out.push_back(DecodeLine(row, q.run_id, q.resumption_index));
      return absl::OkStatus();
    });
    if (!st.ok()) return st;
    return out;
  }

  absl::StatusOr<std::vector<v1::LogLine>> TailLogs(const LogQuery& q, int n) override {
    std::vector<v1::LogLine> out;
    absl::Status st = pool_->Transact("reading the tail of a log", [&](pqxx::work& tx) {
      const pqxx::result rows = tx.exec_params(
          absl::StrCat("SELECT ", kLineColumns,
                       " FROM log_lines l WHERE l.run_id = $1 AND l.resumption_index = $2"
                       " AND (NOT $3::bool OR l.rank = $4) AND (NOT $5::bool OR l.node_rank = $6)"
                       " ORDER BY l.time DESC, l.rank DESC, l.stream DESC, l.sequence DESC"
                       " LIMIT $7"),
          q.run_id, q.resumption_index, q.rank.has_value(), q.rank.value_or(0),
          q.node_rank.has_value(), q.node_rank.value_or(0), std::max(n, 0));
      for (const auto& row : rows) out.push_back(DecodeLine(row, q.run_id, q.resumption_index));
      return absl::OkStatus();
    });
    if (!st.ok()) return st;
    std::reverse(out.begin(), out.end());
    return out;
  }

  absl::StatusOr<std::vector<LogStreamInfo>> ListLogStreams(
      const std::string& run_id, std::optional<int32_t> resumption_index) override {
    std::vector<LogStreamInfo> out;
    absl::Status st = pool_->Transact("listing log streams", [&](pqxx::work& tx) {
      const pqxx::result rows = tx.exec_params(
          "SELECT run_id, resumption_index, rank, stream, node_rank, node_name, durable_sequence,"
          " max_sequence FROM log_streams WHERE run_id = $1"
          " AND (NOT $2::bool OR resumption_index = $3)"
          " ORDER BY resumption_index, rank, stream",
          run_id, resumption_index.has_value(), resumption_index.value_or(0));
      for (const auto& row : rows) out.push_back(DecodeStream(row));
      return absl::OkStatus();
    });
    if (!st.ok()) return st;
    return out;
  }

  absl::Status DeleteRunLogs(const std::string& run_id) override {
    return pool_->Transact("deleting a run's logs", [&](pqxx::work& tx) {
      tx.exec_params("DELETE FROM log_lines WHERE run_id = $1", run_id);
      tx.exec_params("DELETE FROM log_streams WHERE run_id = $1", run_id);
      return absl::OkStatus();
    });
  }

 private:
  std::shared_ptr<PgPool> pool_;
};

}  // namespace

std::shared_ptr<LogStore> MakePgLogStore(std::shared_ptr<PgPool> pool) {
  return std::make_shared<PgLogStore>(std::move(pool));
}

}  // namespace tessera::store
