#pragma once
// Shared by the gateway tests: the fake Tessera services on a real gRPC server at 127.0.0.1:0
// (tests/support/fake_services.h), the gateway on 127.0.0.1:0 in front, and a small HTTP client
// (Beast) with a Server-Sent Events reader.

// clang-format off
#include <utility>  // first: Boost 1.74 Asio uses std::exchange without including it
// clang-format on

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "services/gateway/errors.h"
#include "services/gateway/gateway_server.h"
#include "tests/support/fake_services.h"

namespace tessera::gateway::testing {

using tessera::testing::FakeServices;
using tessera::testing::Recorder;
using tessera::testing::StreamControl;
using FakeLogs = tessera::testing::FakeLogService;
inline constexpr const char* kGoodAuth = tessera::testing::kFakeAuthorization;

struct HttpResult {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;

  nlohmann::json Json() const {
    INFO(body);
    return nlohmann::json::parse(body);
  }
  std::string ErrorCode() const { return Json()["error"]["code"].get<std::string>(); }
  std::string ErrorMessage() const { return Json()["error"]["message"].get<std::string>(); }
};

// The fakes, a gRPC server for them and the gateway in front.
class GatewayFixture {
  FakeServices fakes_;  // first: `rec` and `stream` refer into it

 public:
  explicit GatewayFixture(gateway::GatewayOptions options = {})
      : rec(fakes_.recorder), stream(fakes_.stream) {
    spdlog::set_level(spdlog::level::warn);  // no access log in test output
    // Answers the gateway tests expect, where they differ from the fakes' sample world.
    fakes_.runs.submitted_suffix = "-abc1";
    fakes_.runs.listed.clear();
    fakes_.runs.listed.emplace_back().set_name("a");
    fakes_.runs.listed.emplace_back().set_name("b");
    fakes_.scheduler.nodes.clear();
    fakes_.scheduler.nodes.emplace_back().set_name("node-1");
    gateway_ = std::make_unique<GatewayServer>(
        grpc::CreateChannel(fakes_.endpoint(), grpc::InsecureChannelCredentials()), options);
    const absl::Status st = gateway_->Start("127.0.0.1", 0);
    INFO(st.ToString());
    REQUIRE(st.ok());
  }

  ~GatewayFixture() {
    gateway_->Shutdown();
    fakes_.Shutdown();
  }

  GatewayServer& gateway() { return *gateway_; }
  FakeLogs& logs() { return fakes_.logs; }
  std::uint16_t port() const { return gateway_->port(); }

  // One request on a fresh connection. `auth` empty: no Authorization header.
  HttpResult Send(const std::string& method, const std::string& target,
                  const std::string& body = "", const std::string& auth = kGoodAuth,
                  const std::map<std::string, std::string>& headers = {}) {
    namespace beast = boost::beast;
    namespace http = beast::http;
    boost::asio::io_context ioc;
    boost::asio::ip::tcp::socket socket(ioc);
    socket.connect({boost::asio::ip::make_address("127.0.0.1"), port()});
    http::request<http::string_body> req;
    req.method_string(method);
    req.target(target);
    req.version(11);
    req.set(http::field::host, "127.0.0.1");
    if (!auth.empty()) req.set(http::field::authorization, auth);
    for (const auto& [k, v] : headers) req.set(k, v);
    req.body() = body;
    req.keep_alive(false);
    req.prepare_payload();
    http::write(socket, req);
    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(64u << 20);
    http::read(socket, buffer, parser);
    auto res = parser.release();
    HttpResult out;
    out.status = static_cast<int>(res.result_int());
    for (const auto& f : res) {
      std::string name(f.name_string().data(), f.name_string().size());
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      out.headers[name] = std::string(f.value().data(), f.value().size());
    }
    out.body = std::move(res.body());
    return out;
  }

  Recorder& rec;
  StreamControl& stream;

 private:
  std::unique_ptr<GatewayServer> gateway_;
};

// A client of an event stream: sends the request, then reads the head and events as they come.
class SseClient {
 public:
  SseClient(std::uint16_t port, const std::string& target, const std::string& auth = kGoodAuth,
            const std::string& extra_headers = "")
      : socket_(ioc_) {
    socket_.connect({boost::asio::ip::make_address("127.0.0.1"), port});
    // Connection: close, so that a plain (error) answer ends with the connection too.
    std::string req = "GET " + target +
                      " HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
                      "Connection: close\r\n";
    if (!auth.empty()) req += "Authorization: " + auth + "\r\n";
    req += extra_headers + "\r\n";
    boost::asio::write(socket_, boost::asio::buffer(req));
  }

  // The status line and headers ("HTTP/1.1 200 OK\r\n...").
  std::string ReadHead() {
    for (;;) {
      const std::size_t end = data_.find("\r\n\r\n");
      if (end != std::string::npos) {
        std::string head = data_.substr(0, end + 4);
        data_.erase(0, end + 4);
        return head;
      }
      if (!ReadMore()) return data_;
    }
  }

  // The next event block (without its blank line), skipping comments; empty at end of stream.
  std::string NextEvent() {
    for (;;) {
      const std::size_t end = data_.find("\n\n");
      if (end != std::string::npos) {
        std::string block = data_.substr(0, end);
        data_.erase(0, end + 2);
        if (!block.empty() && block[0] == ':') continue;
        return block;
      }
      if (!ReadMore()) return "";
    }
  }

  // Everything up to the end of the stream.
  std::string ReadToEnd() {
    while (ReadMore()) {
    }
    std::string rest = std::move(data_);
    data_.clear();
    return rest;
  }

  // Whatever comes next (buffered data first); empty at the end of the stream.
  std::string ReadSome() {
    if (data_.empty()) ReadMore();
    std::string out = std::move(data_);
    data_.clear();
    return out;
  }

  void Close() {
    boost::system::error_code ec;
    socket_.shutdown(boost::asio::ip::tcp::socket::shutdown_both, ec);
    socket_.close(ec);
  }

 private:
  bool ReadMore() {
    char buf[4096];
    boost::system::error_code ec;
    const std::size_t n = socket_.read_some(boost::asio::buffer(buf), ec);
    data_.append(buf, n);
    return !ec;
  }

  boost::asio::io_context ioc_;
  boost::asio::ip::tcp::socket socket_;
  std::string data_;
};

// The "data:" line of an event block, as JSON.
inline nlohmann::json EventData(const std::string& block) {
  const std::size_t p = block.find("data: ");
  REQUIRE(p != std::string::npos);
  const std::size_t end = block.find('\n', p);
  return nlohmann::json::parse(block.substr(p + 6, end == std::string::npos ? end : end - p - 6));
}

inline std::string EventField(const std::string& block, const std::string& field) {
  const std::string key = field + ": ";
  const std::size_t p = block.rfind(key, 0) == 0 ? 0 : block.find("\n" + key);
  if (p == std::string::npos) return "";
  const std::size_t start = p == 0 ? key.size() : p + 1 + key.size();
  const std::size_t end = block.find('\n', start);
  return block.substr(start, end == std::string::npos ? end : end - start);
}

}  // namespace tessera::gateway::testing
