#pragma once
// JSON <-> protobuf as the REST API speaks it: proto field names (snake_case), enums as their
// names, fields at their default values printed too, so that every response has a stable shape.

#include <google/protobuf/message.h>

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "services/gateway/http_types.h"

namespace tessera::gateway {

// One line of JSON (no newlines, so that it fits an SSE data field).
std::string ToJson(const google::protobuf::Message& message);

// A 200 response carrying `message` as JSON.
Response JsonResponse(const google::protobuf::Message& message, int status = 200);

// Parses a request body into `message`. An empty (or all-space) body leaves it as it is. Bad
// JSON, an unknown field or a value of the wrong type is INVALID_ARGUMENT with the parser's
// message, which names the field.
absl::Status ParseJsonBody(std::string_view body, google::protobuf::Message* message);

}  // namespace tessera::gateway
