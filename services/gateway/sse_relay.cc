#include "services/gateway/sse_relay.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <string>

#include "services/gateway/errors.h"

namespace tessera::gateway {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kHead[] =
    "HTTP/1.1 200 OK\r\n"
    "Server: tessera-gateway\r\n"
    "Content-Type: text/event-stream\r\n"
    "Cache-Control: no-cache\r\n"
    "X-Accel-Buffering: no\r\n"
    "Connection: close\r\n"
    "\r\n";

class Relay {
 public:
  Relay(PolledStream& client, EventSource& source, const RelayOptions& options, int event_fd)
      : client_(client), source_(source), options_(options), event_fd_(event_fd) {}

  RelayOutcome Run() {
    const Clock::time_point head_deadline = Clock::now() + options_.head_delay;
    for (;;) {
      while (std::optional<SourceItem> item = source_.Next()) {
        if (item->kind == SourceItem::Kind::kEnd) {
          Finish(item->status);
          return outcome_;
        }
        if (SendHead()) {
          if (Write(FormatEvent(item->event))) ++outcome_.events;
        }
      }
      Wait(head_deadline);
    }
  }

 private:
  // Waits for the source, the client or the wake descriptor, or a timer.
  void Wait(Clock::time_point head_deadline) {
    pollfd fds[3];
    int n = 0;
    fds[n++] = {event_fd_, POLLIN, 0};
    const int client_index = cancelled_ ? -1 : n;
    if (!cancelled_) fds[n++] = {client_.fd(), POLLIN | POLLRDHUP, 0};
    const int wake_index = cancelled_ ? -1 : n;
    if (!cancelled_) fds[n++] = {client_.wake_fd(), POLLIN, 0};

    int timeout = -1;  // once cancelled, the source's end is coming: wait for it alone
    if (!cancelled_) {
      const Clock::time_point until = head_sent_ ? next_keepalive_ : head_deadline;
      const auto ms =
          std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
      timeout = ms < 0 ? 0 : static_cast<int>(ms);
    }
    const int ready = ::poll(fds, static_cast<nfds_t>(n), timeout);
    if (ready < 0) return;  // EINTR: go round again
    if (fds[0].revents != 0) {
      std::uint64_t count;
      while (::read(event_fd_, &count, sizeof count) > 0) {
      }
    }
    if (client_index >= 0 && fds[client_index].revents != 0) CheckClient();
    if (wake_index >= 0 && fds[wake_index].revents != 0) Cancel();
    if (ready == 0 && !cancelled_) {
      if (!head_sent_) {
        SendHead();
      } else {
        Write(": keepalive\n\n");
      }
    }
  }

  // The client should send nothing while it listens: reading end-of-stream (or an error) means
  // it left; anything else is dropped.
  void CheckClient() {
    char buf[4096];
    const ssize_t n = ::recv(client_.fd(), buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) return;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    outcome_.client_gone = true;
    Cancel();
  }

  void Cancel() {
    if (cancelled_) return;
    cancelled_ = true;
    source_.Cancel();
  }

  bool SendHead() {
    if (head_sent_) return !cancelled_;
    if (cancelled_) return false;
    head_sent_ = true;
    return Write(kHead);
  }

  bool Write(const std::string& data) {
    if (cancelled_) return false;
    boost::beast::error_code ec;
    client_.expires_after(options_.write_timeout);
    if (!client_.WriteAll(data, ec)) {
      outcome_.client_gone = true;
      Cancel();
      return false;
    }
    next_keepalive_ = Clock::now() + options_.keepalive;
    return true;
  }

  void Finish(const grpc::Status& status) {
    if (!head_sent_) {
      if (cancelled_) return;  // the client left, or the gateway is stopping: nothing to say
      if (!status.ok()) {
        outcome_.response = ErrorResponse(status);
        outcome_.status = outcome_.response->status;
        return;
      }
      SendHead();  // an empty stream
      return;
    }
    // The upstream failed the stream (when the gateway is stopping, it cancelled it: no event).
    if (!status.ok() && !cancelled_ && !Stopping()) {
      outcome_.status = HttpStatusFor(status.error_code());
      Write(FormatEvent(
          SseEvent{"error", "", ErrorJson(CodeName(status.error_code()), status.error_message())}));
    }
  }

  bool Stopping() const {
    pollfd wake = {client_.wake_fd(), POLLIN, 0};
    return ::poll(&wake, 1, 0) > 0;
  }

  PolledStream& client_;
  EventSource& source_;
  const RelayOptions& options_;
  const int event_fd_;
  bool head_sent_ = false;
  bool cancelled_ = false;
  Clock::time_point next_keepalive_ = Clock::now();
  RelayOutcome outcome_;
};

}  // namespace

std::string FormatEvent(const SseEvent& event) {
  std::string out;
  if (!event.event.empty()) out += "event: " + event.event + "\n";
  if (!event.id.empty()) out += "id: " + event.id + "\n";
  std::size_t start = 0;
  for (;;) {
    const std::size_t nl = event.data.find('\n', start);
    out += "data: " + event.data.substr(start, nl == std::string::npos ? nl : nl - start) + "\n";
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  out += "\n";
  return out;
}

RelayOutcome RelayEvents(PolledStream& client, std::unique_ptr<EventSource> source,
                         const RelayOptions& options) {
  const int event_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (event_fd < 0) {
    RelayOutcome outcome;
    outcome.response = ErrorResponse(503, "UNAVAILABLE", "cannot open an event stream now");
    outcome.status = 503;
    return outcome;
  }
  source->Start([event_fd] {
    const std::uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(event_fd, &one, sizeof one);
  });
  RelayOutcome outcome = Relay(client, *source, options, event_fd).Run();
  source.reset();  // joins the pump, the last user of event_fd
  ::close(event_fd);
  return outcome;
}

}  // namespace tessera::gateway
