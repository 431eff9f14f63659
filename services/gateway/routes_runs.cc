// /api/v1/runs: RunService over REST.
#include <string>
#include <vector>

#include "services/gateway/route_helpers.h"
#include "services/gateway/routes.h"
#include "services/gateway/run_bodies.h"

namespace tessera::gateway {
namespace {

using v1::RunService;

const char kRuns[] = "/api/v1/runs";
const char kRun[] = "/api/v1/runs/{name}";

ParamSpec RunNameParam() {
  return PathParam("name", ParamType::kRunName, "The run's unique name.");
}

std::vector<ParamSpec> RunFilterParams() {
  return {
      RepeatedQueryParam("name", ParamType::kString, "Shell-style glob on the run name."),
      EnumQueryParam("status", v1::RunStatus_descriptor(), "RUN_STATUS_", /*repeated=*/true,
                     "Run status, RUNNING or RUN_STATUS_RUNNING."),
      QueryParam("user", ParamType::kString, "Only runs of this user."),
      QueryParam("cluster", ParamType::kString, "Only runs on this cluster."),
      QueryParam("gpu_type", ParamType::kString, "Only runs asking for this GPU type."),
      QueryParam("before", ParamType::kDateTime, "Only runs created before this time."),
      QueryParam("after", ParamType::kDateTime, "Only runs created after this time."),
      LimitParam(),
      QueryParam("latest", ParamType::kBoolean, "Only the most recently created match."),
      RepeatedQueryParam("metadata", ParamType::kKeyValue,
                         "KEY=VALUE: only runs whose metadata has this key with exactly this "
                         "value (repeat for more pairs, all of which must match)."),
  };
}

std::vector<ParamSpec> ListRunsParams() {
  std::vector<ParamSpec> params = RunFilterParams();
  params.push_back(QueryParam("page_size", ParamType::kCount,
                              "At most this many runs (0: 1000, the most); with more, the reply's "
                              "next_page_token asks for the next page."));
  params.push_back(
      QueryParam("page_token", ParamType::kToken, "The next_page_token of the page before."));
  params.push_back(
      QueryParam("omit_parameters", ParamType::kBoolean,
                 "Accepted for older clients; lists never carry commands, env, parameters or "
                 "metadata."));
  return params;
}

void FillRunFilter(QueryReader& q, v1::RunFilter* filter) {
  for (const std::string& g : q.Strings("name")) filter->add_name_globs(g);
  for (int s : q.Enums("status")) filter->add_statuses(static_cast<v1::RunStatus>(s));
  filter->set_user(q.String("user"));
  filter->set_cluster(q.String("cluster"));
  filter->set_gpu_type(q.String("gpu_type"));
  if (auto t = q.DateTime("before")) *filter->mutable_created_before() = *t;
  if (auto t = q.DateTime("after")) *filter->mutable_created_after() = *t;
  filter->set_limit(q.Count("limit"));
  filter->set_latest(q.Boolean("latest"));
  for (auto& [key, value] : q.KeyValues("metadata")) (*filter->mutable_metadata())[key] = value;
}

// A route on one run: binds {name} (and the body when `body` is set) into `Req` and calls `method`.
template <class Req, class Resp>
Handler OnRun(std::shared_ptr<Upstream> up, bool body,
              grpc::Status (RunService::Stub::*method)(grpc::ClientContext*, const Req&, Resp*)) {
  return [up, body, method](const Request& r) -> HandlerResult {
    Req req;
    if (absl::Status st = BindRequest(r, body, {{"name", "name"}}, &req); !st.ok()) {
      return ErrorResponse(st);
    }
    return CallUnary(*up, r, up->runs(), method, req);
  };
}

}  // namespace

void AddRunRoutes(RouteTable& t, std::shared_ptr<Upstream> up) {
  using Stub = RunService::Stub;
  t.Add({.method = "POST",
         .path = kRuns,
         .operation_id = "submitRun",
         .tag = "runs",
         .summary = "Submit a run: a SubmitRunRequest whose spec takes what the run YAML takes, "
                    "or the run YAML itself (the Idempotency-Key header fills idempotency_key). "
                    "What was read otherwise than written (an older mcli field, a name made "
                    "valid) comes back in a Warning header.",
         .params = {IdempotencyKeyHeader()},
         .request_body = v1::SubmitRunRequest::descriptor(),
         .yaml_body = true,
         .response = v1::SubmitRunResponse::descriptor(),
         .rpcs = {"tessera.v1.RunService/SubmitRun"},
         .handler = [up](const Request& r) -> HandlerResult {
           v1::SubmitRunRequest req;
           std::vector<std::string> notes;
           if (absl::Status st = BindSubmitRun(r, &req, &notes); !st.ok()) {
             return ErrorResponse(st);
           }
           for (const auto& note : notes) req.add_spec_notes(note);
           Response response = CallUnary(*up, r, up->runs(), &Stub::SubmitRun, req);
           if (!notes.empty()) response.headers.emplace_back("Warning", WarningHeader(notes));
           return response;
         }});

  t.Add({.method = "GET",
         .path = kRuns,
         .operation_id = "listRuns",
         .tag = "runs",
         .summary = "List runs matching a filter.",
         .params = ListRunsParams(),
         .response = v1::ListRunsResponse::descriptor(),
         .rpcs = {"tessera.v1.RunService/ListRuns"},
         .handler = [up](const Request& r) -> HandlerResult {
           QueryReader q(r);
           v1::ListRunsRequest req;
           FillRunFilter(q, req.mutable_filter());
           req.set_page_size(q.Count("page_size"));
           req.set_page_token(q.String("page_token"));
           req.set_omit_parameters(q.Boolean("omit_parameters"));
           if (!q.status().ok()) return ErrorResponse(q.status());
           return CallUnary(*up, r, up->runs(), &Stub::ListRuns, req);
         }});

  t.Add(
      {.method = "GET",
       .path = "/api/v1/runs/watch",
       .operation_id = "watchRuns",
       .tag = "runs",
       .summary = "Follow changes to runs matching a filter, as Server-Sent Events "
                  "(event: run, data: a RunChange).",
       .params = RunFilterParams(),
       .stream_message = v1::RunChange::descriptor(),
       .event_name = "run",
       .response_kind = ResponseKind::kEventStream,
       .rpcs = {"tessera.v1.RunService/WatchRuns"},
       .handler = [up](const Request& r) -> HandlerResult {
         QueryReader q(r);
         v1::WatchRunsRequest req;
         FillRunFilter(q, req.mutable_filter());
         if (!q.status().ok()) return ErrorResponse(q.status());
         return OpenStream<v1::RunChange>(
             *up, r,
             [up, req](grpc::ClientContext* ctx, grpc::ClientReadReactor<v1::RunChange>* reactor) {
               up->runs().async()->WatchRuns(ctx, &req, reactor);
             },
             "run",
             [](const v1::RunChange& c) {
               return c.event().id() > 0 ? std::to_string(c.event().id()) : std::string();
             });
       }});

  t.Add({.method = "GET",
         .path = kRun,
         .operation_id = "getRun",
         .tag = "runs",
         .summary = "Get a run.",
         .params = {RunNameParam()},
         .response = v1::GetRunResponse::descriptor(),
         .rpcs = {"tessera.v1.RunService/GetRun"},
         .handler = OnRun(up, false, &Stub::GetRun)});

  t.Add({.method = "PATCH",
         .path = kRun,
         .operation_id = "updateRun",
         .tag = "runs",
         .summary = "Change a run's max_duration_hours, priority (as the run YAML writes it, "
                    "\"low\", or PRIORITY_LOW) or preemptible.",
         .params = {RunNameParam(), IdempotencyKeyHeader()},
         .request_body = v1::UpdateRunRequest::descriptor(),
         .response = v1::UpdateRunResponse::descriptor(),
         .rpcs = {"tessera.v1.RunService/UpdateRun"},
         .handler = [up](const Request& r) -> HandlerResult {
           v1::UpdateRunRequest req;
           if (absl::Status st = BindUpdateRun(r, &req); !st.ok()) return ErrorResponse(st);
           return CallUnary(*up, r, up->runs(), &Stub::UpdateRun, req);
         }});

  t.Add({.method = "DELETE",
         .path = kRun,
         .operation_id = "deleteRun",
         .tag = "runs",
         .summary = "Delete a finished run.",
         .params = {RunNameParam(), IdempotencyKeyHeader()},
         .response = v1::DeleteRunResponse::descriptor(),
         .rpcs = {"tessera.v1.RunService/DeleteRun"},
         .handler = OnRun(up, false, &Stub::DeleteRun)});

  t.Add({.method = "GET",
         .path = "/api/v1/runs/{name}/describe",
         .operation_id = "describeRun",
         .tag = "runs",
         .summary = "A run with its attempts, events, interruptions and goodput.",
         .params = {RunNameParam()},
         .response = v1::DescribeRunResponse::descriptor(),
         .rpcs = {"tessera.v1.RunService/DescribeRun"},
         .handler = OnRun(up, false, &Stub::DescribeRun)});

  t.Add({.method = "GET",
         .path = "/api/v1/runs/{name}/metrics",
         .operation_id = "getRunMetrics",
         .tag = "runs",
         .summary = "A run's progress history (step, loss, learning rate, tokens/s, MFU over "
                    "time), with its attempts: where each resumed and why the one before ended.",
         .params = {RunNameParam(), QueryParam("resumption", ParamType::kCount,
                                               "Only this attempt (its resumption index).")},
         .response = v1::GetRunMetricsResponse::descriptor(),
         .rpcs = {"tessera.v1.RunMetricsService/GetRunMetrics"},
         .handler = [up](const Request& r) -> HandlerResult {
           QueryReader q(r);
           v1::GetRunMetricsRequest req;
           req.set_name(r.PathParam("name"));
           if (q.Has("resumption")) req.set_resumption_index(q.Count("resumption"));
           if (!q.status().ok()) return ErrorResponse(q.status());
           return CallUnary(*up, r, up->run_metrics(), &v1::RunMetricsService::Stub::GetRunMetrics,
                            req);
         }});

  t.Add({.method = "POST",
         .path = "/api/v1/runs/{name}/stop",
         .operation_id = "stopRun",
         .tag = "runs",
         .summary = "Stop a run (body: optional reason).",
         .params = {RunNameParam(), IdempotencyKeyHeader()},
         .request_body = v1::StopRunRequest::descriptor(),
         .response = v1::StopRunResponse::descriptor(),
         .rpcs = {"tessera.v1.RunService/StopRun"},
         .handler = OnRun(up, true, &Stub::StopRun)});

  t.Add({.method = "POST",
         .path = "/api/v1/runs/{name}/restart",
         .operation_id = "restartRun",
         .tag = "runs",
         .summary = "Restart a stopped or failed run.",
         .params = {RunNameParam(), IdempotencyKeyHeader()},
         .request_body = v1::RestartRunRequest::descriptor(),
         .response = v1::RestartRunResponse::descriptor(),
         .rpcs = {"tessera.v1.RunService/RestartRun"},
         .handler = OnRun(up, true, &Stub::RestartRun)});

  t.Add({.method = "POST",
         .path = "/api/v1/runs/{name}/clone",
         .operation_id = "cloneRun",
         .tag = "runs",
         .summary = "Submit a copy of a run (body: optional new_name).",
         .params = {RunNameParam(), IdempotencyKeyHeader()},
         .request_body = v1::CloneRunRequest::descriptor(),
         .response = v1::CloneRunResponse::descriptor(),
         .rpcs = {"tessera.v1.RunService/CloneRun"},
         .handler = OnRun(up, true, &Stub::CloneRun)});
}

}  // namespace tessera::gateway
