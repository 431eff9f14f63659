// Server-Sent Events: GET /api/v1/runs/watch and GET /api/v1/events?follow=true.
#include "tests/unit/gateway/gateway_fixture.h"

namespace tessera::gateway::testing {
namespace gateway_sse_test {

TEST_CASE("watch delivers events in order and ends when the client disconnects", "[gateway][sse]") {
  GatewayFixture f;
  f.stream.events = 3;
  f.stream.hold_open = true;
  SseClient client(f.port(), "/api/v1/runs/watch?status=RUNNING&name=train-*");
  const std::string head = client.ReadHead();
  CHECK_THAT(head, Catch::StartsWith("HTTP/1.1 200"));
  CHECK_THAT(head, Catch::Contains("Content-Type: text/event-stream"));
  CHECK_THAT(head, Catch::Contains("Cache-Control: no-cache"));
  for (int i = 0; i < 3; ++i) {
    const std::string event = client.NextEvent();
    INFO(event);
    CHECK(EventField(event, "event") == "run");
    CHECK(EventField(event, "id") == std::to_string(i + 1));
    const nlohmann::json data = EventData(event);
    CHECK(data["run"]["name"] == "run-" + std::to_string(i));
    CHECK(data["event"]["message"] == "line one\nline two");  // one data line, newline escaped
  }
  const auto filter = f.rec.LastAs<v1::WatchRunsRequest>("WatchRuns").filter();
  CHECK(filter.statuses(0) == v1::RUN_STATUS_RUNNING);
  CHECK(filter.name_globs(0) == "train-*");
  CHECK(f.rec.Last().authorization == kGoodAuth);

  client.Close();
  // The gateway notices, cancels the gRPC call, and the fake sees its stream cancelled.
  CHECK(f.stream.WaitCancelled(1));
}

TEST_CASE("a stream the upstream ends closes the response after its events", "[gateway][sse]") {
  GatewayFixture f;
  f.stream.events = 2;
  SseClient client(f.port(), "/api/v1/runs/watch");
  CHECK_THAT(client.ReadHead(), Catch::StartsWith("HTTP/1.1 200"));
  const std::string rest = client.ReadToEnd();
  CHECK(rest.find("data: ") != std::string::npos);
  CHECK(rest.find("run-0") < rest.find("run-1"));
  CHECK(rest.find("event: error") == std::string::npos);
}

TEST_CASE("a stream that fails after events ends with an error event", "[gateway][sse]") {
  GatewayFixture f;
  f.stream.events = 2;
  f.stream.end_status = grpc::Status(grpc::StatusCode::INTERNAL, "boom");
  SseClient client(f.port(), "/api/v1/runs/watch");
  CHECK_THAT(client.ReadHead(), Catch::StartsWith("HTTP/1.1 200"));
  CHECK(EventField(client.NextEvent(), "event") == "run");
  CHECK(EventField(client.NextEvent(), "event") == "run");
  const std::string error = client.NextEvent();
  CHECK(EventField(error, "event") == "error");
  CHECK(EventData(error)["error"]["code"] == "INTERNAL");
  CHECK(EventData(error)["error"]["message"] == "boom");
  CHECK(client.NextEvent().empty());  // and the stream is over
}

TEST_CASE("a stream refused before it starts is a plain JSON error", "[gateway][sse]") {
  GatewayFixture f;
  SECTION("no key: 401") {
    SseClient client(f.port(), "/api/v1/runs/watch", "");
    const std::string head = client.ReadHead();
    CHECK_THAT(head, Catch::StartsWith("HTTP/1.1 401"));
    CHECK_THAT(head, Catch::Contains("application/json"));
    CHECK_THAT(client.ReadToEnd(), Catch::Contains("UNAUTHENTICATED"));
  }
  SECTION("a bad filter: 400 before any call") {
    SseClient client(f.port(), "/api/v1/runs/watch?status=BOGUS");
    CHECK_THAT(client.ReadHead(), Catch::StartsWith("HTTP/1.1 400"));
    CHECK_THAT(client.ReadToEnd(), Catch::Contains("\\\"status\\\""));
    CHECK(f.rec.count() == 0);
  }
}

TEST_CASE("events?follow=true streams node events and resumes after Last-Event-ID",
          "[gateway][sse]") {
  GatewayFixture f;
  f.stream.events = 2;
  f.stream.hold_open = true;
  SECTION("Last-Event-ID") {
    SseClient client(f.port(), "/api/v1/events?follow=true&node=node-1&type=CORDONED", kGoodAuth,
                     "Last-Event-ID: 10\r\n");
    CHECK_THAT(client.ReadHead(), Catch::StartsWith("HTTP/1.1 200"));
    const std::string first = client.NextEvent();
    CHECK(EventField(first, "event") == "node_event");
    CHECK(EventField(first, "id") == "11");
    CHECK(EventData(first)["type"] == "NODE_EVENT_TYPE_CORDONED");
    CHECK(EventField(client.NextEvent(), "id") == "12");
    const auto filter = f.rec.LastAs<v1::WatchNodeEventsRequest>("WatchNodeEvents").filter();
    CHECK(filter.after_id() == 10);
    CHECK(filter.node_names(0) == "node-1");
    CHECK(filter.types(0) == v1::NODE_EVENT_TYPE_CORDONED);
    client.Close();
    CHECK(f.stream.WaitCancelled(1));
  }
  SECTION("after_id wins over Last-Event-ID") {
    SseClient client(f.port(), "/api/v1/events?follow&after_id=100", kGoodAuth,
                     "Last-Event-ID: 10\r\n");
    CHECK_THAT(client.ReadHead(), Catch::StartsWith("HTTP/1.1 200"));
    CHECK(EventField(client.NextEvent(), "id") == "101");
    client.Close();
    CHECK(f.stream.WaitCancelled(1));
  }
  SECTION("a bad Last-Event-ID is a 400 naming the header") {
    SseClient client(f.port(), "/api/v1/events?follow=true", kGoodAuth, "Last-Event-ID: x1\r\n");
    CHECK_THAT(client.ReadHead(), Catch::StartsWith("HTTP/1.1 400"));
    CHECK_THAT(client.ReadToEnd(), Catch::Contains("Last-Event-ID"));
  }
}

TEST_CASE("an upstream slow to open the stream still gets the head out, then keep-alives",
          "[gateway][sse]") {
  GatewayOptions options;
  options.limits.relay.head_delay = std::chrono::milliseconds(20);
  options.limits.relay.keepalive = std::chrono::milliseconds(20);
  GatewayFixture f(options);
  f.stream.events = 0;
  f.stream.hold_open = true;
  f.stream.send_metadata = false;  // nothing reaches the gateway until an event would
  SseClient client(f.port(), "/api/v1/runs/watch");
  CHECK_THAT(client.ReadHead(), Catch::StartsWith("HTTP/1.1 200"));
  // Comments are skipped by NextEvent; read raw until one shows.
  std::string seen;
  while (seen.find(": keepalive") == std::string::npos) {
    const std::string chunk = client.ReadSome();
    REQUIRE(!chunk.empty());
    seen += chunk;
  }
  client.Close();
  CHECK(f.stream.WaitCancelled(1));
}

TEST_CASE("shutting the gateway down ends open streams and cancels their calls", "[gateway][sse]") {
  GatewayFixture f;
  f.stream.events = 1;
  f.stream.hold_open = true;
  SseClient a(f.port(), "/api/v1/runs/watch");
  SseClient b(f.port(), "/api/v1/events?follow=true");
  CHECK_THAT(a.ReadHead(), Catch::StartsWith("HTTP/1.1 200"));
  CHECK_THAT(b.ReadHead(), Catch::StartsWith("HTTP/1.1 200"));
  CHECK(!a.NextEvent().empty());
  CHECK(!b.NextEvent().empty());
  const auto start = std::chrono::steady_clock::now();
  f.gateway().Shutdown();
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  CHECK(f.stream.WaitCancelled(2));
  CHECK(a.NextEvent().empty());  // the connection is closed
  CHECK(b.NextEvent().empty());
}

TEST_CASE("many watchers each get every event", "[gateway][sse]") {
  GatewayFixture f;
  f.stream.events = 20;
  std::vector<std::unique_ptr<SseClient>> clients;
  for (int i = 0; i < 8; ++i) {
    clients.push_back(std::make_unique<SseClient>(f.port(), "/api/v1/runs/watch"));
  }
  for (auto& c : clients) {
    CHECK_THAT(c->ReadHead(), Catch::StartsWith("HTTP/1.1 200"));
    for (int i = 0; i < 20; ++i) {
      CHECK(EventData(c->NextEvent())["run"]["name"] == "run-" + std::to_string(i));
    }
    CHECK(c->NextEvent().empty());
  }
}

TEST_CASE("a reader slower than the upstream gets every event, in order", "[gateway][sse]") {
  GatewayFixture f;
  constexpr int kEvents = 5000;  // megabytes: more than the socket buffers and the queue hold
  f.stream.events = kEvents;
  SECTION("to the end") {
    SseClient client(f.port(), "/api/v1/runs/watch");
    REQUIRE(f.stream.WaitStarted(1));  // the upstream writes while nobody reads
    CHECK_THAT(client.ReadHead(), Catch::StartsWith("HTTP/1.1 200"));
    for (int i = 0; i < kEvents; ++i) {
      const std::string event = client.NextEvent();
      REQUIRE(EventField(event, "id") == std::to_string(i + 1));
    }
    CHECK(client.NextEvent().empty());
  }
  SECTION("leaving while the gateway has stopped reading upstream") {
    f.stream.hold_open = true;
    SseClient client(f.port(), "/api/v1/runs/watch");
    REQUIRE(f.stream.WaitStarted(1));
    CHECK_THAT(client.ReadHead(), Catch::StartsWith("HTTP/1.1 200"));
    for (int i = 0; i < 10; ++i) CHECK(!client.NextEvent().empty());
    client.Close();
    CHECK(f.stream.WaitCancelled(1));
  }
}

}  // namespace gateway_sse_test
}  // namespace tessera::gateway::testing
