// Storing a batch of rank output. One transaction of three statements whatever the batch's size:
// create-or-lock the watermark rows of its streams, one INSERT of a chunk per stream holding
// the lines not stored yet (their bytes in one binary parameter), and one UPDATE of the advanced
// watermarks. The lock makes the writers of one stream take turns, so a resent line is
// recognised by the watermark (or, after a gap, by the chunks stored beyond it) and skipped.
// A batch that fills a gap is merged with the chunks beyond the watermark into one chunk, so
// the chunks of a stream keep covering disjoint ranges of sequences (log_chunks' invariant).
#include <algorithm>
#include <deque>
#include <optional>

#include "absl/container/flat_hash_set.h"
#include "base/status_macros.h"
#include "services/store/filters.h"
#include "services/store/postgres/pg_log_rows.h"

namespace tessera::store {
namespace {

// Creates the watermark rows of the batch's streams if need be and locks them until the batch
// commits: the writers of one stream take turns, so each knows which lines are already stored.
// Rows are locked in key order, so two batches of the same streams cannot deadlock. It also names
// the transaction's writer ($7), which its change notification carries (migration 0012): set in
// the statement itself, before the statement's trigger runs, so that it costs no round trip.
// It also has the next statement, kInsertChunks, planned generically (see there).
constexpr char kLockStreams[] =
    "INSERT INTO log_streams AS s (run_id, resumption_index, rank, stream, node_rank, node_name,"
    "   durable_sequence, max_sequence)"
    " SELECT *, -1::bigint, -1::bigint FROM unnest($1::text[], $2::int[], $3::int[],"
    "   $4::smallint[], $5::int[], $6::text[])"
    " WHERE set_config('tessera.writer', $7, true) IS NOT NULL"
    "   AND set_config('plan_cache_mode', 'force_generic_plan', true) IS NOT NULL"
    " ORDER BY 1, 2, 3, 4"
    " ON CONFLICT (run_id, resumption_index, rank, stream) DO UPDATE SET"
    "   node_rank = EXCLUDED.node_rank, node_name = EXCLUDED.node_name"
    " RETURNING run_id, resumption_index, rank, stream, durable_sequence, max_sequence";

// The new chunks: the columns of their streams ($1..$6, numbered from 1 by ORDINALITY) and of
// each chunk ($7 the number of its stream, ...), its lines cut from the binary $15.
// Planned without its parameters' values (plan_cache_mode, set by kLockStreams): a plan made
// for the values folds $15, every line of the batch, into a constant and copies it twice, which
// was a third of PostgreSQL's time on each batch. It sets the mode back for the statements after
// it (kStoreWatermarks' join is planned better for the number of streams it is given).
constexpr char kInsertChunks[] =
    "INSERT INTO log_chunks (run_id, resumption_index, rank, stream, last_sequence,"
    "   first_sequence, node_rank, node_name, first_time, last_time, line_count, lines)"
    " SELECT k.run_id, k.res, k.rank, k.stream, u.last, u.first, k.node_rank, k.node_name,"
    "   timestamptz 'epoch' + u.t0 * interval '1 microsecond',"
    "   timestamptz 'epoch' + u.t1 * interval '1 microsecond', u.n,"
    "   substring($15::bytea FROM u.off + 1 FOR u.len)"
    " FROM unnest($1::text[], $2::int[], $3::int[], $4::smallint[], $5::int[], $6::text[])"
    "   WITH ORDINALITY AS k(run_id, res, rank, stream, node_rank, node_name, i)"
    " JOIN unnest($7::int[], $8::bigint[], $9::bigint[], $10::bigint[], $11::bigint[],"
    "   $12::int[], $13::int[], $14::int[]) AS u(key, last, first, t0, t1, n, off, len)"
    "   ON u.key = k.i"
    " WHERE set_config('plan_cache_mode', 'auto', true) IS NOT NULL";
// The same when the batch stores no chunk (every line was stored already).
constexpr char kPlanForValues[] = "SELECT set_config('plan_cache_mode', 'auto', true)";

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

// The four statements of every batch are prepared once per connection: parsing, analysing and
// planning them again for each batch took a quarter of PostgreSQL's time at full speed, and the
// service waits for it (a stream's batches are stored one after the other).
constexpr char kLockStreamsName[] = "tessera_log_lock_streams";
constexpr char kInsertChunksName[] = "tessera_log_insert_chunks";
constexpr char kPlanForValuesName[] = "tessera_log_plan_for_values";
constexpr char kStoreWatermarksName[] = "tessera_log_store_watermarks";

// Declares them on the transaction's connection; libpqxx sends a PREPARE on a connection's first
// use of each (a new connection, after a reconnect, prepares again), and a repeat is free.
void PrepareBatchStatements(pqxx::connection_base& connection) {
  connection.prepare(kLockStreamsName, kLockStreams);
  connection.prepare(kInsertChunksName, kInsertChunks);
  connection.prepare(kPlanForValuesName, kPlanForValues);
  connection.prepare(kStoreWatermarksName, kStoreWatermarks);
}

constexpr char kChunksBeyond[] =
    "SELECT lines FROM log_chunks WHERE run_id = $1 AND resumption_index = $2 AND rank = $3"
    " AND stream = $4 AND last_sequence > $5";
constexpr char kDeleteChunksBeyond[] =
    "DELETE FROM log_chunks WHERE run_id = $1 AND resumption_index = $2 AND rank = $3"
    " AND stream = $4 AND last_sequence > $5";

// The sequences a stored line stands for: its own, or a marker's dropped ones.
struct SeqRange {
  int64_t first;
  int64_t last;
  bool operator<(const SeqRange& o) const { return first < o.first; }
};

int64_t FirstOf(const ChunkLine& l) {
  return l.dropped > 1 ? l.sequence - l.dropped + 1 : l.sequence;
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

// A batch's distinct streams (in order of first appearance: the plain lines', then the packed
// groups'), with their lines as views of the batch's bytes (a plain line's text, a packed
// group's encoded lines): packed lines are not taken apart into messages to be stored.
struct BatchStreams {
  // A stream whose only lines in the batch are one packed group that runs without a gap (the
  // usual case): summed up, not taken apart, so that its bytes can go into the chunk as they
  // are. `lines` has none of it until Materialize.
  struct Whole {
    absl::string_view bytes;
    int64_t first_sequence = 0;  // of its first line
    int64_t first = 0;           // the first sequence its first line stands for (a marker's)
    int64_t last = 0;
    int64_t t0 = 0, t1 = 0;
    int64_t text_bytes = 0;
    int32_t count = 0;
  };

  std::vector<PgLogKey> keys;
  std::vector<std::string> nodes;
  std::vector<int32_t> node_ranks;
  std::vector<std::vector<ChunkLine>> lines;
  std::vector<std::optional<Whole>> whole;

  // The stream's whole group as lines, to go the way of single lines.
  absl::Status Materialize(size_t i) {
    if (!whole[i]) return absl::OkStatus();
    const absl::string_view bytes = whole[i]->bytes;
    whole[i].reset();
    return ForEachChunkLine(bytes, [&](const ChunkLine& l) { lines[i].push_back(l); });
  }
  // `g`'s lines summed up if they run without a gap; nullopt if not.
  static absl::StatusOr<std::optional<Whole>> Summarize(const v1::PackedLogLines& g) {
    Whole w{.bytes = g.lines()};
    bool gapless = true;
    TESSERA_RETURN_IF_ERROR(ForEachChunkLine(g.lines(), [&](const ChunkLine& l) {
      if (w.count == 0) {
        w.first_sequence = l.sequence;
        w.first = FirstOf(l);
        w.t0 = w.t1 = l.micros;
      } else {
        gapless = gapless && FirstOf(l) == w.last + 1;
        w.t0 = std::min(w.t0, l.micros);
        w.t1 = std::max(w.t1, l.micros);
      }
      w.last = l.sequence;
      w.text_bytes += static_cast<int64_t>(l.text.size());
      ++w.count;
    }));
    if (!gapless || w.count == 0) return std::nullopt;
    return w;
  }

  static absl::StatusOr<BatchStreams> Of(const LogBatchToStore& batch) {
    BatchStreams b;
    size_t i = 0;
    for (const auto& l : batch.lines) {
      // Lines come in runs of one stream: the key is made and looked up once per run.
      if (b.keys.empty() || !SameStream(b.keys[i], l)) {
        i = b.Index(PgLogKey{l.run_id(), l.resumption_index(), l.rank(), l.stream()});
        TESSERA_RETURN_IF_ERROR(b.Materialize(i));
      }
      b.node_ranks[i] = l.node_rank();
      b.nodes[i] = l.node_name();
      b.lines[i].push_back(
          ChunkLine{l.sequence(), ToMicros(l.time()), l.dropped_lines(), l.text()});
    }
    for (const auto& g : batch.packed) {
      i = b.Index(PgLogKey{g.run_id(), g.resumption_index(), g.rank(), g.stream()});
      b.node_ranks[i] = g.node_rank();
      b.nodes[i] = g.node_name();
      if (b.lines[i].empty() && !b.whole[i]) {
        TESSERA_ASSIGN_OR_RETURN(b.whole[i], Summarize(g));
        if (b.whole[i]) continue;
      }
      TESSERA_RETURN_IF_ERROR(b.Materialize(i));
      std::vector<ChunkLine>& into = b.lines[i];
      TESSERA_RETURN_IF_ERROR(
          ForEachChunkLine(g.lines(), [&](const ChunkLine& l) { into.push_back(l); }));
    }
    return b;
  }
  static bool SameStream(const PgLogKey& key, const v1::LogLine& l) {
    return std::get<3>(key) == l.stream() && std::get<2>(key) == l.rank() &&
           std::get<1>(key) == l.resumption_index() && std::get<0>(key) == l.run_id();
  }
  size_t Index(const PgLogKey& key) {
    const size_t i = std::find(keys.begin(), keys.end(), key) - keys.begin();
    if (i == keys.size()) {
      keys.push_back(key);
      nodes.emplace_back();
      node_ranks.push_back(0);
      lines.emplace_back();
      whole.emplace_back();
    }
    return i;
  }
  // One column of the keys, as a PostgreSQL array.
  template <size_t N>
  std::string Column() const {
    std::vector<std::tuple_element_t<N, PgLogKey>> out;
    for (const auto& k : keys) out.push_back(std::get<N>(k));
    if constexpr (N == 0) {
      return PgTextArray(out);
    } else {
      return PgIntArray(out);
    }
  }
};

// The chunks a batch writes, as the columns of kInsertChunks, and their bytes.
struct NewChunks {
  std::vector<int32_t> key, count, offset, length;
  std::vector<int64_t> last, first, first_time, last_time;
  std::string bytes;

  // Adds a chunk of `lines` (not empty) for the stream numbered `key` (from 1).
  void Add(int32_t stream_number, std::vector<ChunkLine>& lines) {
    const auto by_sequence = [](const ChunkLine& a, const ChunkLine& b) {
      return a.sequence < b.sequence;
    };
    // Usually in order already (a worker's lines of a stream, packed or not).
    if (!std::is_sorted(lines.begin(), lines.end(), by_sequence)) {
      std::sort(lines.begin(), lines.end(), by_sequence);
    }
    key.push_back(stream_number);
    count.push_back(static_cast<int32_t>(lines.size()));
    offset.push_back(static_cast<int32_t>(bytes.size()));
    int64_t lo = FirstOf(lines.front()), t0 = lines.front().micros, t1 = t0;
    for (const ChunkLine& l : lines) {
      lo = std::min(lo, FirstOf(l));
      t0 = std::min(t0, l.micros);
      t1 = std::max(t1, l.micros);
      AppendChunkLine(l, bytes);
    }
    length.push_back(static_cast<int32_t>(bytes.size()) - offset.back());
    last.push_back(lines.back().sequence);
    first.push_back(lo);
    first_time.push_back(t0);
    last_time.push_back(t1);
  }

  // Adds a packed group's bytes as they are.
  void Add(int32_t stream_number, const BatchStreams::Whole& w) {
    key.push_back(stream_number);
    count.push_back(w.count);
    offset.push_back(static_cast<int32_t>(bytes.size()));
    bytes.append(w.bytes.data(), w.bytes.size());
    length.push_back(static_cast<int32_t>(w.bytes.size()));
    last.push_back(w.last);
    first.push_back(w.first);
    first_time.push_back(w.t0);
    last_time.push_back(w.t1);
  }
};

}  // namespace

absl::StatusOr<LogAppendResult> AppendLogChunks(PgPool& pool, const LogBatchToStore& batch,
                                                const std::string& writer_id) {
  LogAppendResult result;
  if (batch.lines.empty() && batch.packed.empty()) return result;
  TESSERA_ASSIGN_OR_RETURN(BatchStreams b, BatchStreams::Of(batch));
  if (b.keys.empty()) return result;
  const std::string runs = b.Column<0>(), res = b.Column<1>(), ranks = b.Column<2>(),
                    streams = b.Column<3>();
  absl::Status st = pool.Transact("storing log lines", [&](pqxx::work& tx) -> absl::Status {
    const size_t n = b.keys.size();
    std::vector<int64_t> durable(n, -1), max(n, -1);
    PrepareBatchStatements(tx.conn());
    for (const auto& row :
         tx.exec_prepared(kLockStreamsName, runs, res, ranks, streams, PgIntArray(b.node_ranks),
                          PgTextArray(b.nodes), writer_id)) {
      const size_t i = b.Index(PgLogKey{row[0].as<std::string>(), row[1].as<int32_t>(),
                                        row[2].as<int32_t>(), row[3].as<int32_t>()});
      durable[i] = row[4].as<int64_t>();
      max[i] = row[5].as<int64_t>();
    }
    NewChunks chunks;
    std::deque<pqxx::binarystring> held;  // the bytes of merged chunks, viewed by their lines
    std::vector<int64_t> added_bytes(n, 0), newest(n, 0);
    result.inserted = 0;
    for (size_t i = 0; i < n; ++i) {
      const auto& [run, resumption, rank, stream] = b.keys[i];
      const int64_t durable_before = durable[i];
      // What is stored beyond the watermark (after a gap): single lines, and markers' stretches
      // of dropped lines (few), so that a line is looked up in constant time. Those chunks are
      // merged with this batch's lines, if it has any.
      absl::flat_hash_set<int64_t> stored;
      std::vector<SeqRange> stretches;
      const auto keep = [&](int64_t seq, int64_t dropped) {
        if (dropped > 1) {
          stretches.push_back({seq - dropped + 1, seq});
        } else {
          stored.insert(seq);
        }
      };
      std::vector<ChunkLine> beyond;
      if (max[i] > durable[i]) {
        for (const auto& row :
             tx.exec_params(kChunksBeyond, run, resumption, rank, stream, durable_before)) {
          held.emplace_back(row[0]);
          TESSERA_RETURN_IF_ERROR(ForEachChunkLine(
              absl::string_view(held.back().get(), held.back().size()), [&](const ChunkLine& l) {
                beyond.push_back(l);
                if (l.sequence > durable_before) keep(l.sequence, l.dropped);
              }));
        }
      }
      // A gapless packed group that follows what is stored, with nothing stored beyond the
      // watermark: its bytes are the chunk.
      if (const auto& w = b.whole[i]) {
        if (max[i] <= durable_before && w->first_sequence > durable_before &&
            w->first <= durable_before + 1) {
          chunks.Add(static_cast<int32_t>(i + 1), *w);
          result.inserted += w->count;
          added_bytes[i] += w->text_bytes;
          newest[i] = std::max(newest[i], w->t1);
          durable[i] = w->last;
          max[i] = std::max(max[i], w->last);
          continue;
        }
        TESSERA_RETURN_IF_ERROR(b.Materialize(i));
      }
      std::vector<ChunkLine> fresh;
      fresh.reserve(b.lines[i].size());
      // The batch's lines that follow the watermark one after the other (the usual case) are
      // one stretch, durable_before + 1 .. in_order, not a set of single lines: only a line
      // out of that order is looked up and kept one by one.
      int64_t in_order = durable_before;
      for (const ChunkLine& l : b.lines[i]) {
        const int64_t seq = l.sequence;
        if (seq <= in_order) continue;  // stored, or earlier in this batch
        // (Until a line is kept one by one, `stored` and `stretches` hold only what lies beyond
        // the watermark in the table.)
        if (stored.empty() && stretches.empty() && FirstOf(l) <= in_order + 1) {
          in_order = seq;
        } else if (stored.contains(seq) ||
                   std::any_of(stretches.begin(), stretches.end(), [&](const SeqRange& r) {
                     return r.first <= seq && seq <= r.last;
                   })) {
          continue;
        } else {
          keep(seq, l.dropped);
        }
        fresh.push_back(l);
        added_bytes[i] += static_cast<int64_t>(l.text.size());
        newest[i] = std::max(newest[i], l.micros);
      }
      if (in_order > durable_before) stretches.push_back({durable_before + 1, in_order});
      for (int64_t seq : stored) stretches.push_back({seq, seq});
      for (const SeqRange& r : stretches) max[i] = std::max(max[i], r.last);
      durable[i] = Advance(durable[i], std::move(stretches));
      if (fresh.empty()) continue;
      result.inserted += static_cast<int64_t>(fresh.size());
      if (!beyond.empty()) {
        tx.exec_params(kDeleteChunksBeyond, run, resumption, rank, stream, durable_before);
        fresh.insert(fresh.end(), beyond.begin(), beyond.end());
      }
      chunks.Add(static_cast<int32_t>(i + 1), fresh);
    }
    if (!chunks.key.empty()) {
      tx.exec_prepared(kInsertChunksName, runs, res, ranks, streams, PgIntArray(b.node_ranks),
                       PgTextArray(b.nodes), PgIntArray(chunks.key), PgIntArray(chunks.last),
                       PgIntArray(chunks.first), PgIntArray(chunks.first_time),
                       PgIntArray(chunks.last_time), PgIntArray(chunks.count),
                       PgIntArray(chunks.offset), PgIntArray(chunks.length),
                       pqxx::binarystring(chunks.bytes.data(), chunks.bytes.size()));
    } else {
      tx.exec_prepared(kPlanForValuesName);
    }
    const pqxx::result marks =
        tx.exec_prepared(kStoreWatermarksName, runs, res, ranks, streams, PgIntArray(durable),
                         PgIntArray(max), PgIntArray(added_bytes), PgIntArray(newest));
    result.watermarks.clear();
    for (const auto& row : marks) result.watermarks.push_back(DecodeLogStream(row));
    return absl::OkStatus();
  });
  if (!st.ok()) return st;
  // In the batch's order.
  std::sort(result.watermarks.begin(), result.watermarks.end(),
            [&](const LogStreamInfo& x, const LogStreamInfo& y) {
              return b.Index(PgLogKey{x.run_id, x.resumption_index, x.rank, x.stream}) <
                     b.Index(PgLogKey{y.run_id, y.resumption_index, y.rank, y.stream});
            });
  return result;
}

}  // namespace tessera::store
