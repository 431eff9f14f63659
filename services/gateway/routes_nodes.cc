// /api/v1/nodes, /api/v1/events and /api/v1/queue: SchedulerService and CordonService over REST.
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "services/gateway/route_helpers.h"
#include "services/gateway/routes.h"

namespace tessera::gateway {
namespace {

using v1::CordonService;
using v1::SchedulerService;

ParamSpec NodeNameParam() { return PathParam("name", ParamType::kNodeName, "The node's name."); }

// A cordon/uncordon/drain route: {name} into node_name, the body for reason (and evidence).
template <class Req, class Resp>
Handler OnNode(std::shared_ptr<Upstream> up,
               grpc::Status (CordonService::Stub::*method)(grpc::ClientContext*, const Req&,
                                                           Resp*)) {
  return [up, method](const Request& r) -> HandlerResult {
    Req req;
    if (absl::Status st = BindRequest(r, true, {{"node_name", "name"}}, &req); !st.ok()) {
      return ErrorResponse(st);
    }
    return CallUnary(*up, r, up->cordon(), method, req);
  };
}

HandlerResult NodeEvents(const std::shared_ptr<Upstream>& up, const Request& r) {
  QueryReader q(r);
  v1::NodeEventFilter filter;
  for (const std::string& n : q.Strings("node")) filter.add_node_names(n);
  for (int t : q.Enums("type")) filter.add_types(static_cast<v1::NodeEventType>(t));
  filter.set_after_id(q.Id64("after_id"));
  filter.set_limit(q.Count("limit"));
  const bool follow = q.Boolean("follow");
  if (!q.status().ok()) return ErrorResponse(q.status());
  if (!follow) {
    v1::ListNodeEventsRequest req;
    *req.mutable_filter() = filter;
    return CallUnary(*up, r, up->cordon(), &CordonService::Stub::ListNodeEvents, req);
  }
  // A reconnecting EventSource resumes after the last id it saw.
  if (!q.Has("after_id") && !r.last_event_id.empty()) {
    std::int64_t id = 0;
    if (!absl::SimpleAtoi(r.last_event_id, &id) || id < 0) {
      return BadRequest("header \"Last-Event-ID\": expected a non-negative integer, got \"" +
                        r.last_event_id + "\"");
    }
    filter.set_after_id(id);
  }
  v1::WatchNodeEventsRequest req;
  *req.mutable_filter() = filter;
  return OpenStream<v1::NodeEvent>(
      *up, r,
      [up, req](grpc::ClientContext* ctx, grpc::ClientReadReactor<v1::NodeEvent>* reactor) {
        up->cordon().async()->WatchNodeEvents(ctx, &req, reactor);
      },
      "node_event", [](const v1::NodeEvent& e) { return std::to_string(e.id()); });
}

}  // namespace

void AddNodeRoutes(RouteTable& t, std::shared_ptr<Upstream> up) {
  t.Add({.method = "GET",
         .path = "/api/v1/nodes",
         .operation_id = "listNodes",
         .tag = "nodes",
         .summary = "List nodes.",
         .params =
             {
                 QueryParam("cluster", ParamType::kString, "Only nodes of this cluster."),
                 QueryParam("gpu_type", ParamType::kString, "Only nodes with this GPU type."),
                 EnumQueryParam("liveness", v1::NodeLiveness_descriptor(), "NODE_LIVENESS_", true,
                                "ONLINE or LOST."),
                 EnumQueryParam("admin_state", v1::NodeAdminState_descriptor(), "NODE_ADMIN_STATE_",
                                true, "SCHEDULABLE, CORDONED or DRAINING."),
                 RepeatedQueryParam("name", ParamType::kNodeName, "Only these nodes."),
                 LimitParam(),
             },
         .response = v1::ListNodesResponse::descriptor(),
         .rpcs = {"tessera.v1.SchedulerService/ListNodes"},
         .handler = [up](const Request& r) -> HandlerResult {
           QueryReader q(r);
           v1::ListNodesRequest req;
           v1::NodeFilter* f = req.mutable_filter();
           f->set_cluster(q.String("cluster"));
           f->set_gpu_type(q.String("gpu_type"));
           for (int v : q.Enums("liveness")) f->add_liveness(static_cast<v1::NodeLiveness>(v));
           for (int v : q.Enums("admin_state")) {
             f->add_admin_states(static_cast<v1::NodeAdminState>(v));
           }
           for (const std::string& n : q.Strings("name")) f->add_names(n);
           f->set_limit(q.Count("limit"));
           if (!q.status().ok()) return ErrorResponse(q.status());
           return CallUnary(*up, r, up->scheduler(), &SchedulerService::Stub::ListNodes, req);
         }});

  t.Add({.method = "GET",
         .path = "/api/v1/nodes/{name}",
         .operation_id = "getNode",
         .tag = "nodes",
         .summary = "Get a node and the runs on it.",
         .params = {NodeNameParam()},
         .response = v1::GetNodeResponse::descriptor(),
         .rpcs = {"tessera.v1.SchedulerService/GetNode"},
         .handler = [up](const Request& r) -> HandlerResult {
           v1::GetNodeRequest req;
           if (absl::Status st = BindRequest(r, false, {{"name", "name"}}, &req); !st.ok()) {
             return ErrorResponse(st);
           }
           return CallUnary(*up, r, up->scheduler(), &SchedulerService::Stub::GetNode, req);
         }});

  t.Add({.method = "POST",
         .path = "/api/v1/nodes/{name}/cordon",
         .operation_id = "cordonNode",
         .tag = "nodes",
         .summary = "Cordon a node (body: reason, evidence).",
         .params = {NodeNameParam(), IdempotencyKeyHeader()},
         .request_body = v1::CordonNodeRequest::descriptor(),
         .response = v1::CordonNodeResponse::descriptor(),
         .rpcs = {"tessera.v1.CordonService/CordonNode"},
         .handler = OnNode(up, &CordonService::Stub::CordonNode)});

  t.Add({.method = "POST",
         .path = "/api/v1/nodes/{name}/uncordon",
         .operation_id = "uncordonNode",
         .tag = "nodes",
         .summary = "Make a cordoned node schedulable again (body: reason).",
         .params = {NodeNameParam(), IdempotencyKeyHeader()},
         .request_body = v1::UncordonNodeRequest::descriptor(),
         .response = v1::UncordonNodeResponse::descriptor(),
         .rpcs = {"tessera.v1.CordonService/UncordonNode"},
         .handler = OnNode(up, &CordonService::Stub::UncordonNode)});

  t.Add({.method = "POST",
         .path = "/api/v1/nodes/{name}/drain",
         .operation_id = "drainNode",
         .tag = "nodes",
         .summary = "Drain a node: runs there finish, nothing new is placed (body: reason).",
         .params = {NodeNameParam(), IdempotencyKeyHeader()},
         .request_body = v1::DrainNodeRequest::descriptor(),
         .response = v1::DrainNodeResponse::descriptor(),
         .rpcs = {"tessera.v1.CordonService/DrainNode"},
         .handler = OnNode(up, &CordonService::Stub::DrainNode)});

  t.Add({.method = "GET",
         .path = "/api/v1/events",
         .operation_id = "listNodeEvents",
         .tag = "nodes",
         .summary = "Node events; with follow=true, past events then new ones as Server-Sent "
                    "Events (event: node_event, id: the event id, data: a NodeEvent).",
         .params =
             {
                 RepeatedQueryParam("node", ParamType::kNodeName, "Only events of these nodes."),
                 EnumQueryParam("type", v1::NodeEventType_descriptor(), "NODE_EVENT_TYPE_", true,
                                "Only events of these types, e.g. CORDONED."),
                 QueryParam("after_id", ParamType::kId64, "Only events with a larger id."),
                 LimitParam(),
                 QueryParam("follow", ParamType::kBoolean, "Stream events as they happen."),
                 HeaderParam("Last-Event-ID",
                             "With follow=true and no after_id: resume after this event id."),
             },
         .response = v1::ListNodeEventsResponse::descriptor(),
         .stream_message = v1::NodeEvent::descriptor(),
         .event_name = "node_event",
         .response_kind = ResponseKind::kJsonOrEventStream,
         .rpcs = {"tessera.v1.CordonService/ListNodeEvents",
                  "tessera.v1.CordonService/WatchNodeEvents"},
         .handler = [up](const Request& r) { return NodeEvents(up, r); }});

  t.Add({.method = "GET",
         .path = "/api/v1/queue",
         .operation_id = "getQueue",
         .tag = "nodes",
         .summary = "The scheduling queue in placement order, with why each run waits.",
         .params = {QueryParam("cluster", ParamType::kString, "Only this cluster's queue."),
                    LimitParam()},
         .response = v1::GetQueueResponse::descriptor(),
         .rpcs = {"tessera.v1.SchedulerService/GetQueue"},
         .handler = [up](const Request& r) -> HandlerResult {
           QueryReader q(r);
           v1::GetQueueRequest req;
           req.set_cluster(q.String("cluster"));
           req.set_limit(q.Count("limit"));
           if (!q.status().ok()) return ErrorResponse(q.status());
           return CallUnary(*up, r, up->scheduler(), &SchedulerService::Stub::GetQueue, req);
         }});
}

}  // namespace tessera::gateway
