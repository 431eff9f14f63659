#pragma once
// The workers connected to this scheduler instance, each by its control stream.

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "absl/synchronization/mutex.h"
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
  bool Connected(const std::string& node);

 private:
  struct Entry {
    uint64_t token;
    Sender sender;
  };
  absl::Mutex mu_;
  std::map<std::string, Entry> workers_ ABSL_GUARDED_BY(mu_);
  uint64_t next_token_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace tessera::scheduler
