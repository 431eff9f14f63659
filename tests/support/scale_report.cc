// How bench_control_plane prints a ScaleReport (scale_harness.h): one line per figure.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tests/support/scale_harness.h"

namespace tessera::testing {

std::string FormatScaleReport(const ScaleReport& r) {
  std::string lost;
  for (double ms : r.lost_after_ms) absl::StrAppend(&lost, lost.empty() ? "" : " ", ms, " ms");
  std::string samples;
  for (const auto& s : r.database_samples) {
    absl::StrAppendFormat(
        &samples, "  database at %5.0f s: %.1f MiB, %d runs, %d log chunks (%d of no run)\n",
        s.at_seconds, static_cast<double>(s.bytes) / (1 << 20), static_cast<int>(s.runs),
        static_cast<int>(s.log_chunks), static_cast<int>(s.orphan_log_chunks));
  }
  return samples +
         absl::StrFormat(
             "nodes %d (%.0f s measured)\n"
             "  control plane:   %.3f cores, %.0f MiB resident (%.3f millicores per node), %d "
             "threads\n"
             "  log follows:     %d open through the gateway at the start, %d at the end\n"
             "  run watches:     %d open through the gateway at the start, %d at the end\n"
             "  PostgreSQL:      %.3f cores, %.0f commits/s, %.0f rows written/s, database %.0f "
             "MiB\n"
             "  heartbeats:      %d, round trip p50 %.2f ms, p99 %.2f ms; sent apart p99 %.0f ms, "
             "max %.0f ms\n"
             "  runs:            %d submitted, submit-to-start p50 %.0f ms, p99 %.0f ms; %d "
             "attempts "
             "started, %d finished, %d starts sent again, %d never started\n"
             "  killed nodes:    declared lost after %s (from the last heartbeat); %d falsely "
             "lost\n"
             "  logs:            %d lines pushed, %d read back, %d attempts mismatched, %d pushes "
             "failed\n"
             "  flood:           mallory's submits %d taken, %d refused at her limit, %d failed "
             "%s\n"
             "  streams dropped by the control plane: %d\n"
             "  GET /metrics:    p50 %.1f ms, max %.1f ms (%.2f of the 50 ms bound), %.0f KiB\n",
             r.nodes, r.seconds, r.server_cores,
             static_cast<double>(r.server_rss_bytes) / (1 << 20),
             1000 * r.server_cores / std::max(r.nodes, 1), r.server_threads, r.follows_open,
             r.follows_open_at_end, r.watches_open, r.watches_open_at_end, r.database_cores,
             r.commits_per_second, r.rows_written_per_second,
             static_cast<double>(r.database_bytes) / (1 << 20), static_cast<int>(r.heartbeats),
             r.heartbeat_rtt_p50_ms, r.heartbeat_rtt_p99_ms, r.heartbeat_gap_p99_ms,
             r.heartbeat_gap_max_ms, r.runs_submitted, r.submit_to_start_p50_ms,
             r.submit_to_start_p99_ms, r.attempts_started, r.attempts_finished, r.starts_sent_again,
             static_cast<int>(r.not_started.size()), lost.empty() ? "(none)" : lost,
             static_cast<int>(r.falsely_lost.size()), static_cast<int>(r.lines_pushed),
             static_cast<int>(r.lines_read), static_cast<int>(r.log_mismatches.size()),
             static_cast<int>(r.log_push_failures), static_cast<int>(r.flood.accepted),
             static_cast<int>(r.flood.refused), static_cast<int>(r.flood.failed),
             r.flood.first_failure, static_cast<int>(r.streams_dropped), r.metrics_scrape_p50_ms,
             r.metrics_scrape_max_ms, r.metrics_scrape_p50_ms / 50.0,
             static_cast<double>(r.metrics_bytes) / 1024);
}

}  // namespace tessera::testing
