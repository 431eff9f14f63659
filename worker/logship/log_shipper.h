// Ships every line the node's ranks print to the log service: tails each rank's spool files,
// sends batches over one PushLogs stream, and moves each file's acknowledged position only when
// the service says the lines are durable. A dropped connection or a restarted log service
// rewinds to the acknowledged positions and resends; the service drops lines it already has
// (they keep their sequence numbers), so nothing is lost and nothing is stored twice. The
// positions are saved next to the spool files, so a restarted worker resumes too.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "base/random.h"
#include "tessera/v1/logs.grpc.pb.h"
#include "transport/tls/tls_flags.h"
#include "worker/common/rank_output.h"
#include "worker/logship/spool_reader.h"

namespace tessera::worker {

struct LogShipperOptions {
  std::string node_name;
  std::string endpoint;  // host:port of the log service
  std::string api_key;   // this node's key
  tls::TlsFlags tls{};   // the node's certificate and the cluster CA, or plain text
  size_t batch_lines = 4096;
  size_t batch_bytes = 1 << 20;
  size_t max_in_flight = 4;  // batches sent and not yet acknowledged
  // How often spool files are read for new lines: idle_poll while lines come, doubling while
  // none do up to idle_poll_max. With no rank's output to follow and nothing unacknowledged,
  // the shipper sleeps until a rank is watched (an idle node spends nothing on it).
  absl::Duration idle_poll = absl::Milliseconds(2);
  absl::Duration idle_poll_max = absl::Milliseconds(25);
};

struct LogShipperStats {
  int64_t lines_sent = 0;
  int64_t lines_acked = 0;
  int64_t batches_resent = 0;
  int64_t reconnects = 0;
  int files_tracked = 0;
  // Bytes the ranks wrote that the log service has not acknowledged yet (summed over the spool
  // files tracked; a backlog that keeps growing means the logs cannot keep up or cannot go).
  int64_t backlog_bytes = 0;
};

class LogShipper {
 public:
  // `clock` stamps the lines (the wall clock); `timer` times the waits and the periodic saves (the
  // monotonic clock: a step of the wall clock must not stall shipping). Tests pass one fake.
  // `random` draws the reconnect delays' jitter and this shipper's instance id (null: the
  // system's).
  LogShipper(LogShipperOptions options, std::shared_ptr<Clock> clock,
             std::shared_ptr<Clock> timer = nullptr, std::shared_ptr<Random> random = nullptr);
  ~LogShipper();

  // Starts tracking a rank's two spool files (a repeat is ignored).
  void Watch(const RankOutput& output);
  // The rank has exited: its files are complete, and a last line without a newline is shipped.
  void RankDone(const RankOutput& output);
  // Picks up the spool files of every attempt under `state_dir` not yet shipped completely
  // (after a worker restart); they are all complete, since no rank outlives its worker.
  void RecoverSpools(const std::string& state_dir);

  void Start();
  void Stop();
  LogShipperStats stats();
  // True when every tracked line has been acknowledged.
  bool Drained();
  // True when the rank's files are complete and every line of them has been acknowledged (or
  // they were never this shipper's to send): its output is all in the log service.
  bool Shipped(const RankOutput& output);

 private:
  // Whether the stream loop has anything to do: a file to follow, a batch to be acknowledged,
  // a stream to replace, or stopping.
  bool HasWork() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  struct File {
    std::string path;
    v1::LogLine proto;  // run, attempt, ranks, stream, node: copied into each line
    std::unique_ptr<SpoolReader> reader;
    SpoolPosition acked;
    SpoolPosition saved;  // last position written to the .acked file
    bool final = false;
  };
  struct InFlight {
    std::string key;
    std::vector<std::pair<File*, SpoolPosition>> ends;  // each file's position after the batch
    size_t lines = 0;
  };

  void Loop();
  // One connection: runs until it breaks or Stop. Returns true if anything was acknowledged.
  bool RunStream();
  void AddFile(const std::string& path, const RankOutput& out, v1::LogStream stream);
  std::optional<InFlight> NextBatch(v1::LogBatch& batch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnAck(const v1::LogAck& ack);
  void RewindAll() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SaveProgress() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const LogShipperOptions options_;
  const std::shared_ptr<Clock> clock_;
  const std::shared_ptr<Clock> timer_;
  const std::shared_ptr<Random> random_;
  std::unique_ptr<v1::LogService::Stub> stub_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  int64_t batch_counter_ = 0;
  const std::string instance_;

  absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<File>> files_ ABSL_GUARDED_BY(mu_);
  std::deque<InFlight> in_flight_ ABSL_GUARDED_BY(mu_);
  LogShipperStats stats_ ABSL_GUARDED_BY(mu_);
  grpc::ClientContext* active_ctx_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool stream_ended_ ABSL_GUARDED_BY(mu_) = false;  // the service ended the current stream
  // The current stream's service acknowledged a batch with LogAck.accepts_packed.
  bool packed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace tessera::worker
