#pragma once
// Relays an EventSource to a client as Server-Sent Events, asynchronously, on the connection's
// strand: no thread waits for a follower, so thousands of open streams cost their buffers only.
//
// The relay writes what the source has (up to kBatchBytes at a time, so a fast source cannot
// grow memory: the source itself stops reading upstream while its own queue is full), a comment
// line when nothing was sent for `keepalive`, and keeps a read pending on the socket so that a
// client that leaves is noticed at once (the source is then cancelled, which cancels the gRPC
// call). The response head goes out with the first event, or after `head_delay` when the
// upstream is slow to send one; a stream refused before any event becomes a plain JSON error.

// clang-format off
#include <utility>  // first: Boost 1.74 Asio uses std::exchange without including it
// clang-format on

#include <atomic>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "services/gateway/errors.h"
#include "services/gateway/event_source.h"
#include "services/gateway/http_types.h"

namespace tessera::gateway {

struct RelayOptions {
  // A comment line goes out when no event has for this long (keeps proxies from timing the
  // stream out, and finds clients that vanished without closing).
  std::chrono::milliseconds keepalive{15000};
  // The response head goes out when the upstream accepts the stream, or after this long
  // (an upstream that sends no initial metadata before its first message).
  std::chrono::milliseconds head_delay{1000};
  // Each write to the client must finish within this.
  std::chrono::milliseconds write_timeout{30000};
};

struct RelayOutcome {
  // Set when the stream failed before anything was sent: the caller writes this instead.
  std::optional<Response> response;
  int status = 200;  // for the access log
  int events = 0;    // events delivered
  bool client_gone = false;
};

// "event: <e>\nid: <id>\ndata: <data>\n\n" (data split on newlines, one data: line each).
std::string FormatEvent(const SseEvent& event);

// The response head of an event stream (the connection closes when the stream ends).
extern const char kEventStreamHead[];

// `Stream`: a beast::tcp_stream, or a beast::ssl_stream over one. Every member runs on the
// stream's strand. `owner` (the connection that owns the stream) is kept alive as long as the
// relay, so that no operation outlives the stream. `done` is called once, on the strand, after
// the last write; the caller then closes the connection (or writes outcome.response) and drops
// its reference to the relay.
template <class Stream>
class SseRelay : public std::enable_shared_from_this<SseRelay<Stream>> {
 public:
  using Done = std::function<void(RelayOutcome)>;
  static constexpr std::size_t kBatchBytes = 64u << 10;

  SseRelay(Stream& stream, std::shared_ptr<void> owner, std::unique_ptr<EventSource> source,
           const RelayOptions& options, const std::atomic<bool>& gateway_stopping, Done done)
      : stream_(stream),
        owner_(std::move(owner)),
        source_(std::move(source)),
        options_(options),
        gateway_stopping_(gateway_stopping),
        done_(std::move(done)),
        timer_(stream.get_executor()) {}

  void Start() {
    std::weak_ptr<SseRelay> weak = this->shared_from_this();
    source_->Start([weak] {
      if (auto self = weak.lock()) self->Notify();
    });
    ArmTimer(options_.head_delay);
    WatchClient();
    Pump();
  }

  // The client left or the gateway is stopping: the source ends soon, then `done`. Looks at the
  // source again too, so that an end already queued is taken even without a notification.
  void Cancel() {
    if (!cancelled_ && !ended_) {
      cancelled_ = true;
      source_->Cancel();
    }
    Pump();
  }

 private:
  // From any thread: the source may have something. Coalesced into one Pump on the strand.
  void Notify() {
    if (notify_pending_.exchange(true)) return;
    boost::asio::post(stream_.get_executor(), [self = this->shared_from_this()] {
      self->notify_pending_.store(false);
      self->Pump();
    });
  }

