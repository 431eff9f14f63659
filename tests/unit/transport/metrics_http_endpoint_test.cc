// clang-format off
#include <utility>  // first: Boost 1.74 Asio uses std::exchange without including it
// clang-format on

#include <sys/stat.h>

#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tests/support/temp_dir.h"
#include "transport/metrics/http_endpoint.h"
#include "transport/metrics/registry.h"
#include "transport/metrics/scrape_access.h"

namespace tessera::metrics {
namespace metrics_http_endpoint_test {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

using Response = http::response<http::string_body>;

tcp::socket Connect(net::io_context& ioc, std::uint16_t port) {
  tcp::socket socket(ioc);
  socket.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port));
  return socket;
}

Response Send(tcp::socket& socket, http::verb method, const std::string& target,
              bool keep_alive = false, const std::string& authorization = "") {
  http::request<http::string_body> req{method, target, 11};
  req.set(http::field::host, "127.0.0.1");
  if (!authorization.empty()) req.set(http::field::authorization, authorization);
  req.keep_alive(keep_alive);
  req.prepare_payload();
  http::write(socket, req);
  beast::flat_buffer buffer;
  Response res;
  http::read(socket, buffer, res);
  return res;
}

Response Request(std::uint16_t port, http::verb method, const std::string& target) {
  net::io_context ioc;
  tcp::socket socket = Connect(ioc, port);
  return Send(socket, method, target);
}

Response Get(std::uint16_t port, const std::string& target) {
  return Request(port, http::verb::get, target);
}

Response GetWith(std::uint16_t port, const std::string& target, const std::string& authorization) {
  net::io_context ioc;
  tcp::socket socket = Connect(ioc, port);
  return Send(socket, http::verb::get, target, /*keep_alive=*/false, authorization);
}

// Writes raw bytes and reads until the server closes the connection.
std::string RawExchange(std::uint16_t port, const std::string& bytes) {
  net::io_context ioc;
  tcp::socket socket = Connect(ioc, port);
  net::write(socket, net::buffer(bytes));
  std::string out;
  beast::error_code ec;
  char buf[1024];
  for (;;) {
    const std::size_t n = socket.read_some(net::buffer(buf), ec);
    out.append(buf, n);
    if (ec) break;
  }
  return out;
}

std::unique_ptr<MetricsEndpoint> StartOrFail(Registry& registry,
                                             ScrapeAccess access = ScrapeAccess::Open()) {
  auto endpoint = MetricsEndpoint::Start("127.0.0.1", 0, std::move(access), registry);
  INFO(endpoint.status().ToString());
  REQUIRE(endpoint.ok());
  REQUIRE((*endpoint)->port() != 0);
  return *std::move(endpoint);
}

TEST_CASE("metrics endpoint: serves /metrics and /healthz", "[metrics][http]") {
  Registry registry;
  (*registry.AddCounter("test_hits_total", "Hits.", {"kind"}))->WithLabels({"a"}).Increment(7);
  auto endpoint = StartOrFail(registry);

  Response metrics = Get(endpoint->port(), "/metrics");
  CHECK(metrics.result() == http::status::ok);
  CHECK(metrics[http::field::content_type] == "text/plain; version=0.0.4; charset=utf-8");
  CHECK_THAT(metrics.body(), Catch::Contains("# TYPE test_hits_total counter\n"
                                             "test_hits_total{kind=\"a\"} 7\n"));

  // Values are read at scrape time.
  (*registry.AddCounter("test_hits_total", "Hits.", {"kind"}))->WithLabels({"a"}).Increment();
  CHECK_THAT(Get(endpoint->port(), "/metrics?debug=1").body(),
             Catch::Contains("test_hits_total{kind=\"a\"} 8\n"));

  Response health = Get(endpoint->port(), "/healthz");
  CHECK(health.result() == http::status::ok);
  CHECK(health.body() == "ok");
}

TEST_CASE("metrics endpoint: with a scrape token, /metrics only for whoever shows it",
          "[metrics][http][security]") {
  Registry registry;
  (*registry.AddCounter("test_hits_total", "Hits.", {"kind"}))->WithLabels({"a"}).Increment(7);
  const std::string token = "0123456789abcdef0123456789abcdef";
  auto endpoint = StartOrFail(registry, ScrapeAccess::WithToken(token));
  endpoint->AddRoute("/readyz", [](const HttpRequest&) {
    return HttpResponse{200, "text/plain", "ready"};
  });

  Response none = Get(endpoint->port(), "/metrics");
  CHECK(none.result() == http::status::unauthorized);
  CHECK(std::string(none[http::field::www_authenticate]) == "Bearer realm=\"metrics\"");
  CHECK_THAT(none.body(), Catch::Contains("--metrics-token-file"));
  CHECK_THAT(none.body(), !Catch::Contains("test_hits_total"));

  // A wrong token, one a character short, one of a different scheme: refused, never echoed.
  for (const std::string& wrong :
       std::vector<std::string>{"Bearer guess-guess-guess-guess", "Bearer " + token.substr(1),
                                "Basic " + token, token}) {
    INFO(wrong);
    Response r = GetWith(endpoint->port(), "/metrics", wrong);
    CHECK(r.result() == http::status::unauthorized);
    CHECK_THAT(r.body(), !Catch::Contains("guess"));
    CHECK_THAT(r.body(), !Catch::Contains("test_hits_total"));
  }

  Response ok = GetWith(endpoint->port(), "/metrics", "Bearer " + token);
  CHECK(ok.result() == http::status::ok);
  CHECK_THAT(ok.body(), Catch::Contains("test_hits_total{kind=\"a\"} 7\n"));
  // The scheme's name is case-insensitive (RFC 9110).
  CHECK(GetWith(endpoint->port(), "/metrics", "bearer " + token).result() == http::status::ok);

  // Routes a binary adds are behind the token too; only /healthz is for anyone.
  CHECK(Get(endpoint->port(), "/readyz").result() == http::status::unauthorized);
  CHECK(GetWith(endpoint->port(), "/readyz", "Bearer " + token).result() == http::status::ok);
  CHECK(Get(endpoint->port(), "/healthz").result() == http::status::ok);
}

