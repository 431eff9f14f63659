#pragma once
// mcli connect's meeting point (shell.proto): a caller asks for a shell in a run's container on
// one of its nodes; the hub checks who may (the run's owner, an admin), tells the node's worker
// through its Listen stream, and once the worker attaches the session, relays bytes both ways
// until the shell ends. The scheduler's leader runs it: it holds the nodes' streams and knows
// which runs run where.
//
// Streams are the adapter's: each node's Listen on the async API (no thread each), the
// sessions' streams synchronous (a thread each: they are few, bounded by `max_sessions`); here
// they are the small interfaces below, so the hub is tested with fakes.

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "scheduler/service/attempt_tracker.h"
#include "services/common/auth/principal.h"
#include "tessera/v1/shell.pb.h"

namespace tessera::scheduler {

// The caller's end of a session: mcli's Connect stream.
class ShellCallerEnd {
 public:
  virtual ~ShellCallerEnd() = default;
  virtual bool Read(v1::ShellInput* in) = 0;  // false: the caller half-closed or went
  virtual bool Write(const v1::ShellOutput& out) = 0;
  virtual void Cancel() = 0;  // ends the call (a caller that never half-closes)
  // The caller is gone (its call was cancelled), rather than done sending (half-closed).
  virtual bool Gone() = 0;
};

// The node's end of a session: the worker's Attach stream.
class ShellNodeEnd {
 public:
  virtual ~ShellNodeEnd() = default;
  virtual bool Read(v1::ShellNodeMessage* in) = 0;
  virtual bool Write(const v1::ShellInput& out) = 0;
  virtual void Cancel() = 0;  // ends the call: the worker closes the shell
};

struct ShellHubOptions {
  // How long a node has to attach a session it was told of.
  absl::Duration attach_timeout = absl::Seconds(15);
  // How long a caller has to half-close after the shell's exit code (mcli does at once).
  absl::Duration close_timeout = absl::Seconds(5);
  int max_sessions = 64;
};

class ShellHub {
 public:
  ShellHub(std::shared_ptr<AttemptTracker> attempts, ShellHubOptions options,
           std::function<std::string()> new_session_id);

  // The caller's call, after its first message (`open`): returns how it ends. OK once the
  // shell's exit code was relayed.
  absl::Status Connect(const auth::Principal& who, const v1::ShellOpen& open,
                       ShellCallerEnd& caller);
  // A node's Listen stream: `send` is given each session to open there (it must not block: it
  // queues the message on the stream). A node that listens again replaces its earlier listener.
  // Returns what RemoveListener takes once the stream ends.
  uint64_t AddListener(const std::string& node,
                       std::function<void(const v1::ShellSessionStart&)> send);
  void RemoveListener(const std::string& node, uint64_t listener);
  // A node's Attach of session `session_id`: returns once the session is over.
  absl::Status Attach(const std::string& node, const std::string& session_id, ShellNodeEnd& end);

  // Sessions open now (for tests and metrics).
  int open_sessions() const;

 private:
  struct Listener {
    std::function<void(const v1::ShellSessionStart&)> send;
    uint64_t id = 0;
  };
  struct Session {
    std::string node;
    ShellNodeEnd* end = nullptr;  // once attached
    bool done = false;            // the relay is over: Attach may return
  };

  // The relay: the caller's input down (on a thread), the node's output up (here).
  absl::Status Relay(Session& session, ShellCallerEnd& caller);

  std::shared_ptr<AttemptTracker> attempts_;
  const ShellHubOptions options_;
  std::function<std::string()> new_session_id_;
  // Guards the listeners, the sessions and every Session's `end` and `done`.
  mutable absl::Mutex mu_;
  std::map<std::string, Listener> listeners_ ABSL_GUARDED_BY(mu_);                 // by node
  std::map<std::string, std::shared_ptr<Session>> sessions_ ABSL_GUARDED_BY(mu_);  // by id
  uint64_t listener_ids_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace tessera::scheduler
