// GET /api/v1/runs/{name}/logs: the query mapped onto GetLogsRequest, {"lines": [...]} with text
// as UTF-8, Server-Sent Events with follow=true or Accept: text/event-stream, parameter errors,
// the OpenAPI entry, and a LogService on its own channel.
#include "proto/policy/log_cursor.h"
#include "services/gateway/openapi.h"
#include "tests/unit/gateway/gateway_fixture.h"

namespace tessera::gateway::testing {
namespace gateway_logs_test {

using nlohmann::json;

TEST_CASE("logs: every query parameter reaches GetLogsRequest", "[gateway][logs]") {
  GatewayFixture f;
  SECTION("none: the latest attempt, every rank, no follow") {
    REQUIRE(f.Send("GET", "/api/v1/runs/train-1/logs").status == 200);
    const auto req = f.rec.LastAs<v1::GetLogsRequest>("StreamLogs");
    CHECK(req.run_name() == "train-1");
    CHECK_FALSE(req.has_rank());
    CHECK_FALSE(req.has_node_rank());
    CHECK_FALSE(req.has_resumption_index());
    CHECK_FALSE(req.previous());
    CHECK_FALSE(req.failed());
    CHECK(req.tail() == 0);
    CHECK_FALSE(req.follow());
    CHECK_FALSE(req.first_exception());
    CHECK_FALSE(req.has_since());
    CHECK(req.grep().empty());
    CHECK(f.rec.Last().authorization == kGoodAuth);
  }
  SECTION("all of them") {
    const HttpResult r = f.Send("GET",
                                "/api/v1/runs/train-1/logs?rank=0&node_rank=0&resumption=2&"
                                "failed=true&tail=10&first_exception=1&"
                                "since=2024-05-01T12:00:00Z&until=2024-05-01T13:00:00Z&"
                                "grep=loss%7CNaN");
    INFO(r.body);
    REQUIRE(r.status == 200);
    const auto req = f.rec.LastAs<v1::GetLogsRequest>("StreamLogs");
    CHECK((req.has_rank() && req.rank() == 0));  // rank 0 is set, not the default
    CHECK((req.has_node_rank() && req.node_rank() == 0));
    CHECK((req.has_resumption_index() && req.resumption_index() == 2));
    CHECK(req.failed());
    CHECK(req.tail() == 10);
    CHECK(req.first_exception());
    CHECK_FALSE(req.previous());
    CHECK(req.since().seconds() == 1714564800);
    CHECK(req.until().seconds() == 1714568400);
    CHECK(req.grep() == "loss|NaN");
  }
  SECTION("prev") {
    REQUIRE(f.Send("GET", "/api/v1/runs/train-1/logs?prev=true").status == 200);
    CHECK(f.rec.LastAs<v1::GetLogsRequest>("StreamLogs").previous());
  }
}

// The fake log service's three sample lines as the REST API prints them, however they came.
void CheckSampleLines(const json& lines) {
  REQUIRE(lines.size() == 3);
  CHECK(lines[0]["text"] == "line 0");
  CHECK(lines[0]["rank"] == 0);
  CHECK(lines[0]["stream"] == "LOG_STREAM_STDOUT");
  CHECK(lines[0]["node_name"] == "node-1");
  CHECK(lines[0]["time"] == "2023-11-14T22:13:20Z");
  CHECK_FALSE(lines[0].contains("text_base64"));
  CHECK(lines[1]["text"] == "line 1");
  CHECK(lines[1]["rank"] == 1);
  CHECK(lines[1]["stream"] == "LOG_STREAM_STDERR");
  CHECK(lines[1]["sequence"] == "0");
  CHECK(lines[2]["sequence"] == "1");
  CHECK(lines[2]["text"] == "bad \xEF\xBF\xBD byte");    // U+FFFD for the 0xFF byte
  CHECK(lines[2]["text_base64"] == "YmFkIP8gYnl0ZQ==");  // base64 of "bad \xff byte"
}

TEST_CASE("logs: JSON lines carry text as UTF-8, and the exact bytes when it was not",
          "[gateway][logs]") {
  GatewayFixture f;
  const HttpResult r = f.Send("GET", "/api/v1/runs/train-1/logs");
  REQUIRE(r.status == 200);
  CHECK(r.headers.at("content-type") == "application/json");
  CheckSampleLines(r.Json()["lines"]);
}

TEST_CASE("logs: packed lines are asked for and relayed as the same JSON lines and events",
          "[gateway][logs]") {
  GatewayFixture f;
  f.logs().packing = FakeLogs::Packing::kWhenAsked;
  const HttpResult r = f.Send("GET", "/api/v1/runs/train-1/logs");
  REQUIRE(r.status == 200);
  CHECK(f.rec.LastAs<v1::GetLogsRequest>("StreamLogs").packed());
  CheckSampleLines(r.Json()["lines"]);

  SseClient client(f.port(), "/api/v1/runs/train-1/logs?follow=true");
  CHECK_THAT(client.ReadHead(), Catch::StartsWith("HTTP/1.1 200"));
  std::vector<json> data;
  for (std::string event = client.NextEvent(); !event.empty(); event = client.NextEvent()) {
    CHECK(EventField(event, "event") == "log");
    data.push_back(EventData(event));
  }
  CheckSampleLines(json(data));
}

TEST_CASE("logs: packed bytes that are not whole lines are one DATA_LOSS error, as JSON or event",
          "[gateway][logs]") {
  GatewayFixture f;
  f.logs().packing = FakeLogs::Packing::kMalformed;
  const HttpResult r = f.Send("GET", "/api/v1/runs/train-1/logs");
  CHECK(r.status == 500);
  CHECK(r.ErrorCode() == "DATA_LOSS");
  CHECK_THAT(r.ErrorMessage(), Catch::Contains("runs past the end"));

  // Followed: the head went out with the first line's event, so the error is an event, and the
  // last.
  f.stream.hold_open = true;
  SseClient client(f.port(), "/api/v1/runs/train-1/logs?follow=true");
  CHECK_THAT(client.ReadHead(), Catch::StartsWith("HTTP/1.1 200"));
  CHECK(EventData(client.NextEvent())["text"] == "line 0");
  const std::string error = client.NextEvent();
  INFO(error);
  CHECK(EventField(error, "event") == "error");
  CHECK(EventData(error)["error"]["code"] == "DATA_LOSS");
  CHECK_THAT(EventData(error)["error"]["message"].get<std::string>(),
             Catch::Contains("runs past the end"));
  CHECK(client.NextEvent().empty());
  // The upstream stream was cancelled, not left open.
  CHECK(f.stream.WaitCancelled(1));
}

TEST_CASE("logs: bad parameters are one 400 naming the parameter, before any call",
          "[gateway][logs]") {
  GatewayFixture f;
  const std::pair<const char*, const char*> cases[] = {
      {"rank=-1", "\"rank\""},
      {"node_rank=x", "\"node_rank\""},
      {"resumption=1.5", "\"resumption\""},
      {"tail=ten", "\"tail\""},
      {"follow=maybe", "\"follow\""},
      {"prev=2", "\"prev\""},
      {"failed=yes please", "\"failed\""},
      {"first_exception=no", "\"first_exception\""},
      {"lines=3", "\"lines\""},
      {"since=yesterday", "\"since\""},
      {"prev=true&resumption=1", "\"prev\" and \"resumption\""},
  };
  for (const auto& [query, named] : cases) {
    std::string target = std::string("/api/v1/runs/train-1/logs?") + query;
    for (char& c : target) {
      if (c == ' ') c = '+';
    }
    const HttpResult r = f.Send("GET", target);
    INFO(target << " -> " << r.body);
    CHECK(r.status == 400);
    CHECK(r.ErrorCode() == "INVALID_ARGUMENT");
    CHECK_THAT(r.ErrorMessage(), Catch::Contains(named));
  }
  const HttpResult bad_name = f.Send("GET", "/api/v1/runs/Not_A_Run/logs");
  CHECK(bad_name.status == 400);
  CHECK_THAT(bad_name.ErrorMessage(), Catch::Contains("\"name\""));
  CHECK(f.rec.count() == 0);
}

TEST_CASE("logs: an upstream error is the matching JSON error", "[gateway][logs]") {
  GatewayFixture f;
  f.rec.FailNext(grpc::Status(grpc::StatusCode::NOT_FOUND, "run \"train-9\" not found"));
  const HttpResult r = f.Send("GET", "/api/v1/runs/train-9/logs");
  CHECK(r.status == 404);
  CHECK(r.ErrorMessage() == "run \"train-9\" not found");
  CHECK(f.Send("GET", "/api/v1/runs/train-9/logs", "", "").status == 401);
}

TEST_CASE("logs: follow=true streams one event per line until the stream ends",
          "[gateway][logs][sse]") {
  GatewayFixture f;
  SseClient client(f.port(), "/api/v1/runs/train-1/logs?follow=true&rank=1");
  const std::string head = client.ReadHead();
  CHECK_THAT(head, Catch::StartsWith("HTTP/1.1 200"));
  CHECK_THAT(head, Catch::Contains("Content-Type: text/event-stream"));
  std::vector<json> data;
  for (std::string event = client.NextEvent(); !event.empty(); event = client.NextEvent()) {
    INFO(event);
    CHECK(EventField(event, "event") == "log");
    data.push_back(EventData(event));
  }
  REQUIRE(data.size() == 3);  // the fake ignores the filter; the gateway relays what comes
  CHECK(data[0]["text"] == "line 0");
  CHECK(data[1]["text"] == "line 1");
  CHECK(data[2]["text_base64"] == "YmFkIP8gYnl0ZQ==");
  const auto req = f.rec.LastAs<v1::GetLogsRequest>("StreamLogs");
  CHECK(req.follow());
  CHECK(req.rank() == 1);
}

TEST_CASE("logs: Accept: text/event-stream streams without following", "[gateway][logs][sse]") {
  GatewayFixture f;
  SseClient client(f.port(), "/api/v1/runs/train-1/logs?tail=2");  // sends the Accept header
  CHECK_THAT(client.ReadHead(), Catch::Contains("text/event-stream"));
  CHECK(EventField(client.NextEvent(), "event") == "log");
  const auto req = f.rec.LastAs<v1::GetLogsRequest>("StreamLogs");
  CHECK_FALSE(req.follow());
  CHECK(req.tail() == 2);
}

TEST_CASE("logs: a followed stream the client leaves is cancelled upstream",
          "[gateway][logs][sse]") {
  GatewayFixture f;
  f.stream.events = 1;
  f.stream.hold_open = true;
  SseClient client(f.port(), "/api/v1/runs/train-1/logs?follow");
  CHECK_THAT(client.ReadHead(), Catch::StartsWith("HTTP/1.1 200"));
  CHECK(EventData(client.NextEvent())["text"] == "line 0");
  client.Close();
  CHECK(f.stream.WaitCancelled(1));
}

TEST_CASE("logs: the OpenAPI document describes the route and text as a string",
          "[gateway][logs][openapi]") {
  GatewayFixture f;
  const json doc = BuildOpenApi(f.gateway().routes());
  const json& op = doc["paths"]["/api/v1/runs/{name}/logs"]["get"];
  REQUIRE(op.is_object());
  CHECK(op["operationId"] == "getRunLogs");
  std::set<std::string> names;
  for (const json& p : op["parameters"]) names.insert(p["name"].get<std::string>());
  CHECK(names == std::set<std::string>{"name", "rank", "node_rank", "resumption", "prev", "failed",
                                       "tail", "follow", "first_exception", "since", "until",
                                       "grep", "resume", "Last-Event-ID"});
  const json& content = op["responses"]["200"]["content"];
  CHECK(content["application/json"]["schema"]["$ref"] == "#/components/schemas/LogLines");
  CHECK(content["text/event-stream"]["x-event-name"] == "log");
  CHECK(content["text/event-stream"]["x-event-data"]["$ref"] == "#/components/schemas/LogLine");
  const json& line = doc["components"]["schemas"]["LogLine"]["properties"];
  CHECK(line["text"]["type"] == "string");
  CHECK_FALSE(line["text"].contains("format"));  // not base64
  CHECK(line["text_base64"]["format"] == "byte");
  CHECK(doc["components"]["schemas"]["LogLines"]["properties"]["lines"]["items"]["$ref"] ==
        "#/components/schemas/LogLine");
}

// A LogService on a gRPC server of its own, and the gateway's options to reach it there
// (tessera-gateway --logs-endpoint).
struct LogsApart {
  explicit LogsApart(v1::LogService::Service& service) {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service);
    server = builder.BuildAndStart();
    REQUIRE(server != nullptr);
    options.logs_channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                               grpc::InsecureChannelCredentials());
  }
  ~LogsApart() { server->Shutdown(); }
  std::unique_ptr<grpc::Server> server;
  GatewayOptions options;
};