TEST_CASE("metrics endpoint: closed (no token, not open) serves /metrics to no one",
          "[metrics][http][security]") {
  Registry registry;
  (*registry.AddCounter("test_hits_total", "Hits.", {}))->WithLabels({}).Increment();
  auto endpoint = StartOrFail(registry, ScrapeAccess::Closed());
  for (const std::string& authorization :
       {std::string(), std::string("Bearer anything-at-all-here")}) {
    Response r = GetWith(endpoint->port(), "/metrics", authorization);
    CHECK(r.result() == http::status::forbidden);
    CHECK_THAT(r.body(),
               Catch::Contains("--metrics-token-file") && Catch::Contains("--metrics-open"));
    CHECK_THAT(r.body(), !Catch::Contains("test_hits_total"));
  }
  CHECK(Get(endpoint->port(), "/healthz").result() == http::status::ok);
}

TEST_CASE("scrape access: loaded from the flags, each bad file one error naming it",
          "[metrics][security]") {
  testing::TempDir dir("scrape-access");
  auto write = [&](const std::string& name, const std::string& bytes, mode_t mode) {
    const std::string path = dir.path + "/" + name;
    std::ofstream(path) << bytes;
    REQUIRE(::chmod(path.c_str(), mode) == 0);
    return path;
  };
  const std::string token(64, 'a');

  SECTION("neither flag: closed; --metrics-open: open") {
    auto closed = ScrapeAccess::Load({});
    REQUIRE(closed.ok());
    CHECK(closed->Who() == "no one");
    CHECK(absl::IsPermissionDenied(closed->Check("Bearer " + token)));
    auto open = ScrapeAccess::Load({.open = true});
    REQUIRE(open.ok());
    CHECK(open->Who() == "anyone");
    CHECK(open->Check("").ok());
  }
  SECTION("a good file: its token, with or without a trailing newline") {
    for (const std::string& bytes : {token, token + "\n"}) {
      auto access = ScrapeAccess::Load({.token_file = write("token", bytes, 0600)});
      INFO(access.status().ToString());
      REQUIRE(access.ok());
      CHECK(access->Check("Bearer " + token).ok());
      CHECK(absl::IsUnauthenticated(access->Check("Bearer " + token + "\n")));
      CHECK(absl::IsUnauthenticated(access->Check("")));
    }
    // Readable by its group (a Prometheus of the operator's group) is fine.
    CHECK(ScrapeAccess::Load({.token_file = write("group", token, 0640)}).ok());
  }
  SECTION("refused") {
    const std::string open_file = write("world", token, 0644);
    const std::string short_file = write("short", "0123456789", 0600);
    const std::string spaced_file = write("spaced", "0123456789 0123456789", 0600);
    struct Bad {
      ScrapeFlags flags;
      std::vector<std::string> says;
    };
    const std::vector<Bad> cases = {
        {{.token_file = open_file, .open = true}, {"--metrics-open", "--metrics-token-file"}},
        {{.token_file = dir.path + "/missing"},
         {"--metrics-token-file", "missing", "No such file"}},
        {{.token_file = dir.path}, {"not a regular file"}},
        {{.token_file = open_file}, {"world", "0644", "chmod o-rw"}},
        {{.token_file = short_file}, {"short", "10 characters", "16"}},
        {{.token_file = spaced_file}, {"spaced", "visible ASCII"}},
    };
    for (const Bad& bad : cases) {
      auto access = ScrapeAccess::Load(bad.flags);
      INFO(bad.flags.token_file);
      REQUIRE_FALSE(access.ok());
      CHECK(absl::IsInvalidArgument(access.status()));
      for (const std::string& word : bad.says)
        CHECK_THAT(std::string(access.status().message()), Catch::Contains(word));
    }
  }
}

