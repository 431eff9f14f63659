#include "services/gateway/connection.h"

#include <spdlog/spdlog.h>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <optional>
#include <type_traits>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "services/gateway/dispatch.h"
#include "services/gateway/errors.h"

namespace tessera::gateway {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

std::string ToStd(beast::string_view s) { return std::string(s.data(), s.size()); }
beast::string_view ToBeast(const std::string& s) { return {s.data(), s.size()}; }

bool IsHttpError(const beast::error_code& ec) {
  static const beast::error_code http_error = http::error::bad_target;
  return ec.category() == http_error.category();
}

constexpr char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
// After an answer that closes the connection, what the client still sends is read and dropped
// for at most this long (closing with unread bytes would reset the connection, and the client
// could lose the answer), and at most this much of it.
constexpr auto kLingerTime = std::chrono::seconds(2);
constexpr std::size_t kLingerBytes = 8u << 20;

// `Stream` is a beast::tcp_stream, or a beast::ssl_stream over one (TLS).
template <class Stream>
class Session final : public Connection, public std::enable_shared_from_this<Session<Stream>> {
 public:
  static constexpr bool kTls = !std::is_same_v<Stream, beast::tcp_stream>;

  Session(tcp::socket socket, std::string peer, std::shared_ptr<ssl::context> tls,
          const ConnectionContext& context)
      : tls_(std::move(tls)),
        stream_(MakeStream(std::move(socket))),
        peer_(std::move(peer)),
        context_(context),
        limits_(context.limits),
        connections_(context.connections) {}

  // The set outlives the gateway's I/O context, where the last references may be dropped.
  ~Session() override { connections_.Remove(this); }

  void Start() {
    net::dispatch(stream_.get_executor(),
                  beast::bind_front_handler(&Session::Begin, this->shared_from_this()));
  }

  void Stop() override {
    net::post(stream_.get_executor(), [self = this->shared_from_this()] {
      self->stopped_ = true;
      // A copy: the relay may finish inside Cancel, and its end drops the member.
      if (auto relay = self->relay_) relay->Cancel();
      if (!self->handler_running_) self->Close();
    });
  }

 private:
  Stream MakeStream(tcp::socket socket) {
    if constexpr (kTls) {
      return Stream(std::move(socket), *tls_);
    } else {
      return Stream(std::move(socket));
    }
  }

  beast::tcp_stream& Tcp() { return beast::get_lowest_layer(stream_); }

  void Begin() {
    if constexpr (kTls) {
      Tcp().expires_after(limits_.request_timeout);
      stream_.async_handshake(
          ssl::stream_base::server, [self = this->shared_from_this()](beast::error_code ec) {
            if (ec) {
              spdlog::info("gateway: {} failed the TLS handshake: {}", self->peer_, ec.message());
              return self->Close();
            }
            self->ReadHeader(true);
          });
    } else {
      ReadHeader(true);
    }
  }

