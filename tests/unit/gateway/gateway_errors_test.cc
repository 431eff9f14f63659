// Errors: authorization forwarding, gRPC code -> HTTP status, and what the gateway rejects itself
// (bad JSON, unknown fields, bad parameters, unknown paths, wrong methods, big or broken requests).
#include <thread>

#include "absl/strings/match.h"
#include "tests/support/free_port.h"
#include "tests/unit/gateway/gateway_fixture.h"

namespace tessera::gateway::testing {
namespace gateway_errors_test {

// Writes raw bytes and reads until the server closes the connection.
std::string RawExchange(std::uint16_t port, const std::string& bytes) {
  boost::asio::io_context ioc;
  boost::asio::ip::tcp::socket socket(ioc);
  socket.connect({boost::asio::ip::make_address("127.0.0.1"), port});
  boost::asio::write(socket, boost::asio::buffer(bytes));
  boost::system::error_code ec;
  socket.shutdown(boost::asio::ip::tcp::socket::shutdown_send, ec);
  std::string out;
  char buf[4096];
  for (;;) {
    const std::size_t n = socket.read_some(boost::asio::buffer(buf), ec);
    out.append(buf, n);
    if (ec) break;
  }
  return out;
}

TEST_CASE("Authorization is forwarded unchanged, without the right key the answer is 401",
          "[gateway]") {
  GatewayFixture f;
  SECTION("missing") {
    const HttpResult r = f.Send("GET", "/api/v1/runs/train-1", "", "");
    CHECK(r.status == 401);
    CHECK(r.ErrorCode() == "UNAUTHENTICATED");
    CHECK(r.headers.at("www-authenticate") == "Bearer");
    CHECK(f.rec.Last().authorization.empty());
  }
  SECTION("wrong") {
    const HttpResult r = f.Send("GET", "/api/v1/whoami", "", "Bearer nope");
    CHECK(r.status == 401);
    CHECK(f.rec.Last().authorization == "Bearer nope");
  }
  SECTION("right, on every kind of route") {
    CHECK(f.Send("GET", "/api/v1/nodes").status == 200);
    CHECK(f.rec.Last().authorization == kGoodAuth);
    CHECK(f.Send("POST", "/api/v1/health/sweeps", "{}").status == 200);
    CHECK(f.rec.Last().authorization == kGoodAuth);
  }
}

TEST_CASE("gRPC codes map to HTTP statuses", "[gateway]") {
  GatewayFixture f;
  const std::vector<std::pair<grpc::StatusCode, int>> cases = {
      {grpc::StatusCode::INVALID_ARGUMENT, 400},
      {grpc::StatusCode::OUT_OF_RANGE, 400},
      {grpc::StatusCode::UNAUTHENTICATED, 401},
      {grpc::StatusCode::PERMISSION_DENIED, 403},
      {grpc::StatusCode::NOT_FOUND, 404},
      {grpc::StatusCode::ALREADY_EXISTS, 409},
      {grpc::StatusCode::ABORTED, 409},
      {grpc::StatusCode::FAILED_PRECONDITION, 412},
      {grpc::StatusCode::RESOURCE_EXHAUSTED, 429},
      {grpc::StatusCode::UNIMPLEMENTED, 501},
      {grpc::StatusCode::UNAVAILABLE, 503},
      {grpc::StatusCode::DEADLINE_EXCEEDED, 504},
      {grpc::StatusCode::INTERNAL, 500},
      {grpc::StatusCode::UNKNOWN, 500},
      {grpc::StatusCode::DATA_LOSS, 500},
  };
  for (const auto& [code, http_status] : cases) {
    f.rec.FailNext(grpc::Status(code, "the message"));
    const HttpResult r = f.Send("GET", "/api/v1/runs/train-1");
    INFO(r.body);
    CHECK(r.status == http_status);
    CHECK(r.ErrorCode() == CodeName(code));
    CHECK(r.ErrorMessage() == "the message");
    CHECK(r.headers.at("content-type") == "application/json");
  }
}

TEST_CASE("an unreachable upstream is a 503", "[gateway]") {
  const int port = tessera::testing::FreePort();  // nothing listens there
  GatewayOptions options;
  options.upstream_timeout = std::chrono::seconds(10);
  GatewayServer gateway(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()),
      options);
  REQUIRE(gateway.Start("127.0.0.1", 0).ok());
  namespace http = boost::beast::http;
  boost::asio::io_context ioc;
  boost::asio::ip::tcp::socket socket(ioc);
  socket.connect({boost::asio::ip::make_address("127.0.0.1"), gateway.port()});
  http::request<http::string_body> req{http::verb::get, "/api/v1/whoami", 11};
  req.set(http::field::host, "x");
  http::write(socket, req);
  boost::beast::flat_buffer buffer;
  http::response<http::string_body> res;
  http::read(socket, buffer, res);
  CHECK(res.result_int() == 503);
  CHECK_THAT(res.body(), Catch::Contains("UNAVAILABLE"));
}

TEST_CASE("bodies that do not parse are 400s that name the problem", "[gateway]") {
  GatewayFixture f;
  SECTION("not JSON") {
    const HttpResult r = f.Send("POST", "/api/v1/runs", "{\"spec\": ");
    CHECK(r.status == 400);
    CHECK(r.ErrorCode() == "INVALID_ARGUMENT");
    CHECK_THAT(r.ErrorMessage(), Catch::Contains("SubmitRunRequest"));
  }
  SECTION("not an object") {
    const HttpResult r = f.Send("POST", "/api/v1/runs", "[1, 2]");
    CHECK(r.status == 400);
    CHECK_THAT(r.ErrorMessage(), Catch::Contains("JSON object"));
  }
  SECTION("an unknown field") {
    const HttpResult r = f.Send("POST", "/api/v1/runs", R"({"spec": {"nmae": "x"}})");
    CHECK(r.status == 400);
    CHECK_THAT(r.ErrorMessage(), Catch::Contains("nmae"));
  }
  SECTION("a value of the wrong type") {
    const HttpResult r =
        f.Send("PATCH", "/api/v1/runs/train-1", R"({"priority": "PRIORITY_URGENT"})");
    CHECK(r.status == 400);
    CHECK_THAT(r.ErrorMessage(), Catch::Contains("priority"));
  }
  CHECK(f.rec.count() == 0);
}

TEST_CASE("bad query values are 400s naming the parameter", "[gateway]") {
  GatewayFixture f;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"/api/v1/runs?limit=-1", "limit"},
      {"/api/v1/runs?limit=abc", "limit"},
      {"/api/v1/runs?limit=99999999999", "limit"},
      {"/api/v1/runs?status=BOGUS", "status"},
      {"/api/v1/runs?status=UNSPECIFIED", "status"},
      {"/api/v1/runs?after=not-a-time", "after"},
      {"/api/v1/runs?before=2024-13-01T00:00:00Z", "before"},
      {"/api/v1/runs?latest=maybe", "latest"},
      {"/api/v1/runs?limit=1&limit=2", "limit"},
      {"/api/v1/runs?colour=red", "colour"},
      {"/api/v1/runs?user=%zz", "user"},
      {"/api/v1/runs?user=%ff", "user"},
      {"/api/v1/events?after_id=-3", "after_id"},
      {"/api/v1/events?follow=yes", "follow"},
      {"/api/v1/nodes?liveness=SLEEPY", "liveness"},
      {"/api/v1/nodes?name=bad%20name", "name"},
  };
  for (const auto& [target, param] : cases) {
    const HttpResult r = f.Send("GET", target);
    INFO(target << " -> " << r.body);
    CHECK(r.status == 400);
    CHECK(r.ErrorCode() == "INVALID_ARGUMENT");
    CHECK_THAT(r.ErrorMessage(), Catch::Contains("\"" + param + "\""));
  }
  CHECK(f.rec.count() == 0);
}

