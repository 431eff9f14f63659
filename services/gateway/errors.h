#pragma once
// Errors as the gateway answers them: JSON {"error": {"code": "...", "message": "..."}} with the
// HTTP status that matches the gRPC code.

#include <grpcpp/grpcpp.h>

#include <string>

#include "absl/status/status.h"
#include "services/gateway/http_types.h"

namespace tessera::gateway {

// INVALID_ARGUMENT/OUT_OF_RANGE 400, UNAUTHENTICATED 401, PERMISSION_DENIED 403, NOT_FOUND 404,
// ALREADY_EXISTS/ABORTED 409, FAILED_PRECONDITION 412, RESOURCE_EXHAUSTED 429,
// UNIMPLEMENTED 501, UNAVAILABLE 503, DEADLINE_EXCEEDED 504, anything else 500.
int HttpStatusFor(grpc::StatusCode code);

// "INVALID_ARGUMENT", "NOT_FOUND", ...
std::string CodeName(grpc::StatusCode code);

// An error response with an explicit HTTP status and code name (for errors of HTTP itself:
// "METHOD_NOT_ALLOWED", "PAYLOAD_TOO_LARGE", ...).
Response ErrorResponse(int http_status, const std::string& code, const std::string& message);

// The error response for a failed upstream call (401 answers also carry WWW-Authenticate).
Response ErrorResponse(const grpc::Status& status);

// The error response for a failed check of the gateway's own (same mapping as gRPC codes).
Response ErrorResponse(const absl::Status& status);

// 400 INVALID_ARGUMENT, for a request the gateway rejects itself.
Response BadRequest(const std::string& message);

// The JSON body of an error, also sent as the data of an SSE "error" event.
std::string ErrorJson(const std::string& code, const std::string& message);

// An absl::Status as a gRPC status (same code, same message).
grpc::Status ToGrpc(const absl::Status& status);

}  // namespace tessera::gateway
