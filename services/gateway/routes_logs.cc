// /api/v1/runs/{name}/logs: LogService.StreamLogs over REST, as one JSON document or as Server-Sent
// Events. A log line's text is bytes in the proto; here it is a UTF-8 string (see LogLineJson).
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/utf8.h"
#include "proto/policy/log_cursor.h"
#include "proto/policy/packed_log_lines.h"
#include "services/gateway/proto_schema.h"
#include "services/gateway/route_helpers.h"
#include "services/gateway/routes.h"

namespace tessera::gateway {
namespace {

using nlohmann::json;

// A log line as the REST API prints it: the LogLine's JSON mapping, except that `text` is a
// string (bytes that are not UTF-8 replaced by U+FFFD) rather than base64, and `text_base64`
// carries the exact bytes only when they were not valid UTF-8, so that nothing is lost.
json LogLineJson(const v1::LogLine& line) {
  json out = json::parse(ToJson(line));
  if (!IsValidUtf8(line.text())) out["text_base64"] = out["text"];
  out["text"] = ToValidUtf8(line.text());
  return out;
}

// The LogLine schema, with `text` and `text_base64` as LogLineJson prints them.
json LogLineSchema(json& schemas) {
  json ref = SchemaRef(v1::LogLine::descriptor(), schemas);
  json& properties = schemas["LogLine"]["properties"];
  properties["text"] = {{"type", "string"},
                        {"description",
                         "The line as printed, without its newline, as UTF-8 text: bytes that are "
                         "not UTF-8 are replaced by U+FFFD."}};
  properties["text_base64"] = {
      {"type", "string"},
      {"format", "byte"},
      {"description", "The line's exact bytes, base64; only when they are not valid UTF-8."}};
  return ref;
}

json LogLinesSchema(json& schemas) {
  schemas["LogLines"] = {
      {"type", "object"},
      {"required", json::array({"lines"})},
      {"properties", {{"lines", {{"type", "array"}, {"items", LogLineSchema(schemas)}}}}}};
  return {{"$ref", "#/components/schemas/LogLines"}};
}

std::vector<ParamSpec> LogParams() {
  return {
      PathParam("name", ParamType::kRunName, "The run's unique name."),
      QueryParam("rank", ParamType::kCount, "Only this rank's output."),
      QueryParam("node_rank", ParamType::kCount, "Only the output of the ranks on this node."),
      QueryParam("resumption", ParamType::kCount,
                 "This attempt (resumption index) instead of the latest."),
      QueryParam("prev", ParamType::kBoolean, "The attempt before the latest."),
      QueryParam("failed", ParamType::kBoolean,
                 "Only the first failed rank's output (the default for a failed run)."),
      QueryParam("tail", ParamType::kCount, "Only the last N lines (0: all)."),
      QueryParam("follow", ParamType::kBoolean,
                 "Stream new lines as Server-Sent Events until the attempt ends."),
      QueryParam("first_exception", ParamType::kBoolean,
                 "Only the first exception (Python traceback, C++ terminate) and its context."),
      QueryParam("since", ParamType::kDateTime, "Only lines printed at or after this time."),
      QueryParam("until", ParamType::kDateTime, "Only lines printed before this time."),
      QueryParam("grep", ParamType::kString,
                 "Only lines matching this regular expression (RE2; a word matches the lines "
                 "that contain it)."),
      QueryParam("resume", ParamType::kString,
                 "Go on after a log event's id (a cursor: where each rank's stream got to), as "
                 "a reconnecting EventSource does with Last-Event-ID. The attempt is the "
                 "cursor's; tail, prev and resumption are then ignored, other filters should "
                 "be the first request's."),
      HeaderParam("Last-Event-ID", "The id of the last log event received: as resume."),
  };
}

// The longest event id sent: a browser sends it back as a header, which the gateway takes up to
// 16 KiB of in all. A cursor longer than this (a follow of every rank of a run of over about 700
// ranks) is not sent; such a follow resumes by since= (lines seen twice told apart by sequence).
constexpr std::size_t kMaxLogEventIdBytes = 8u << 10;

bool WantsEventStream(const std::string& accept) {
  return absl::StrContains(absl::AsciiStrToLower(accept), "text/event-stream");
}

// Reads the whole (not followed) stream into {"lines": [...]}, under the unary deadline. The
// lines come in batches (StreamLogs): a message per line cost the log service a write each.
Response AllLines(Upstream& up, const Request& r, const v1::GetLogsRequest& req) {
  std::unique_ptr<UpstreamCall> call = up.NewUnaryCall(r.authorization, r.client_address);
  std::unique_ptr<grpc::ClientReader<v1::LogLines>> reader =
      up.logs().StreamLogs(call->context(), req);
  json lines = json::array();
  v1::LogLines batch;
  while (reader->Read(&batch)) {
    auto in_order = LinesInDisplayOrder(batch);
    if (!in_order.ok()) {
      call->context()->TryCancel();
      (void)reader->Finish();
      return ErrorResponse(in_order.status());
    }
    for (const auto& line : *in_order) lines.push_back(LogLineJson(line));
  }
  const grpc::Status status = reader->Finish();
  if (!status.ok()) return ErrorResponse(status);
  Response response;
  response.body = json{{"lines", std::move(lines)}}.dump();
  return response;
}

HandlerResult GetLogs(const std::shared_ptr<Upstream>& up, const Request& r) {
  QueryReader q(r);
  v1::GetLogsRequest req;
  req.set_run_name(r.PathParam("name"));
  if (q.Has("rank")) req.set_rank(q.Count("rank"));
  if (q.Has("node_rank")) req.set_node_rank(q.Count("node_rank"));
  if (q.Has("resumption")) req.set_resumption_index(q.Count("resumption"));
  req.set_previous(q.Boolean("prev"));
  req.set_failed(q.Boolean("failed"));
  req.set_tail(q.Count("tail"));
  req.set_follow(q.Boolean("follow"));
  req.set_first_exception(q.Boolean("first_exception"));
  if (auto since = q.DateTime("since")) *req.mutable_since() = *since;
  if (auto until = q.DateTime("until")) *req.mutable_until() = *until;
  req.set_grep(q.String("grep"));
  // Lines packed per stream where the log service can (no filter by line): it hands them on as
  // they were stored, and they are taken apart here, on the gateway's threads, not its own.
  req.set_packed(true);
  if (!q.status().ok()) return ErrorResponse(q.status());
  if (req.previous() && req.has_resumption_index()) {
    return BadRequest(
        "query parameters \"prev\" and \"resumption\" both choose the attempt; give one of them");
  }
  // A reconnecting EventSource sends the same URL again with the last id it saw: the cursor goes
  // on from there, and what chose the first request's start (tail, the attempt) is behind it.
  const bool resume_in_query = q.Has("resume");
  const std::string token = resume_in_query ? q.String("resume") : r.last_event_id;
  if (!token.empty()) {
    auto cursor = ReadLogCursorToken(token);
    if (!cursor.ok()) {
      return BadRequest(
          absl::StrCat(resume_in_query ? "query parameter \"resume\"" : "header \"Last-Event-ID\"",
                       ": ", cursor.status().message()));
    }
    *req.mutable_resume() = *std::move(cursor);
    req.set_tail(0);
    req.set_previous(false);
    req.clear_resumption_index();
  }
  if (!req.follow() && !WantsEventStream(r.accept)) return AllLines(*up, r, req);
  // Each line is its own event, as clients expect; upstream they come in batches. The last line
  // of each batch carries the cursor as its id (batches are read one at a time, in order).
  auto received = std::make_shared<LogCursorKeeper>();
  if (req.has_resume()) received->Started(req.resume());
  return std::make_unique<GrpcStreamSource<v1::LogLines>>(
      up->NewStreamCall(r.authorization, r.client_address),
      [up, req](grpc::ClientContext* ctx, grpc::ClientReadReactor<v1::LogLines>* reactor) {
        up->logs().async()->StreamLogs(ctx, &req, reactor);
      },
      GrpcStreamSource<v1::LogLines>::BatchConverter(
          [received](const v1::LogLines& batch) -> absl::StatusOr<std::vector<SseEvent>> {
            auto in_order = LinesInDisplayOrder(batch);
            if (!in_order.ok()) return in_order.status();
            if (batch.has_start()) received->Started(batch.start());
            std::vector<SseEvent> events;
            events.reserve(in_order->size());
            for (const auto& line : *in_order) {
              received->Received(line);
              events.push_back(SseEvent{"log", "", LogLineJson(line).dump()});
            }
            if (!events.empty()) {
              std::string id = LogCursorToken(received->Cursor());
              if (id.size() <= kMaxLogEventIdBytes) events.back().id = std::move(id);
            }
            return events;
          }),
      /*capacity=*/2048);
}

}  // namespace

void AddLogRoutes(RouteTable& t, std::shared_ptr<Upstream> up) {
  t.Add({.method = "GET",
         .path = "/api/v1/runs/{name}/logs",
         .operation_id = "getRunLogs",
         .tag = "runs",
         .summary =
             "A run's output (the latest attempt, every rank, ordered by time) as "
             "{\"lines\": [...]}; with follow=true or Accept: text/event-stream, Server-Sent "
             "Events (event: log, data: a LogLine; the last line of each batch has an id, a "
             "cursor that Last-Event-ID or resume= goes on from) until the stream ends.",
         .params = LogParams(),
         .stream_message = v1::LogLine::descriptor(),
         .event_name = "log",
         .response_schema = LogLinesSchema,
         .stream_schema = LogLineSchema,
         .response_kind = ResponseKind::kJsonOrEventStream,
         .rpcs = {"tessera.v1.LogService/StreamLogs"},
         .handler = [up](const Request& r) { return GetLogs(up, r); }});
}

}  // namespace tessera::gateway
