// Rank output in PostgreSQL, in chunks (migration 0008: a row holds lines of one stream).
// Storing is in pg_log_append.cc. A read takes, stream by stream through log_chunks' key, only
// the chunks that hold the lines it wants (a window over their line counts), decodes them, and
// merges the streams' lines into display order.
#include <algorithm>
#include <map>
#include <pqxx/pqxx>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "services/store/postgres/pg_codec.h"
#include "services/store/postgres/pg_log_rows.h"
#include "services/store/postgres/pg_stores.h"

namespace tessera::store {

LogStreamInfo DecodeLogStream(const pqxx::row& row) {
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

v1::LogLine ChunkLineToProto(const ChunkLine& c, const PgLogKey& key, int32_t node_rank,
                             const std::string& node_name) {
  v1::LogLine line;
  line.set_run_id(std::get<0>(key));
  line.set_resumption_index(std::get<1>(key));
  line.set_rank(std::get<2>(key));
  line.set_stream(static_cast<v1::LogStream>(std::get<3>(key)));
  line.set_sequence(c.sequence);
  line.set_node_rank(node_rank);
  line.set_node_name(node_name);
  const int64_t micros = c.micros;
  line.mutable_time()->set_seconds(micros >= 0 ? micros / 1'000'000
                                               : (micros - 999'999) / 1'000'000);
  line.mutable_time()->set_nanos(
      static_cast<int32_t>((micros - line.time().seconds() * 1'000'000) * 1000));
  line.set_text(c.text.data(), c.text.size());
  line.set_dropped_lines(c.dropped);
  return line;
}

namespace {

// Chunks of the streams of one attempt, chosen stream by stream by a window over their line
// counts in key order (`window`: a query over `log_chunks c` of the stream `s`, whose rows are
// the chunk's rank, stream, node_rank, node_name and lines). The chosen chunks' lines are read in
// the window's own rows: a toasted column is fetched only for the rows returned, and no join back
// to log_chunks (which the planner may turn into a scan of the whole run's chunks) is needed.
std::string ChunkQuery(absl::string_view streams_from, absl::string_view window,
                       absl::string_view where) {
  return absl::StrCat("SELECT w.rank, w.stream, w.node_rank, w.node_name, w.lines FROM ",
                      streams_from, " CROSS JOIN LATERAL (", window, ") w WHERE ", where);
}

constexpr char kChunkColumns[] = "c.rank, c.stream, c.node_rank, c.node_name, c.lines";

constexpr char kSameStream[] =
    "c.run_id = s.run_id AND c.resumption_index = s.resumption_index AND c.rank = s.rank"
    " AND c.stream = s.stream";

// Decodes chunk rows; `keep` gets each line with its stream's key.
absl::Status DecodeChunkRows(const pqxx::result& rows, const std::string& run_id,
                             int32_t resumption, const std::function<void(v1::LogLine)>& keep) {
  for (const auto& row : rows) {
    const PgLogKey key{run_id, resumption, row[0].as<int32_t>(), row[1].as<int32_t>()};
    const int32_t node_rank = row[2].as<int32_t>();
    const std::string node_name = row[3].as<std::string>();
    const pqxx::binarystring bytes(row[4]);
    TESSERA_RETURN_IF_ERROR(ForEachChunkLine(
        absl::string_view(bytes.get(), bytes.size()),
        [&](const ChunkLine& l) { keep(ChunkLineToProto(l, key, node_rank, node_name)); }));
  }
  return absl::OkStatus();
}

// Lines grouped by stream.
using StreamLines = std::map<LogStreamKey, std::vector<v1::LogLine>>;

// Keeps the `n` lowest (or highest) sequences of each stream, then merges the streams in
// display order.
std::vector<v1::LogLine> MergeStreams(StreamLines streams, int n, bool highest) {
  std::vector<v1::LogLine> out;
  for (auto& [key, lines] : streams) {
    std::sort(lines.begin(), lines.end(), [](const v1::LogLine& a, const v1::LogLine& b) {
      return a.sequence() < b.sequence();
    });
    auto first = lines.begin(), last = lines.end();
    if (n > 0 && lines.size() > static_cast<size_t>(n)) {
      if (highest) {
        first = last - n;
      } else {
        last = first + n;
      }
    }
    out.insert(out.end(), std::make_move_iterator(first), std::make_move_iterator(last));
  }
  std::sort(out.begin(), out.end(), LogLineBefore);
  return out;
}

// Every line and stream of a run. Streams first: this waits for batches being stored (they
// hold their streams' rows), so their lines are deleted too.
void DeleteLines(pqxx::work& tx, const std::string& run_id) {
  tx.exec_params("DELETE FROM log_streams WHERE run_id = $1", run_id);
  tx.exec_params("DELETE FROM log_chunks WHERE run_id = $1", run_id);
}

}  // namespace

namespace {

class PgLogStore final : public LogStore {
 public:
  PgLogStore(std::shared_ptr<PgPool> pool, std::shared_ptr<ChangeFeed> changes)
      : pool_(std::move(pool)), writer_id_(changes->writer_id()), fanout_(std::move(changes)) {}

  absl::StatusOr<LogAppendResult> AppendLogBatch(LogBatchToStore batch) override {
    auto result = AppendLogChunks(*pool_, batch, writer_id_);
    if (result.ok()) {
      fanout_.Publish(std::move(batch));
    } else {
      fanout_.Invalidate();  // it may have committed all the same
    }
    return result;
  }

  std::unique_ptr<LogSubscription> SubscribeLogs(const std::string& run_id,
                                                 int32_t resumption_index) override {
    return fanout_.Subscribe(run_id, resumption_index);
  }

  absl::StatusOr<std::vector<v1::LogLine>> ReadLogs(const LogQuery& q) override {
    std::vector<int32_t> ranks, streams;
    std::vector<int64_t> from;
    for (const auto& [key, seq] : q.from_sequence) {
      ranks.push_back(key.first);
      streams.push_back(key.second);
      from.push_back(seq);
    }
    // Per stream, the chunks from the one holding its first wanted sequence on, until they
    // hold `limit_per_stream` wanted lines. A chunk that starts below the first wanted
    // sequence counts for none (at most one such chunk per stream: their ranges are disjoint).
    static const std::string kQuery = ChunkQuery(
        "log_streams s LEFT JOIN unnest($3::int[], $4::int[], $5::bigint[]) AS f(rank, stream,"
        " next) ON f.rank = s.rank AND f.stream = s.stream",
        absl::StrCat("SELECT * FROM (SELECT ", kChunkColumns,
                     ", sum(CASE WHEN"
                     "   c.first_sequence >= COALESCE(f.next, 0) THEN c.line_count ELSE 0 END)"
                     "   OVER (ORDER BY c.last_sequence) AS upto, CASE WHEN c.first_sequence >="
                     "   COALESCE(f.next, 0) THEN c.line_count ELSE 0 END AS own"
                     " FROM log_chunks c WHERE ",
                     kSameStream,
                     "   AND c.last_sequence >= COALESCE(f.next, 0)"
                     "   AND (NOT $8::bool OR c.node_rank = $9)) w"
                     " WHERE $10::bigint <= 0 OR w.upto - w.own < $10::bigint"),
        "s.run_id = $1 AND s.resumption_index = $2 AND (NOT $6::bool OR s.rank = $7)"
        " AND s.max_sequence >= COALESCE(f.next, 0)");
    StreamLines lines;
    absl::Status st = pool_->Transact("reading log lines", [&](pqxx::work& tx) -> absl::Status {
      lines.clear();
      const pqxx::result rows = tx.exec_params(
          kQuery, q.run_id, q.resumption_index, PgIntArray(ranks), PgIntArray(streams),
          PgIntArray(from), q.rank.has_value(), q.rank.value_or(0), q.node_rank.has_value(),
          q.node_rank.value_or(0), static_cast<int64_t>(q.limit_per_stream));
      return DecodeChunkRows(rows, q.run_id, q.resumption_index, [&](v1::LogLine l) {
        const LogStreamKey key{l.rank(), l.stream()};
        const auto next = q.from_sequence.find(key);
        if (next != q.from_sequence.end() && l.sequence() < next->second) return;
        lines[key].push_back(std::move(l));
      });
    });
    if (!st.ok()) return st;
    return MergeStreams(std::move(lines), q.limit_per_stream, /*highest=*/false);
  }

  absl::StatusOr<std::vector<v1::LogLine>> TailLogs(const LogQuery& q, int n) override {
    if (n <= 0) return std::vector<v1::LogLine>{};
    // The last chunks of each stream holding its last `n` lines, then the last `n` of those
    // lines by time.
    static const std::string kQuery =
        ChunkQuery("log_streams s",
                   absl::StrCat("SELECT * FROM (SELECT ", kChunkColumns,
                                ", sum(c.line_count)"
                                "   OVER (ORDER BY c.last_sequence DESC) - c.line_count AS after"
                                " FROM log_chunks c WHERE ",
                                kSameStream,
                                "   AND (NOT $5::bool OR c.node_rank = $6)) w WHERE w.after < $7"),
                   "s.run_id = $1 AND s.resumption_index = $2 AND (NOT $3::bool OR s.rank = $4)");
    StreamLines lines;
    absl::Status st =
        pool_->Transact("reading the tail of a log", [&](pqxx::work& tx) -> absl::Status {
          lines.clear();
          const pqxx::result rows = tx.exec_params(
              kQuery, q.run_id, q.resumption_index, q.rank.has_value(), q.rank.value_or(0),
              q.node_rank.has_value(), q.node_rank.value_or(0), static_cast<int64_t>(n));
          return DecodeChunkRows(rows, q.run_id, q.resumption_index, [&](v1::LogLine l) {
            lines[{l.rank(), l.stream()}].push_back(std::move(l));
          });
        });
    if (!st.ok()) return st;
    std::vector<v1::LogLine> out = MergeStreams(std::move(lines), n, /*highest=*/true);
    if (out.size() > static_cast<size_t>(n)) out.erase(out.begin(), out.end() - n);
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
      for (const auto& row : rows) out.push_back(DecodeLogStream(row));
      return absl::OkStatus();
    });
    if (!st.ok()) return st;
    return out;
  }

  absl::StatusOr<std::map<LogStreamKey, int64_t>> SequencesSince(const std::string& run_id,
                                                                 int32_t resumption_index,
                                                                 absl::Time since) override {
    std::map<LogStreamKey, int64_t> out;
    absl::Status st = pool_->Transact("finding where a log starts at a time", [&](pqxx::work& tx) {
      out.clear();
      // A chunk's last time bounds its lines' (a stream's lines are in time order): the
      // first chunk ending at or after `since` holds the first line wanted.
      const pqxx::result rows = tx.exec_params(
          absl::StrCat("SELECT s.rank, s.stream, COALESCE((SELECT min(c.first_sequence)"
                       " FROM log_chunks c WHERE ",
                       kSameStream, " AND c.last_time >= ", MicrosParam(3),
                       "), s.max_sequence + 1) FROM log_streams s"
                       " WHERE s.run_id = $1 AND s.resumption_index = $2"),
          run_id, resumption_index, absl::ToUnixMicros(since));
      for (const auto& row : rows) {
        out[{row[0].as<int32_t>(), row[1].as<int32_t>()}] = row[2].as<int64_t>();
      }
      return absl::OkStatus();
    });
    if (!st.ok()) return st;
    return out;
  }

  absl::Status DeleteRunLogs(const std::string& run_id) override {
    return pool_->Transact("deleting a run's logs", [&](pqxx::work& tx) {
      DeleteLines(tx, run_id);
      tx.exec_params("DELETE FROM log_expirations WHERE run_id = $1", run_id);
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
  const std::string writer_id_;
  LogFanout fanout_;
};

}  // namespace

std::shared_ptr<LogStore> MakePgLogStore(std::shared_ptr<PgPool> pool,
                                         std::shared_ptr<ChangeFeed> changes) {
  return std::make_shared<PgLogStore>(std::move(pool), std::move(changes));
}

}  // namespace tessera::store