TEST_CASE("logs: a LogService on its own channel (tessera-gateway --logs-endpoint)",
          "[gateway][logs]") {
  Recorder logs_rec;
  StreamControl logs_stream;
  FakeLogs logs(logs_rec, logs_stream);
  LogsApart apart(logs);
  {
    GatewayFixture f(apart.options);
    const HttpResult r = f.Send("GET", "/api/v1/runs/train-1/logs");
    REQUIRE(r.status == 200);
    CHECK(r.Json()["lines"].size() == 3);
    CHECK(f.rec.count() == 0);  // the main upstream's LogService was not called
    CHECK(logs_rec.LastAs<v1::GetLogsRequest>("StreamLogs").run_name() == "train-1");
  }
}

// The log service sends lines in batches (StreamLogs): each line is still its own event.
class BatchingLogs final : public v1::LogService::Service {
 public:
  grpc::Status StreamLogs(grpc::ServerContext*, const v1::GetLogsRequest*,
                          grpc::ServerWriter<v1::LogLines>* writer) override {
    for (int batch = 0; batch < 2; ++batch) {
      v1::LogLines lines;
      for (int i = 0; i < 3; ++i) {
        auto* l = lines.add_lines();
        l->set_sequence(batch * 3 + i);
        l->set_text("line " + std::to_string(batch * 3 + i));
      }
      writer->Write(lines);
    }
    return grpc::Status::OK;
  }
};