TEST_CASE("bad path parameters are 400s naming the parameter", "[gateway]") {
  GatewayFixture f;
  for (const std::string& target :
       std::vector<std::string>{"/api/v1/runs/Train_1", "/api/v1/runs/" + std::string(64, 'a'),
                                "/api/v1/runs/a%2Fb/stop", "/api/v1/runs/%zz",
                                "/api/v1/nodes/bad%20node", "/api/v1/health/sweeps/a%2Fb"}) {
    const HttpResult r = f.Send("GET", target);
    INFO(target << " -> " << r.body);
    CHECK(r.status == (target.find("/stop") != std::string::npos ? 405 : 400));
    if (r.status == 400) {
      CHECK_THAT(r.ErrorMessage(), Catch::Contains("path parameter"));
    }
  }
  const HttpResult r = f.Send("POST", "/api/v1/runs/UPPER/stop");
  CHECK(r.status == 400);
  CHECK_THAT(r.ErrorMessage(), Catch::Contains("\"name\""));
  CHECK(f.rec.count() == 0);
}

TEST_CASE("unknown paths are 404s, wrong methods are 405s with Allow", "[gateway]") {
  GatewayFixture f;
  for (const char* target : {"/", "/api/v1/nope", "/api/v1/runs/", "/api/v1/runs/a/b/c",
                             "/api/v1//runs", "/healthz/x"}) {
    const HttpResult r = f.Send("GET", target);
    INFO(target);
    CHECK(r.status == 404);
    CHECK(r.ErrorCode() == "NOT_FOUND");
  }
  HttpResult r = f.Send("PUT", "/api/v1/runs");
  CHECK(r.status == 405);
  CHECK(r.headers.at("allow") == "GET, POST");
  CHECK(r.ErrorCode() == "METHOD_NOT_ALLOWED");
  r = f.Send("GET", "/api/v1/runs/train-1/stop");
  CHECK(r.status == 405);
  CHECK(r.headers.at("allow") == "POST");
  r = f.Send("POST", "/api/v1/runs/train-1");
  CHECK(r.status == 405);
  CHECK(r.headers.at("allow") == "DELETE, GET, PATCH");
  r = f.Send("BREW", "/api/v1/whoami");
  CHECK(r.status == 405);
  CHECK(r.headers.at("allow") == "GET");
  CHECK(f.rec.count() == 0);
}

