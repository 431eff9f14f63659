#pragma once
// What the PostgreSQL log store's writing and reading share: the key of a stream, arrays as
// parameters, and the decoding of its rows.

#include <pqxx/pqxx>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/log_line_codec.h"
#include "services/store/log_store.h"
#include "services/store/postgres/pg_pool.h"

namespace tessera::store {

// (run, resumption, rank, stream)
using PgLogKey = std::tuple<std::string, int32_t, int32_t, int32_t>;

// A log_streams row: run_id, resumption_index, rank, stream, node_rank, node_name,
// durable_sequence, max_sequence.
LogStreamInfo DecodeLogStream(const pqxx::row& row);

// One line of a chunk as the API's message.
v1::LogLine ChunkLineToProto(const ChunkLine& line, const PgLogKey& key, int32_t node_rank,
                             const std::string& node_name);

// Stores a batch of lines (LogStore::AppendLogBatch); its change notification names `writer_id`.
absl::StatusOr<LogAppendResult> AppendLogChunks(PgPool& pool, const LogBatchToStore& batch,
                                                const std::string& writer_id);

}  // namespace tessera::store