  void ReadHeader(bool first) {
    if (stopped_) return Close();
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(limits_.max_header_bytes));
    parser_->body_limit(limits_.max_body_bytes);
    // The first request may take request_timeout to arrive; later ones idle_timeout.
    Tcp().expires_after(first ? limits_.request_timeout : limits_.idle_timeout);
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
                              self->OnHeader(ec);
                            });
  }

  void OnHeader(beast::error_code ec) {
    if (ec) return RejectOrClose(ec, 11);
    const auto& head = parser_->get();
    version_ = head.version();
    if (const auto length = parser_->content_length();
        length.has_value() && *length > limits_.max_body_bytes) {
      return Reject(PayloadTooLarge());
    }
    Tcp().expires_after(limits_.request_timeout);
    if (absl::EqualsIgnoreCase(ToStd(head[http::field::expect]), "100-continue") &&
        !parser_->is_done()) {
      net::async_write(stream_, net::buffer(kContinue, sizeof kContinue - 1),
                       [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
                         if (ec) return self->Close();
                         self->ReadBody();
                       });
      return;
    }
    ReadBody();
  }

  void ReadBody() {
    if (parser_->is_done()) return OnBody({});
    http::async_read(
        stream_, buffer_, *parser_,
        [self = this->shared_from_this()](beast::error_code ec, std::size_t) { self->OnBody(ec); });
  }

  void OnBody(beast::error_code ec) {
    if (ec) return RejectOrClose(ec, version_);
    http::request<http::string_body> req = parser_->release();
    parser_.reset();
    start_ = Clock::now();
    keep_alive_ = req.keep_alive();
    WireRequest wire;
    wire.method = ToStd(req.method_string());
    wire.target = ToStd(req.target());
    for (const auto& field : req) {
      wire.headers.emplace(absl::AsciiStrToLower(ToStd(field.name_string())), ToStd(field.value()));
    }
    wire.body = std::move(req.body());
    wire.peer = peer_;
    method_ = wire.method;
    target_ = wire.target.substr(0, wire.target.find('?'));
    Tcp().expires_never();  // the handler's upstream call has its own deadline
    handler_running_ = true;
    // A route's handler makes a blocking gRPC call: on the pool, never on an I/O thread.
    net::post(
        context_.handlers, [self = this->shared_from_this(), wire = std::move(wire)]() mutable {
          auto result =
              std::make_shared<HandlerResult>(Dispatch(self->context_.routes, std::move(wire)));
          net::post(self->stream_.get_executor(), [self, result] { self->OnResult(*result); });
        });
  }

  void OnResult(HandlerResult& result) {
    handler_running_ = false;
    if (stopped_) {
      if (auto* source = std::get_if<std::unique_ptr<EventSource>>(&result)) (*source)->Cancel();
      return Close();
    }
    if (auto* source = std::get_if<std::unique_ptr<EventSource>>(&result)) {
      return Relay(std::move(*source));
    }
    const Response& response = std::get<Response>(result);
    Log(response.status, -1);
    Write(response, keep_alive_, [self = this->shared_from_this()](bool written) {
      if (written && self->keep_alive_) return self->ReadHeader(false);
      self->Close();
    });
  }

  void Relay(std::unique_ptr<EventSource> source) {
    relay_ = std::make_shared<SseRelay<Stream>>(
        stream_, this->shared_from_this(), std::move(source), limits_.relay, context_.stopping,
        [this](RelayOutcome outcome) {
          // On the strand; the relay keeps this session alive until it is destroyed.
          relay_.reset();
          Log(outcome.status, outcome.events);
          if (outcome.response.has_value() && !stopped_) {
            return Write(*outcome.response, false,
                         [self = this->shared_from_this()](bool) { self->Close(); });
          }
          Close();
        });
    // A source that ends at once finishes the relay inside Start(): keep it alive through it.
    std::shared_ptr<SseRelay<Stream>> relay = relay_;
    relay->Start();
  }

  // Writes `response` (a copy is kept until the write ends), then calls `then(written)`.
  template <class Then>
  void Write(const Response& response, bool keep_alive, Then then) {
    auto res = std::make_shared<http::response<http::string_body>>();
    res->version(version_);
    res->result(static_cast<unsigned>(response.status));
    res->set(http::field::server, "tessera-gateway");
    if (!response.content_type.empty()) {
      res->set(http::field::content_type, ToBeast(response.content_type));
    }
    res->set(http::field::cache_control, "no-store");
    for (const auto& [name, value] : response.headers) res->set(ToBeast(name), ToBeast(value));
    res->body() = response.body;
    res->keep_alive(keep_alive);
    res->prepare_payload();
    Tcp().expires_after(limits_.request_timeout);
    http::async_write(stream_, *res,
                      [self = this->shared_from_this(), res, then = std::move(then)](
                          beast::error_code ec, std::size_t) mutable { then(!ec); });
  }

  // After a read error: answers what was malformed, or just closes.
  void RejectOrClose(const beast::error_code& ec, unsigned version) {
    version_ = version == 10 ? 10 : 11;
    if (!IsHttpError(ec) || ec == http::error::end_of_stream ||
        ec == http::error::partial_message) {
      return Close();  // closed, reset, timed out or stopping
    }
    if (ec == http::error::body_limit) return Reject(PayloadTooLarge());
    if (ec == http::error::header_limit || ec == http::error::buffer_overflow) {
      return Reject(ErrorResponse(431, "REQUEST_HEADER_FIELDS_TOO_LARGE",
                                  "the request header is larger than " +
                                      std::to_string(limits_.max_header_bytes) + " bytes"));
    }
    Reject(BadRequest("malformed HTTP request: " + ec.message()));
  }

  Response PayloadTooLarge() const {
    return ErrorResponse(
        413, "PAYLOAD_TOO_LARGE",
        "the request body is larger than " + std::to_string(limits_.max_body_bytes) + " bytes");
  }

  // Answers and closes, letting the client finish sending first.
  void Reject(const Response& response) {
    spdlog::info("gateway: {} rejected: {} {}", peer_, response.status, response.body);
    Write(response, false, [self = this->shared_from_this()](bool written) {
      if (!written) return self->Close();
      beast::error_code ignored;
      beast::get_lowest_layer(self->stream_).socket().shutdown(tcp::socket::shutdown_send, ignored);
      self->Tcp().expires_after(kLingerTime);
      self->Linger();
    });
  }

  void Linger() {
    Tcp().async_read_some(net::buffer(sink_),
                          [self = this->shared_from_this()](beast::error_code ec, std::size_t n) {
                            self->lingered_ += n;
                            if (ec || self->lingered_ >= kLingerBytes) return self->Close();
                            self->Linger();
                          });
  }

  void Close() {
    if (closed_) return;
    closed_ = true;
    beast::error_code ignored;
    auto& socket = Tcp().socket();
    socket.shutdown(tcp::socket::shutdown_both, ignored);
    socket.close(ignored);
  }

  void Log(int status, int events) const {
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start_).count();
    if (events >= 0) {
      spdlog::info("gateway: {} {} {} -> {} ({} events, {} ms)", peer_, method_, target_, status,
                   events, ms);
    } else {
      spdlog::info("gateway: {} {} {} -> {} ({} ms)", peer_, method_, target_, status, ms);
    }
  }

  std::shared_ptr<ssl::context> tls_;  // kept alive while the stream uses it
  Stream stream_;
  const std::string peer_;
  const ConnectionContext& context_;
  const ConnectionLimits& limits_;
  ConnectionSet& connections_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::shared_ptr<SseRelay<Stream>> relay_;
  unsigned version_ = 11;
  bool keep_alive_ = false;
  bool handler_running_ = false;
  bool stopped_ = false;
  bool closed_ = false;
  std::size_t lingered_ = 0;
  char sink_[16 * 1024];
  std::string method_, target_;
  Clock::time_point start_ = Clock::now();
};

}  // namespace