TEST_CASE("a body over 4 MiB is a 413", "[gateway]") {
  GatewayFixture f;
  SECTION("declared by Content-Length") {
    const std::string reply =
        RawExchange(f.port(),
                    "POST /api/v1/runs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                    "Content-Length: 5000000\r\n\r\n{\"spec\":");
    CHECK_THAT(reply, Catch::StartsWith("HTTP/1.1 413"));
    CHECK_THAT(reply, Catch::Contains("PAYLOAD_TOO_LARGE"));
  }
  SECTION("sent in chunks") {
    std::string chunked =
        "POST /api/v1/runs HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
    const std::string chunk(1 << 20, ' ');
    for (int i = 0; i < 5; ++i) chunked += "100000\r\n" + chunk + "\r\n";
    chunked += "0\r\n\r\n";
    const std::string reply = RawExchange(f.port(), chunked);
    CHECK_THAT(reply, Catch::StartsWith("HTTP/1.1 413"));
  }
  SECTION("just under the limit is read") {
    const std::string body = "{" + std::string((4u << 20) - 2, ' ') + "}";
    const HttpResult r = f.Send("POST", "/api/v1/runs", body);
    CHECK(r.status == 200);
  }
}

TEST_CASE("malformed requests get a 400 and the gateway carries on", "[gateway]") {
  GatewayFixture f;
  for (const std::string& garbage : std::vector<std::string>{
           std::string("NOT HTTP AT ALL\r\n\r\n"),
           std::string("GET /api/v1/runs HTTP/1.1\r\nBad Header\r\n\r\n"),
           std::string("GET /api/v1/runs HTTP/1.1\r\nContent-Length: nope\r\n\r\n"),
           std::string("\x01\x02\x03\r\n\r\n", 7)}) {
    const std::string reply = RawExchange(f.port(), garbage);
    INFO(garbage);
    CHECK_THAT(reply, Catch::StartsWith("HTTP/1.1 400"));
  }
  SECTION("a header too large is a 431") {
    const std::string reply = RawExchange(
        f.port(), "GET /healthz HTTP/1.1\r\nX-Big: " + std::string(20000, 'a') + "\r\n\r\n");
    CHECK_THAT(reply, Catch::StartsWith("HTTP/1.1 431"));
  }
  SECTION("a request target that is not a path is a 400") {
    const std::string reply =
        RawExchange(f.port(), "GET http://example.com/healthz HTTP/1.1\r\nHost: x\r\n\r\n");
    CHECK_THAT(reply, Catch::StartsWith("HTTP/1.1 400"));
  }
  SECTION("an Authorization header that is not ASCII is a 400") {
    const std::string reply = RawExchange(
        f.port(), "GET /api/v1/whoami HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \xff\r\n\r\n");
    CHECK_THAT(reply, Catch::StartsWith("HTTP/1.1 400"));
  }
  SECTION("a client that connects and leaves") {
    boost::asio::io_context ioc;
    boost::asio::ip::tcp::socket s(ioc);
    s.connect({boost::asio::ip::make_address("127.0.0.1"), f.port()});
    boost::asio::write(s, boost::asio::buffer(std::string("GET /api/v1/ru")));
    s.close();
  }
  CHECK(f.Send("GET", "/healthz").status == 200);
}

TEST_CASE("Expect: 100-continue gets its interim answer", "[gateway]") {
  GatewayFixture f;
  const std::string body = R"({"spec": {"name": "x", "command": "y"}})";
  const std::string reply =
      RawExchange(f.port(),
                  "POST /api/v1/runs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer test-key\r\n"
                  "Expect: 100-continue\r\nConnection: close\r\nContent-Length: " +
                      std::to_string(body.size()) + "\r\n\r\n" + body);
  CHECK_THAT(reply, Catch::StartsWith("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200"));
}

// A kept-alive connection from `source` that has been answered once: being served (idle), it
// holds a slot until closed.
boost::asio::ip::tcp::socket HeldConnection(boost::asio::io_context& ioc, uint16_t port,
                                            const std::string& source = "127.0.0.1") {
  namespace http = boost::beast::http;
  boost::asio::ip::tcp::socket held(ioc);
  held.open(boost::asio::ip::tcp::v4());
  held.bind({boost::asio::ip::make_address(source), 0});
  held.connect({boost::asio::ip::make_address("127.0.0.1"), port});
  http::request<http::string_body> req{http::verb::get, "/healthz", 11};
  req.set(http::field::host, "x");
  req.keep_alive(true);
  http::write(held, req);
  boost::beast::flat_buffer buffer;
  http::response<http::string_body> res;
  http::read(held, buffer, res);
  REQUIRE(res.result_int() == 200);
  return held;
}

TEST_CASE("connections over the cap are answered 503", "[gateway]") {
  GatewayOptions options;
  options.max_connections = 1;
  GatewayFixture f(options);
  boost::asio::io_context ioc;
  auto held = HeldConnection(ioc, f.port());
  CHECK(f.gateway().active_connections() == 1);
  const std::string reply = RawExchange(f.port(), "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  CHECK_THAT(reply, Catch::StartsWith("HTTP/1.1 503"));
  held.close();
}

TEST_CASE("one address over its share of connections is answered 429, others are served",
          "[gateway]") {
  GatewayOptions options;
  options.max_connections = 10;
  options.max_connections_per_address = 2;
  GatewayFixture f(options);
  boost::asio::io_context ioc;
  auto first = HeldConnection(ioc, f.port());
  auto second = HeldConnection(ioc, f.port());
  const std::string reply = RawExchange(f.port(), "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  CHECK_THAT(reply,
             Catch::StartsWith("HTTP/1.1 429") && Catch::Contains("--max-connections-per-address"));
  // Another address has slots of its own.
  auto other = HeldConnection(ioc, f.port(), "127.0.0.2");
  CHECK(f.gateway().active_connections() == 3);
  // A closed connection gives its slot back (once the gateway has seen it close).
  first.close();
  std::string again;
  for (int i = 0; i < 100 && !absl::StartsWith(again, "HTTP/1.1 200"); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    again = RawExchange(f.port(), "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  }
  CHECK_THAT(again, Catch::StartsWith("HTTP/1.1 200"));
}

TEST_CASE("shutting down with idle and busy connections does not hang", "[gateway]") {
  GatewayFixture f;
  boost::asio::io_context ioc;
  boost::asio::ip::tcp::socket idle(ioc), partial(ioc);
  idle.connect({boost::asio::ip::make_address("127.0.0.1"), f.port()});
  partial.connect({boost::asio::ip::make_address("127.0.0.1"), f.port()});
  boost::asio::write(partial, boost::asio::buffer(std::string("POST /api/v1/runs HTTP/1.1\r\n")));
  const auto start = std::chrono::steady_clock::now();
  f.gateway().Shutdown();
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  CHECK(f.gateway().active_connections() == 0);
}

}  // namespace gateway_errors_test
}  // namespace tessera::gateway::testing
