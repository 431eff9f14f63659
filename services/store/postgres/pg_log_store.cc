// Rank output in PostgreSQL. A batch is stored in one transaction of three statements whatever
// its size: create-or-lock the watermark rows of its streams, one INSERT of the lines not stored
// yet over unnest()ed arrays, and one UPDATE of the advanced watermarks. The lock makes the
// writers of one stream take turns, so a resent line is recognised by the watermark (or, after a
// gap, by a read of the few lines stored beyond it) and skipped without ON CONFLICT, which costs
// a third of the insert.
#include <algorithm>
#include <pqxx/pqxx>

#include "absl/container/flat_hash_set.h"
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

// Creates the watermark rows of the batch's streams if need be and locks them until the batch
// commits: the writers of one stream take turns, so each knows which lines are already stored.
// Rows are locked in key order, so two batches of the same streams cannot deadlock.
constexpr char kLockStreams[] =
    "INSERT INTO log_streams AS s (run_id, resumption_index, rank, stream, node_rank, node_name,"
    "   durable_sequence, max_sequence)"
    " SELECT *, -1::bigint, -1::bigint FROM unnest($1::text[], $2::int[], $3::int[],"
    "   $4::smallint[], $5::int[], $6::text[]) ORDER BY 1, 2, 3, 4"
    " ON CONFLICT (run_id, resumption_index, rank, stream) DO UPDATE SET"
    "   node_rank = EXCLUDED.node_rank, node_name = EXCLUDED.node_name"
    " RETURNING run_id, resumption_index, rank, stream, durable_sequence, max_sequence";

// The new lines: the columns of their streams ($1..$6, numbered from 1 by ORDINALITY) and of
// each line ($7 the number of its stream, sequence, microseconds, text as hex).
// ... and the number of lines each stands for ($11: 0, or a marker's dropped_lines).
constexpr char kInsertLines[] =
    "INSERT INTO log_lines (run_id, resumption_index, rank, stream, sequence, node_rank,"
    " node_name, time, text, dropped)"
    " SELECT k.run_id, k.res, k.rank, k.stream, u.seq, k.node_rank, k.node_name,"
    "   timestamptz 'epoch' + u.tm * interval '1 microsecond', decode(u.tx, 'hex'), u.dropped"
    " FROM unnest($1::text[], $2::int[], $3::int[], $4::smallint[], $5::int[], $6::text[])"
    "   WITH ORDINALITY AS k(run_id, res, rank, stream, node_rank, node_name, i)"
    " JOIN unnest($7::int[], $8::bigint[], $9::bigint[], $10::text[], $11::bigint[])"
    "   AS u(key, seq, tm, tx, dropped) ON u.key = k.i";

// The watermarks, and what the batch added: bytes of text ($7) and its newest line ($8, in
// microseconds; 0 when it stored none), for the quota and the retention of logs.
constexpr char kStoreWatermarks[] =
    "UPDATE log_streams s SET durable_sequence = u.durable, max_sequence = u.max,"
    "   bytes = s.bytes + u.bytes,"
    "   last_line_at = GREATEST(s.last_line_at, timestamptz 'epoch' + u.tm * interval '1 "
    "microsecond')"
    " FROM unnest($1::text[], $2::int[], $3::int[], $4::smallint[], $5::bigint[], $6::bigint[],"
    "   $7::bigint[], $8::bigint[]) AS u(run_id, res, rank, stream, durable, max, bytes, tm)"
    " WHERE s.run_id = u.run_id AND s.resumption_index = u.res AND s.rank = u.rank"
    "   AND s.stream = u.stream"
    " RETURNING s.run_id, s.resumption_index, s.rank, s.stream, s.node_rank, s.node_name,"
    "   s.durable_sequence, s.max_sequence";

// The sequences a stored line stands for: its own, or a marker's dropped ones.
struct SeqRange {
  int64_t first;
  int64_t last;
  bool operator<(const SeqRange& o) const { return first < o.first; }
};

bool InRanges(const std::vector<SeqRange>& ranges, int64_t seq) {
  return std::any_of(ranges.begin(), ranges.end(),
                     [seq](const SeqRange& r) { return r.first <= seq && seq <= r.last; });
}

// The watermark after `durable` given what is now stored beyond it (in any order).
int64_t Advance(int64_t durable, std::vector<SeqRange> stored) {
  std::sort(stored.begin(), stored.end());
  for (const SeqRange& r : stored) {
    if (r.first > durable + 1) break;
    durable = std::max(durable, r.last);
  }
  return durable;
}

using Key = std::tuple<std::string, int32_t, int32_t, int32_t>;

// A batch's distinct streams (in order of first appearance), with their lines.
struct BatchStreams {
  std::vector<Key> keys;
  std::vector<std::string> nodes;
  std::vector<int32_t> node_ranks;
  std::vector<std::vector<const v1::LogLine*>> lines;