TEST_CASE("metrics endpoint: unknown paths 404, other methods 405", "[metrics][http]") {
  Registry registry;
  auto endpoint = StartOrFail(registry);
  CHECK(Get(endpoint->port(), "/nope").result() == http::status::not_found);
  CHECK(Get(endpoint->port(), "/metrics/extra").result() == http::status::not_found);
  Response post = Request(endpoint->port(), http::verb::post, "/metrics");
  CHECK(post.result() == http::status::method_not_allowed);
  CHECK(post[http::field::allow] == "GET");
  CHECK(Request(endpoint->port(), http::verb::delete_, "/healthz").result() ==
        http::status::method_not_allowed);
}

TEST_CASE("metrics endpoint: a malformed request does not stop the server", "[metrics][http]") {
  Registry registry;
  auto endpoint = StartOrFail(registry);
  const std::string garbage = RawExchange(endpoint->port(), "GARBAGE\r\n\r\n");
  CHECK_THAT(garbage, Catch::StartsWith("HTTP/1.1 400"));
  const std::string binary = RawExchange(endpoint->port(), std::string("\x00\xff\x01\r\n\r\n", 7));
  CHECK_THAT(binary, Catch::StartsWith("HTTP/1.1 400"));
  {
    // A client that sends half a request and hangs up.
    net::io_context ioc;
    tcp::socket socket = Connect(ioc, endpoint->port());
    net::write(socket, net::buffer(std::string("GET /metr")));
  }
  CHECK(Get(endpoint->port(), "/healthz").result() == http::status::ok);
}

TEST_CASE("metrics endpoint: keep-alive and concurrent clients", "[metrics][http]") {
  Registry registry;
  REQUIRE(registry.AddGauge("g", "G.").ok());
  auto endpoint = StartOrFail(registry);

  {
    net::io_context ioc;
    tcp::socket socket = Connect(ioc, endpoint->port());
    for (int i = 0; i < 3; ++i) {
      Response res = Send(socket, http::verb::get, "/healthz", /*keep_alive=*/true);
      CHECK(res.result() == http::status::ok);
      CHECK(res.keep_alive());
    }
  }

  // A client that connects and sends nothing must not hold the others up.
  net::io_context idle_ioc;
  tcp::socket idle = Connect(idle_ioc, endpoint->port());

  constexpr int kClients = 8;
  constexpr int kRequests = 25;
  std::atomic<int> ok{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&] {
      for (int i = 0; i < kRequests; ++i) {
        try {
          Response res = Get(endpoint->port(), "/metrics");
          if (res.result() == http::status::ok &&
              res.body().find("# TYPE g gauge\ng 0\n") != std::string::npos) {
            ++ok;
          }
        } catch (const std::exception&) {
        }
      }
    });
  }
  for (auto& t : clients) t.join();
  CHECK(ok == kClients * kRequests);
}

TEST_CASE("metrics endpoint: extra routes", "[metrics][http]") {
  Registry registry;
  auto endpoint = StartOrFail(registry);
  endpoint->AddRoute("/readyz", [](const HttpRequest& req) {
    return HttpResponse{503, "application/json", "{\"query\":\"" + req.query + "\"}"};
  });
  endpoint->AddRoute("/boom",
                     [](const HttpRequest&) -> HttpResponse { throw std::runtime_error("boom"); });
  Response ready = Get(endpoint->port(), "/readyz?verbose=1");
  CHECK(ready.result() == http::status::service_unavailable);
  CHECK(ready[http::field::content_type] == "application/json");
  CHECK(ready.body() == "{\"query\":\"verbose=1\"}");
  CHECK(Get(endpoint->port(), "/boom").result() == http::status::internal_server_error);
  CHECK(Get(endpoint->port(), "/healthz").result() == http::status::ok);
}

TEST_CASE("metrics endpoint: a port in use is an error naming the address", "[metrics][http]") {
  Registry registry;
  auto first = StartOrFail(registry);
  auto second = MetricsEndpoint::Start("127.0.0.1", first->port(), ScrapeAccess::Open(), registry);
  REQUIRE_FALSE(second.ok());
  CHECK_THAT(std::string(second.status().message()),
             Catch::Contains("127.0.0.1:" + std::to_string(first->port())));
}

TEST_CASE("metrics endpoint: stops promptly with connections open", "[metrics][http]") {
  Registry registry;
  auto endpoint = StartOrFail(registry);
  const std::uint16_t port = endpoint->port();
  net::io_context ioc;
  tcp::socket idle = Connect(ioc, port);
  tcp::socket partial = Connect(ioc, port);
  net::write(partial, net::buffer(std::string("GET /metrics HTTP/1.1\r\nHost: x\r\n")));
  tcp::socket kept = Connect(ioc, port);
  CHECK(Send(kept, http::verb::get, "/healthz", /*keep_alive=*/true).result() == http::status::ok);

  const auto start = std::chrono::steady_clock::now();
  endpoint.reset();
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));

  // The open connections were closed and nothing listens any more.
  beast::error_code ec;
  char c;
  idle.read_some(net::buffer(&c, 1), ec);
  CHECK(ec);
  tcp::socket late(ioc);
  late.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port), ec);
  CHECK(ec);
}

}  // namespace metrics_http_endpoint_test
}  // namespace tessera::metrics