TEST_CASE("logs: a batch of lines from the log service becomes one event per line",
          "[gateway][logs][sse]") {
  BatchingLogs logs;
  LogsApart apart(logs);
  {
    GatewayFixture f(apart.options);
    SseClient client(f.port(), "/api/v1/runs/train-1/logs?follow=true");
    CHECK_THAT(client.ReadHead(), Catch::StartsWith("HTTP/1.1 200"));
    std::vector<std::string> texts;
    for (std::string event = client.NextEvent(); !event.empty(); event = client.NextEvent()) {
      CHECK(EventField(event, "event") == "log");
      texts.push_back(EventData(event)["text"].get<std::string>());
    }
    CHECK(texts ==
          std::vector<std::string>{"line 0", "line 1", "line 2", "line 3", "line 4", "line 5"});
    const HttpResult all = f.Send("GET", "/api/v1/runs/train-1/logs");
    REQUIRE(all.status == 200);
    CHECK(all.Json()["lines"].size() == 6);
  }
}

// The cursor `id` says: (rank, stream) -> next sequence.
std::map<std::pair<int, int>, int64_t> PositionsOf(const std::string& id) {
  auto cursor = ReadLogCursorToken(id);
  REQUIRE(cursor.ok());
  std::map<std::pair<int, int>, int64_t> out;
  for (const auto& p : cursor->positions()) out[{p.rank(), p.stream()}] = p.next_sequence();
  return out;
}

