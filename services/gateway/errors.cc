#include "services/gateway/errors.h"

#include <nlohmann/json.hpp>

#include "transport/metrics/grpc_interceptor.h"

namespace tessera::gateway {

int HttpStatusFor(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return 200;
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::OUT_OF_RANGE:
      return 400;
    case grpc::StatusCode::UNAUTHENTICATED:
      return 401;
    case grpc::StatusCode::PERMISSION_DENIED:
      return 403;
    case grpc::StatusCode::NOT_FOUND:
      return 404;
    case grpc::StatusCode::ALREADY_EXISTS:
    case grpc::StatusCode::ABORTED:
      return 409;
    case grpc::StatusCode::FAILED_PRECONDITION:
      return 412;
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return 429;
    case grpc::StatusCode::UNIMPLEMENTED:
      return 501;
    case grpc::StatusCode::UNAVAILABLE:
      return 503;
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return 504;
    default:
      return 500;
  }
}

std::string CodeName(grpc::StatusCode code) {
  // One table of code names for the whole project: the metrics interceptor's.
  return std::string(metrics::GrpcCodeName(code));
}

std::string ErrorJson(const std::string& code, const std::string& message) {
  nlohmann::json body = {{"error", {{"code", code}, {"message", message}}}};
  // Replace rather than throw on bytes that are not UTF-8 (a message may quote client input).
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Response ErrorResponse(int http_status, const std::string& code, const std::string& message) {
  Response r;
  r.status = http_status;
  r.body = ErrorJson(code, message);
  return r;
}

Response ErrorResponse(const grpc::Status& status) {
  Response r = ErrorResponse(HttpStatusFor(status.error_code()), CodeName(status.error_code()),
                             status.error_message());
  if (r.status == 401) r.headers.emplace_back("WWW-Authenticate", "Bearer");
  return r;
}

Response ErrorResponse(const absl::Status& status) { return ErrorResponse(ToGrpc(status)); }

Response BadRequest(const std::string& message) {
  return ErrorResponse(400, "INVALID_ARGUMENT", message);
}

grpc::Status ToGrpc(const absl::Status& status) {
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

}  // namespace tessera::gateway
