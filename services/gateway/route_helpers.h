#pragma once
// What the route handlers share: reading validated query parameters, binding a JSON body plus
// path parameters and the Idempotency-Key header into a request message, and calling the
// upstream (unary: JSON response; server stream: Server-Sent Events).

#include <google/protobuf/message.h>
#include <google/protobuf/timestamp.pb.h>
#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "services/gateway/errors.h"
#include "services/gateway/event_source.h"
#include "services/gateway/http_types.h"
#include "services/gateway/params.h"
#include "services/gateway/proto_json.h"
#include "services/gateway/upstream.h"

namespace tessera::gateway {

// Typed access to a request's query parameters, which the server validated against the route's
// parameters (request.params). Parsing again cannot fail then, but the first failure is kept in
// status().
class QueryReader {
 public:
  explicit QueryReader(const Request& request) : request_(request) {}

  bool Has(const std::string& name) const { return request_.HasQuery(name); }
  std::string String(const std::string& name) const { return request_.Query(name); }
  const std::vector<std::string>& Strings(const std::string& name) const {
    return request_.QueryAll(name);
  }
  std::int32_t Count(const std::string& name);  // 0 when absent
  std::int64_t Id64(const std::string& name);   // 0 when absent
  bool Boolean(const std::string& name);        // false when absent
  std::optional<google::protobuf::Timestamp> DateTime(const std::string& name);
  std::vector<int> Enums(const std::string& name);  // every value, in order
  // Every KEY=VALUE of a repeated parameter; a later key replaces an earlier one.
  std::map<std::string, std::string> KeyValues(const std::string& name);

  const absl::Status& status() const { return status_; }

 private:
  const ParamSpec& Spec(const std::string& name);
  template <class T>
  T Keep(absl::StatusOr<T> v, T fallback) {
    if (v.ok()) return *std::move(v);
    if (status_.ok()) status_ = v.status();
    return fallback;
  }

  const Request& request_;
  absl::Status status_;
  ParamSpec unknown_;
};

// A message field bound to a path parameter ("name" <- {name}).
struct PathField {
  const char* field;
  const char* param;
};

// Fills `message`: the JSON body when `with_body`, then each path-bound field from its path
// parameter, then `idempotency_key` (when the message has one) from the Idempotency-Key header.
// INVALID_ARGUMENT when the body does not parse, or sets a bound field or idempotency_key to
// something other than the path or the header says.
absl::Status BindRequest(const Request& request, bool with_body,
                         const std::vector<PathField>& path_fields,
                         google::protobuf::Message* message);

// Calls a unary RPC with the request's Authorization and the upstream deadline; answers its
// response as JSON or its error as an error response.
template <class Stub, class Req, class Resp>
Response CallUnary(Upstream& upstream, const Request& http, Stub& stub,
                   grpc::Status (Stub::*method)(grpc::ClientContext*, const Req&, Resp*),
                   const Req& request) {
  std::unique_ptr<UpstreamCall> call =
      upstream.NewUnaryCall(http.authorization, http.client_address);
  Resp response;
  const grpc::Status status = (stub.*method)(call->context(), request, &response);
  if (!status.ok()) return ErrorResponse(status);
  return JsonResponse(response);
}

// Opens a server-streaming RPC as a source of SSE events named `event_name`, each carrying one
// message as JSON; `id_of` (optional) gives an event its SSE id. `start` starts the call on the
// context and reactor it is given (stub.async()->Method(ctx, &request, reactor)), keeping the
// request alive. No deadline; the connection cancels the call when the client leaves or the
// gateway stops.
template <class Msg>
std::unique_ptr<EventSource> OpenStream(Upstream& upstream, const Request& http,
                                        typename GrpcStreamSource<Msg>::Starter start,
                                        std::string event_name,
                                        std::function<std::string(const Msg&)> id_of = nullptr) {
  auto convert = [event_name = std::move(event_name), id_of = std::move(id_of)](const Msg& m) {
    return SseEvent{event_name, id_of ? id_of(m) : std::string(), ToJson(m)};
  };
  return std::make_unique<GrpcStreamSource<Msg>>(
      upstream.NewStreamCall(http.authorization, http.client_address), std::move(start),
      std::move(convert));
}

}  // namespace tessera::gateway
