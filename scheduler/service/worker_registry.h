#pragma once
// The workers connected to this scheduler instance, each by its control stream.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "tessera/v1/worker.pb.h"

namespace tessera::scheduler {

class WorkerRegistry {
 public:
  // Writes one message to the worker's stream; false when the stream is gone.
  using Sender = std::function<bool(const v1::ControlMessage&)>;

  // Attaches a stream for `node`, replacing an older one; returns a token for Detach.
  uint64_t Attach(const std::string& node, Sender sender);
  // Detaches the stream only if it is still the one `token` attached.
  void Detach(const std::string& node, uint64_t token);
  // False when the node has no stream or the write failed.
  bool Send(const std::string& node, const v1::ControlMessage& message);

  // Sends a command and waits for the worker's acknowledgement of its command_id: UNAVAILABLE
  // when the node's worker is not connected here, DEADLINE_EXCEEDED without an answer in
  // `timeout`, FAILED_PRECONDITION with the worker's reason when it refused.
  absl::Status SendAndWait(const std::string& node, const v1::ControlMessage& message,
                           absl::Duration timeout);
  // A worker's acknowledgement, for whoever waits for it.
  void OnAck(const v1::CommandAck& ack);
  // Also told every acknowledgement, for commands no one waits for (a spare's warm-up).
  void SetAckListener(std::function<void(const v1::CommandAck&)> listener);

 private:
  struct Entry {
    uint64_t token;
    Sender sender;
  };
  absl::Mutex mu_;
  std::map<std::string, Entry> workers_ ABSL_GUARDED_BY(mu_);
  absl::Mutex acks_mu_;
  // Commands waited for, by id; set once their ack arrives.
  std::map<std::string, std::optional<v1::CommandAck>> acks_ ABSL_GUARDED_BY(acks_mu_);
  std::function<void(const v1::CommandAck&)> ack_listener_ ABSL_GUARDED_BY(acks_mu_);
  uint64_t next_token_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace tessera::scheduler