bool ConnectionSet::Add(const std::shared_ptr<Connection>& connection, std::string address) {
  absl::MutexLock lock(&mu_);
  if (stopped_) return false;
  ++per_address_[address];
  open_.emplace(connection.get(), Open{connection, std::move(address)});
  return true;
}

void ConnectionSet::Remove(const Connection* connection) {
  absl::MutexLock lock(&mu_);
  auto it = open_.find(connection);
  if (it == open_.end()) return;
  if (auto count = per_address_.find(it->second.address);
      count != per_address_.end() && --count->second == 0) {
    per_address_.erase(count);
  }
  open_.erase(it);
}

std::size_t ConnectionSet::CountFrom(const std::string& address) const {
  absl::MutexLock lock(&mu_);
  auto it = per_address_.find(address);
  return it == per_address_.end() ? 0 : it->second;
}

std::size_t ConnectionSet::size() const {
  absl::MutexLock lock(&mu_);
  return open_.size();
}

void ConnectionSet::StopAll() {
  std::vector<std::shared_ptr<Connection>> open;
  {
    absl::MutexLock lock(&mu_);
    stopped_ = true;
    for (auto& [raw, entry] : open_) {
      if (auto c = entry.connection.lock()) open.push_back(std::move(c));
    }
  }
  for (auto& c : open) c->Stop();
}

bool ConnectionSet::WaitEmpty(std::chrono::milliseconds timeout) {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(this, &ConnectionSet::Empty),
                              absl::FromChrono(timeout));
}

void StartConnection(tcp::socket socket, std::string address, std::string peer,
                     std::shared_ptr<ssl::context> tls, const ConnectionContext& context) {
  // A connection the set refuses (the gateway is stopping) is closed as `s` goes.
  if (tls != nullptr) {
    auto s = std::make_shared<Session<beast::ssl_stream<beast::tcp_stream>>>(
        std::move(socket), std::move(peer), std::move(tls), context);
    if (context.connections.Add(s, std::move(address))) s->Start();
  } else {
    auto s = std::make_shared<Session<beast::tcp_stream>>(std::move(socket), std::move(peer),
                                                          nullptr, context);
    if (context.connections.Add(s, std::move(address))) s->Start();
  }
}

}  // namespace tessera::gateway