  explicit BatchStreams(const std::vector<v1::LogLine>& batch) {
    for (const auto& l : batch) {
      const size_t i = Index(Key{l.run_id(), l.resumption_index(), l.rank(), l.stream()});
      node_ranks[i] = l.node_rank();
      nodes[i] = l.node_name();
      lines[i].push_back(&l);
    }
  }
  size_t Index(const Key& key) {
    const size_t i = std::find(keys.begin(), keys.end(), key) - keys.begin();
    if (i == keys.size()) {
      keys.push_back(key);
      nodes.emplace_back();
      node_ranks.push_back(0);
      lines.emplace_back();
    }
    return i;
  }
  // One column of the keys, as a PostgreSQL array.
  template <size_t N>
  std::string Column() const {
    std::vector<std::tuple_element_t<N, Key>> out;
    for (const auto& k : keys) out.push_back(std::get<N>(k));
    if constexpr (N == 0) {
      return PgTextArray(out);
    } else {
      return IntArray(out);
    }
  }
};

constexpr char kLineColumns[] =
    "l.rank, l.stream, l.sequence, l.node_rank, l.node_name,"
    " (extract(epoch FROM l.time) * 1000000)::bigint, l.text, l.dropped";

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
  line.set_dropped_lines(row[7].as<int64_t>());
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

// Every line and stream of a run. Streams first: this waits for batches being stored (they
// hold their streams' rows), so their lines are deleted too.
void DeleteLines(pqxx::work& tx, const std::string& run_id) {
  tx.exec_params("DELETE FROM log_streams WHERE run_id = $1", run_id);
  tx.exec_params("DELETE FROM log_lines WHERE run_id = $1", run_id);
}

class PgLogStore final : public LogStore {
 public:
  explicit PgLogStore(std::shared_ptr<PgPool> pool) : pool_(std::move(pool)) {}