TEST_CASE("logs: each batch's last event carries the cursor of what was sent, as its id",
          "[gateway][logs][sse]") {
  GatewayFixture f;
  SseClient client(f.port(), "/api/v1/runs/train-1/logs?follow=true");
  CHECK_THAT(client.ReadHead(), Catch::StartsWith("HTTP/1.1 200"));
  std::vector<std::string> ids;
  for (std::string event = client.NextEvent(); !event.empty(); event = client.NextEvent()) {
    ids.push_back(EventField(event, "id"));
  }
  // The fake sends a message per line: rank 0 stdout 0, rank 1 stderr 0, rank 0 stdout 1.
  REQUIRE(ids.size() == 3);
  using Positions = std::map<std::pair<int, int>, int64_t>;
  const int out = v1::LOG_STREAM_STDOUT, err = v1::LOG_STREAM_STDERR;
  CHECK(PositionsOf(ids[0]) == Positions{{{0, out}, 1}});
  CHECK(PositionsOf(ids[1]) == Positions{{{0, out}, 1}, {{1, err}, 1}});
  CHECK(PositionsOf(ids[2]) == Positions{{{0, out}, 2}, {{1, err}, 1}});
}

TEST_CASE("logs: Last-Event-ID or resume= goes on from the cursor, whatever chose the start",
          "[gateway][logs][sse]") {
  GatewayFixture f;
  LogCursorPositions at;
  at[{0, v1::LOG_STREAM_STDOUT}] = 7;
  at[{3, v1::LOG_STREAM_STDERR}] = 2;
  const v1::LogCursor cursor = MakeLogCursor(0, at);  // the fake's lines are attempt 0
  const std::string token = LogCursorToken(cursor);
  auto check_resumed = [&](const v1::GetLogsRequest& req) {
    CHECK(req.resume().SerializeAsString() == cursor.SerializeAsString());
    CHECK(req.tail() == 0);  // the first request's tail is behind the cursor
    CHECK_FALSE(req.previous());
    CHECK_FALSE(req.has_resumption_index());
    CHECK(req.rank() == 3);  // filters stay the first request's
    CHECK(req.follow());
  };
  SECTION("a reconnecting EventSource: the same URL, and the header") {
    SseClient client(f.port(), "/api/v1/runs/train-1/logs?follow=true&tail=100&prev=true&rank=3",
                     kGoodAuth, "Last-Event-ID: " + token + "\r\n");
    CHECK_THAT(client.ReadHead(), Catch::StartsWith("HTTP/1.1 200"));
    check_resumed(f.rec.LastAs<v1::GetLogsRequest>("StreamLogs"));
    // The ids go on from the cursor: streams that print nothing more keep their positions.
    std::string last;
    for (std::string event = client.NextEvent(); !event.empty(); event = client.NextEvent()) {
      last = EventField(event, "id");
    }
    const auto positions = PositionsOf(last);
    CHECK(positions.at({3, v1::LOG_STREAM_STDERR}) == 2);
    CHECK(positions.at({0, v1::LOG_STREAM_STDOUT}) == 7);
  }
  SECTION("resume= in the query, which wins over the header") {
    SseClient client(f.port(),
                     "/api/v1/runs/train-1/logs?follow=true&resumption=1&rank=3&resume=" + token,
                     kGoodAuth, "Last-Event-ID: c1.AA\r\n");
    CHECK_THAT(client.ReadHead(), Catch::StartsWith("HTTP/1.1 200"));
    check_resumed(f.rec.LastAs<v1::GetLogsRequest>("StreamLogs"));
  }
  SECTION("a token that is not a cursor: one 400 naming where it came from, before any call") {
    const HttpResult r = f.Send("GET", "/api/v1/runs/train-1/logs?follow=true&resume=c1.***");
    CHECK(r.status == 400);
    CHECK_THAT(r.ErrorMessage(), Catch::Contains("\"resume\"") && Catch::Contains("base64url"));
    SseClient client(f.port(), "/api/v1/runs/train-1/logs?follow=true", kGoodAuth,
                     "Last-Event-ID: 17\r\n");
    const std::string answer = client.ReadToEnd();
    CHECK_THAT(answer, Catch::StartsWith("HTTP/1.1 400"));
    CHECK_THAT(answer, Catch::Contains("Last-Event-ID") && Catch::Contains("not a log cursor"));
    CHECK(f.rec.count() == 0);
  }
}

}  // namespace gateway_logs_test
}  // namespace tessera::gateway::testing
