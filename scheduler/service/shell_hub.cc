#include "scheduler/service/shell_hub.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"

namespace tessera::scheduler {

ShellHub::ShellHub(std::shared_ptr<AttemptTracker> attempts, ShellHubOptions options,
                   std::function<std::string()> new_session_id)
    : attempts_(std::move(attempts)),
      options_(options),
      new_session_id_(std::move(new_session_id)) {}

int ShellHub::open_sessions() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(sessions_.size());
}

absl::Status ShellHub::Connect(const auth::Principal& who, const v1::ShellOpen& open,
                               ShellCallerEnd& caller) {
  if (open.run_name().empty()) return absl::InvalidArgumentError("open.run_name: required");
  const std::optional<v1::Run> run = attempts_->ActiveRunNamed(open.run_name());
  if (!run) {
    return absl::NotFoundError(absl::StrCat(
        "run ", open.run_name(), " is not running (a shell opens only in a running run)"));
  }
  if (!who.is_admin() && run->user() != who.user) {
    return absl::PermissionDeniedError(absl::StrCat("only the owner of run ", open.run_name(),
                                                    " and admins may connect to it; ", who.user,
                                                    " is neither"));
  }
  std::string node;
  for (const auto& n : run->nodes()) {
    if (n.node_rank() == open.node_rank()) node = n.node_name();
  }
  if (node.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("run ", open.run_name(), " has no node rank ",
                                                   open.node_rank(), " (its node ranks are 0 to ",
                                                   run->nodes_size() - 1, ")"));
  }
  const std::string id = new_session_id_();
  auto session = std::make_shared<Session>();
  session->node = node;
  std::function<void(const v1::ShellSessionStart&)> send;
  {
    absl::MutexLock lock(&mu_);
    if (static_cast<int>(sessions_.size()) >= options_.max_sessions) {
      return absl::ResourceExhaustedError(absl::StrCat("this scheduler has ", options_.max_sessions,
                                                       " shells open, its limit; try again later"));
    }
    auto listener = listeners_.find(node);
    if (listener == listeners_.end()) {
      return absl::UnavailableError(
          absl::StrCat("node ", node,
                       " takes no shells now (its worker is reconnecting, or is from before "
                       "mcli connect); try again"));
    }
    send = listener->second.send;
    sessions_[id] = session;
  }
  v1::ShellSessionStart start;
  start.set_session_id(id);
  start.set_run_id(run->id());
  start.set_resumption_index(run->resumption_index());
  *start.mutable_open() = open;
  send(start);  // outside the lock: it takes the stream's
  {
    absl::MutexLock lock(&mu_);
    const bool attached =
        mu_.AwaitWithTimeout(absl::Condition(
                                 +[](Session* s) { return s->end != nullptr; }, session.get()),
                             options_.attach_timeout);
    if (!attached) {
      sessions_.erase(id);
      return absl::UnavailableError(absl::StrCat("node ", node, " did not open the shell within ",
                                                 absl::FormatDuration(options_.attach_timeout)));
    }
  }
  absl::Status result = Relay(*session, caller);
  {
    absl::MutexLock lock(&mu_);
    session->done = true;
    sessions_.erase(id);
  }
  return result;
}

absl::Status ShellHub::Relay(Session& session, ShellCallerEnd& caller) {
  ShellNodeEnd& node = *session.end;
  // The node's first word: the shell is open (an output, empty maybe), or why it is not. Until
  // then nothing reads the caller, so a refusal ends the call with its own status.
  v1::ShellNodeMessage first;
  if (!node.Read(&first)) {
    return absl::UnavailableError(
        absl::StrCat("node ", session.node, " went before the shell opened"));
  }
  if (first.has_refused()) {
    return absl::FailedPreconditionError(
        absl::StrCat("node ", session.node, " could not open the shell: ", first.refused()));
  }
  std::atomic<bool> over{false};
  absl::Notification input_ended;
  std::thread input([&] {
    v1::ShellInput in;
    while (caller.Read(&in)) {
      if (in.has_open()) continue;  // the first message only
      if (!node.Write(in)) break;
    }
    // A caller that went takes its shell with it; one that only stopped sending (its input
    // ended) still gets the shell's output and exit code.
    if (!over && caller.Gone()) node.Cancel();
    input_ended.Notify();
  });
  absl::Status result = absl::OkStatus();
  bool exited = false;
  for (v1::ShellNodeMessage m = std::move(first);;) {
    if (m.has_output()) {
      if (!caller.Write(m.output())) {
        result = absl::CancelledError("the caller went");
        break;
      }
      if (m.output().has_exit_code()) {
        exited = true;
        break;
      }
    }
    if (!node.Read(&m)) {
      result = absl::UnavailableError(
          absl::StrCat("node ", session.node, " went before the shell ended"));
      break;
    }
  }
  over = true;
  if (!exited) node.Cancel();
  // mcli half-closes once it has the exit code; one that does not is cut off.
  if (!input_ended.WaitForNotificationWithTimeout(exited ? options_.close_timeout
                                                         : absl::ZeroDuration())) {
    caller.Cancel();
  }
  input.join();
  return result;
}

uint64_t ShellHub::AddListener(const std::string& node,
                               std::function<void(const v1::ShellSessionStart&)> send) {
  absl::MutexLock lock(&mu_);
  listeners_[node] = Listener{std::move(send), ++listener_ids_};
  return listener_ids_;
}

void ShellHub::RemoveListener(const std::string& node, uint64_t listener) {
  absl::MutexLock lock(&mu_);
  if (auto it = listeners_.find(node); it != listeners_.end() && it->second.id == listener) {
    listeners_.erase(it);
  }
}

absl::Status ShellHub::Attach(const std::string& node, const std::string& session_id,
                              ShellNodeEnd& end) {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(session_id);
  if (it == sessions_.end() || it->second->node != node) {
    return absl::NotFoundError(
        absl::StrCat("no shell session ", session_id, " waits for node ", node));
  }
  std::shared_ptr<Session> session = it->second;
  if (session->end != nullptr) {
    return absl::AlreadyExistsError(absl::StrCat("shell session ", session_id, " is attached"));
  }
  session->end = &end;
  // Until the relay is over (Connect sets done); absl re-evaluates the condition as the mutex
  // is released, so no notification can be missed.
  mu_.Await(absl::Condition(&session->done));
  return absl::OkStatus();
}

}  // namespace tessera::scheduler