  absl::StatusOr<LogAppendResult> AppendLogs(const std::vector<v1::LogLine>& lines) override {
    LogAppendResult result;
    if (lines.empty()) return result;
    BatchStreams b(lines);
    const std::string runs = b.Column<0>(), res = b.Column<1>(), ranks = b.Column<2>(),
                      streams = b.Column<3>();
    absl::Status st = pool_->Transact("storing log lines", [&](pqxx::work& tx) -> absl::Status {
      const size_t n = b.keys.size();
      std::vector<int64_t> durable(n, -1), max(n, -1);
      for (const auto& row : tx.exec_params(kLockStreams, runs, res, ranks, streams,
                                            IntArray(b.node_ranks), PgTextArray(b.nodes))) {
        const size_t i = b.Index(Key{row[0].as<std::string>(), row[1].as<int32_t>(),
                                     row[2].as<int32_t>(), row[3].as<int32_t>()});
        durable[i] = row[4].as<int64_t>();
        max[i] = row[5].as<int64_t>();
      }
      // Only lines not stored yet: those above the watermark that are not stored after a gap.
      std::vector<int32_t> key_of;
      std::vector<int64_t> seqs, times, dropped, added_bytes(n, 0), newest(n, 0);
      std::vector<const std::string*> texts;
      for (size_t i = 0; i < n; ++i) {
        // What is stored beyond the watermark: single lines, and markers' stretches of dropped
        // lines (few), so that a line is looked up in constant time.
        absl::flat_hash_set<int64_t> stored;
        std::vector<SeqRange> stretches;
        const auto keep = [&](int64_t seq, int64_t dropped) {
          if (dropped > 1) {
            stretches.push_back({seq - dropped + 1, seq});
          } else {
            stored.insert(seq);
          }
        };
        if (max[i] > durable[i]) {
          const auto& [run, resumption, rank, stream] = b.keys[i];
          for (const auto& row : tx.exec_params(
                   "SELECT sequence, dropped FROM log_lines WHERE run_id = $1"
                   " AND resumption_index = $2 AND rank = $3 AND stream = $4 AND sequence > $5",
                   run, resumption, rank, stream, durable[i])) {
            keep(row[0].as<int64_t>(), row[1].as<int64_t>());
          }
        }
        for (const v1::LogLine* l : b.lines[i]) {
          if (l->sequence() <= durable[i] || stored.contains(l->sequence()) ||
              InRanges(stretches, l->sequence())) {
            continue;
          }
          keep(l->sequence(), l->dropped_lines());
          key_of.push_back(static_cast<int32_t>(i + 1));
          seqs.push_back(l->sequence());
          times.push_back(ToMicros(l->time()));
          texts.push_back(&l->text());
          dropped.push_back(l->dropped_lines());
          added_bytes[i] += static_cast<int64_t>(l->text().size());
          newest[i] = std::max(newest[i], times.back());
        }
        for (int64_t seq : stored) stretches.push_back({seq, seq});
        for (const SeqRange& r : stretches) max[i] = std::max(max[i], r.last);
        durable[i] = Advance(durable[i], std::move(stretches));
      }
      if (!seqs.empty()) {
        const pqxx::result inserted = tx.exec_params(
            kInsertLines, runs, res, ranks, streams, IntArray(b.node_ranks), PgTextArray(b.nodes),
            IntArray(key_of), IntArray(seqs), IntArray(times), HexArray(texts), IntArray(dropped));
        result.inserted = inserted.affected_rows();
      }
      const pqxx::result marks =
          tx.exec_params(kStoreWatermarks, runs, res, ranks, streams, IntArray(durable),
                         IntArray(max), IntArray(added_bytes), IntArray(newest));
      result.watermarks.clear();
      for (const auto& row : marks) result.watermarks.push_back(DecodeStream(row));
      return absl::OkStatus();
    });
    if (!st.ok()) return st;
    // In the batch's order.
    std::sort(result.watermarks.begin(), result.watermarks.end(),
              [&](const LogStreamInfo& x, const LogStreamInfo& y) {
                return b.Index(Key{x.run_id, x.resumption_index, x.rank, x.stream}) <
                       b.Index(Key{y.run_id, y.resumption_index, y.rank, y.stream});
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
          // The last lines of each stream (by sequence, through the primary key: lines of a
          // stream are in time order), then the last of those by time.
          absl::StrCat("SELECT ", kLineColumns,
                       " FROM log_streams s CROSS JOIN LATERAL (SELECT * FROM log_lines l"
                       "   WHERE l.run_id = s.run_id AND l.resumption_index = s.resumption_index"
                       "   AND l.rank = s.rank AND l.stream = s.stream"
                       "   AND (NOT $5::bool OR l.node_rank = $6)"
                       "   ORDER BY l.sequence DESC LIMIT $7) l"
                       " WHERE s.run_id = $1 AND s.resumption_index = $2"
                       "   AND (NOT $3::bool OR s.rank = $4)"
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
      DeleteLines(tx, run_id);
      return absl::OkStatus();
    });
  }

  absl::StatusOr<int64_t> RunLogBytes(const std::string& run_id) override {
    int64_t bytes = 0;
    absl::Status st = pool_->Transact("measuring a run's logs", [&](pqxx::work& tx) {
      bytes = tx.exec_params(
                    "SELECT COALESCE(sum(bytes), 0)::bigint FROM log_streams"
                    " WHERE run_id = $1",
                    run_id)[0][0]
                  .as<int64_t>();
      return absl::OkStatus();
    });
    if (!st.ok()) return st;
    return bytes;
  }

  absl::StatusOr<std::vector<std::string>> ListRunsIdleSince(absl::Time before,
                                                             int limit) override {
    std::vector<std::string> out;
    absl::Status st = pool_->Transact("finding runs with old logs", [&](pqxx::work& tx) {
      for (const auto& row : tx.exec_params(
               absl::StrCat("SELECT run_id FROM log_streams GROUP BY run_id"
                            " HAVING max(last_line_at) < ",
                            MicrosParam(1), " ORDER BY max(last_line_at), run_id LIMIT $2"),
               absl::ToUnixMicros(before), limit)) {
        out.push_back(row[0].as<std::string>());
      }
      return absl::OkStatus();
    });
    if (!st.ok()) return st;
    return out;
  }

  absl::Status ExpireRunLogs(const std::string& run_id, absl::Time at) override {
    return pool_->Transact("expiring a run's logs", [&](pqxx::work& tx) {
      DeleteLines(tx, run_id);
      tx.exec_params(absl::StrCat("INSERT INTO log_expirations (run_id, expired_at) VALUES ($1, ",
                                  MicrosParam(2), ") ON CONFLICT (run_id) DO NOTHING"),
                     run_id, absl::ToUnixMicros(at));
      return absl::OkStatus();
    });
  }

  absl::StatusOr<std::optional<absl::Time>> LogsExpiredAt(const std::string& run_id) override {
    std::optional<absl::Time> out;
    absl::Status st = pool_->Transact("looking up a run's expired logs", [&](pqxx::work& tx) {
      const pqxx::result rows = tx.exec_params(
          "SELECT (extract(epoch FROM expired_at) * 1000000)::bigint FROM log_expirations"
          " WHERE run_id = $1",
          run_id);
      if (!rows.empty()) out = absl::FromUnixMicros(rows[0][0].as<int64_t>());
      return absl::OkStatus();
    });
    if (!st.ok()) return st;
    return out;
  }

 private:
  std::shared_ptr<PgPool> pool_;
};

}  // namespace

std::shared_ptr<LogStore> MakePgLogStore(std::shared_ptr<PgPool> pool) {
  return std::make_shared<PgLogStore>(std::move(pool));
}

}  // namespace tessera::store
