-- Rank output in chunks: a row holds lines of one stream (a push's batch of it, usually), so
-- storing a batch of a thousand lines writes one row per stream, not a thousand. The lines are
-- encoded as in services/store/postgres/log_chunk_codec.h. The chunks of one stream cover
-- disjoint ranges of sequences [first_sequence, last_sequence] (the store merges a chunk that
-- fills a gap with those beyond it), so that the key's order is the lines' order.
CREATE TABLE log_chunks (
  run_id            text NOT NULL,
  resumption_index  integer NOT NULL,
  rank              integer NOT NULL,
  stream            smallint NOT NULL,
  last_sequence     bigint NOT NULL,
  -- The lowest sequence a line of the chunk stands for (a marker of dropped lines stands for
  -- several).
  first_sequence    bigint NOT NULL,
  node_rank         integer NOT NULL,
  node_name         text NOT NULL,
  first_time        timestamptz NOT NULL,
  last_time         timestamptz NOT NULL,
  line_count        integer NOT NULL,
  lines             bytea COMPRESSION lz4 NOT NULL,
  PRIMARY KEY (run_id, resumption_index, rank, stream, last_sequence)
);

-- The lines stored so far, a chunk per thousand sequences of a stream.
INSERT INTO log_chunks (run_id, resumption_index, rank, stream, last_sequence, first_sequence,
                        node_rank, node_name, first_time, last_time, line_count, lines)
SELECT run_id, resumption_index, rank, stream, max(sequence),
       min(sequence - GREATEST(dropped - 1, 0)), min(node_rank), min(node_name), min(time),
       max(time), count(*),
       string_agg(int8send(sequence) || int8send((extract(epoch FROM time) * 1000000)::bigint)
                    || int8send(dropped) || int4send(length(text)) || text,
                  ''::bytea ORDER BY sequence)
FROM log_lines
GROUP BY run_id, resumption_index, rank, stream, sequence / 1000;

DROP TABLE log_lines;