  void Pump() {
    if (ended_ || writing_) return;
    while (pending_.size() < kBatchBytes) {
      std::optional<SourceItem> item = source_->Next();
      if (!item) break;
      if (item->kind == SourceItem::Kind::kEnd) {
        End(item->status);
        break;
      }
      if (cancelled_) continue;  // drained until the end comes
      AppendHead();
      pending_ += FormatEvent(item->event);
      ++outcome_.events;
    }
    Flush();
  }

  void AppendHead() {
    if (head_sent_) return;
    head_sent_ = true;
    pending_.insert(0, kEventStreamHead);
  }

  void Flush() {
    if (writing_) return;
    if (pending_.empty() || (cancelled_ && !ended_)) {
      pending_.clear();
      if (ended_) Finish();
      return;
    }
    writing_ = true;
    out_.swap(pending_);
    pending_.clear();
    boost::beast::get_lowest_layer(stream_).expires_after(options_.write_timeout);
    boost::asio::async_write(
        stream_, boost::asio::buffer(out_),
        [self = this->shared_from_this()](boost::beast::error_code ec, std::size_t) {
          self->OnWritten(ec);
        });
  }

  void OnWritten(boost::beast::error_code ec) {
    writing_ = false;
    out_.clear();
    // The pending watch read must not inherit the write's deadline.
    boost::beast::get_lowest_layer(stream_).expires_never();
    if (ec) {
      outcome_.client_gone = true;
      pending_.clear();
      Cancel();
    } else if (!ended_) {
      ArmTimer(options_.keepalive);
    }
    if (ended_) {
      Flush();
    } else {
      Pump();
    }
  }

  void ArmTimer(std::chrono::milliseconds after) {
    timer_.expires_after(after);
    timer_.async_wait([self = this->shared_from_this()](boost::beast::error_code ec) {
      if (!ec) self->OnTimer();
    });
  }

  void OnTimer() {
    if (ended_ || cancelled_ || writing_) return;
    if (!head_sent_) {
      AppendHead();
    } else {
      pending_ += ": keepalive\n\n";
    }
    Flush();
    if (!writing_) ArmTimer(options_.keepalive);
  }

  // The client sends nothing while it listens: end of stream or an error means it left.
  void WatchClient() {
    stream_.async_read_some(
        boost::asio::buffer(sink_),
        [self = this->shared_from_this()](boost::beast::error_code ec, std::size_t) {
          if (self->ended_) return;
          if (ec) {
            self->outcome_.client_gone = true;
            self->Cancel();
            return;
          }
          self->WatchClient();
        });
  }

  void End(const grpc::Status& status) {
    ended_ = true;
    timer_.cancel();
    if (!head_sent_) {
      if (cancelled_) return;  // the client left, or the gateway is stopping: nothing to say
      if (!status.ok()) {
        outcome_.response = ErrorResponse(status);
        outcome_.status = outcome_.response->status;
        return;
      }
      AppendHead();  // an empty stream
      return;
    }
    // The upstream failed the stream (when the gateway is stopping, it cancelled it: no event).
    if (!status.ok() && !cancelled_ && !gateway_stopping_.load()) {
      outcome_.status = HttpStatusFor(status.error_code());
      pending_ += FormatEvent(
          SseEvent{"error", "", ErrorJson(CodeName(status.error_code()), status.error_message())});
    }
  }

  void Finish() {
    if (finished_) return;
    finished_ = true;
    source_.reset();  // gRPC is done with it: the end came
    Done done = std::move(done_);
    done(std::move(outcome_));
  }

  Stream& stream_;
  const std::shared_ptr<void> owner_;
  std::unique_ptr<EventSource> source_;
  const RelayOptions& options_;
  const std::atomic<bool>& gateway_stopping_;
  Done done_;
  boost::asio::steady_timer timer_;
  std::atomic<bool> notify_pending_{false};
  bool head_sent_ = false;
  bool cancelled_ = false;
  bool ended_ = false;
  bool writing_ = false;
  bool finished_ = false;
  std::string pending_;  // what the next write sends
  std::string out_;      // what the write in flight sends
  char sink_[512];
  RelayOutcome outcome_;
};

}  // namespace tessera::gateway
