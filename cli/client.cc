#include "cli/client.h"

#include <array>
#include <cstdio>

#include "base/random.h"
#include "cli/errors.h"
#include "transport/endpoints.h"
#include "transport/grpc_limits.h"
#include "transport/tls/grpc_credentials.h"

namespace tessera::cli {
namespace {

// Services whose calls are retried on UNAVAILABLE. Every mutating request carries an
// idempotency key made once per invocation, so a retried call is deduplicated by the server.
constexpr std::array<const char*, 6> kRetriedServices = {
    "tessera.v1.RunService",   "tessera.v1.SchedulerService", "tessera.v1.CordonService",
    "tessera.v1.AdminService", "tessera.v1.LogService",       "tessera.v1.HealthService"};

std::string RetryServiceConfig() {
  std::string names;
  for (const char* service : kRetriedServices) {
    if (!names.empty()) names += ",";
    names += std::string("{\"service\":\"") + service + "\"}";
  }
  return "{\"methodConfig\":[{\"name\":[" + names +
         "],\"retryPolicy\":{\"maxAttempts\":3,\"initialBackoff\":\"0.2s\","
         "\"maxBackoff\":\"1s\",\"backoffMultiplier\":2,"
         "\"retryableStatusCodes\":[\"UNAVAILABLE\"]}}]}";
}

bool StartsWith(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

// "https://host:port" is TLS (the server's certificate checked against --ca, or the system's
// roots); "http://host:port" is plain text, to loopback only, since the API key would cross the
// network in clear; a bare "host:port" (or a list a:1,b:2) is TLS when a CA is set, else plain
// text to loopback. Throws CliError (exit 2) for plain text to another machine.
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& endpoint, const std::string& ca) {
  grpc::ChannelArguments args;
  args.SetServiceConfigJSON(RetryServiceConfig());
  ApplyTransportSettings(args);
  tls::TlsFlags secure;
  secure.ca_file = ca;
  if (StartsWith(endpoint, "https://")) {
    return grpc::CreateCustomChannel(endpoint.substr(8), tls::ChannelCredentials(secure), args);
  }
  const bool explicit_plain = StartsWith(endpoint, "http://");
  const std::string list = explicit_plain ? endpoint.substr(7) : endpoint;
  // Several replicas (a:1,b:2): the channel moves to the next when one goes away. A list it
  // cannot use is kept as given, and the call's error names it.
  auto target = GrpcTarget("--endpoint", list);
  const std::string where = target.ok() ? *target : list;
  if (!explicit_plain && !ca.empty()) {
    return grpc::CreateCustomChannel(where, tls::ChannelCredentials(secure), args);
  }
  if (SplitEndpoints(list).empty() || tls::FirstNonLoopback(list)) {
    throw CliError(kExitUsage,
                   "endpoint " + endpoint +
                       ": plain text would send the API key across the network in clear; set "
                       "the cluster CA (--ca FILE, TESSERA_CA or `mcli set ca FILE`) to connect "
                       "over TLS, or use https:// for a server with a public certificate");
  }
  return grpc::CreateCustomChannel(where, grpc::InsecureChannelCredentials(), args);
}

}  // namespace

std::string NewUuid() {
  Random& random = *SystemRandom::Shared();
  uint64_t high = random.Next();
  uint64_t low = random.Next();
  high = (high & ~0xF000ULL) | 0x4000ULL;                // version 4
  low = (low & ~(0xC000ULL << 48)) | (0x8000ULL << 48);  // variant 10
  char text[37];
  std::snprintf(text, sizeof(text), "%08x-%04x-%04x-%04x-%012llx",
                static_cast<unsigned>(high >> 32), static_cast<unsigned>((high >> 16) & 0xFFFF),
                static_cast<unsigned>(high & 0xFFFF), static_cast<unsigned>(low >> 48),
                static_cast<unsigned long long>(low & 0xFFFFFFFFFFFFULL));
  return text;
}

std::string DescribeRpcError(const grpc::Status& status, const std::string& endpoint,
                             bool has_api_key) {
  const std::string& detail = status.error_message();
  switch (status.error_code()) {
    case grpc::StatusCode::UNAUTHENTICATED:
      if (!has_api_key) {
        return "no API key is set; run `mcli set api-key KEY` (or set TESSERA_API_KEY)";
      }
      return "the server rejected the API key" + (detail.empty() ? "" : " (" + detail + ")") +
             "; run `mcli set api-key KEY` with a valid key";
    case grpc::StatusCode::PERMISSION_DENIED:
      return "permission denied" + (detail.empty() ? "" : ": " + detail);
    case grpc::StatusCode::UNAVAILABLE:
      return "cannot reach the Tessera server at " + endpoint +
             (detail.empty() ? "" : ": " + detail) +
             " (set the endpoint with --endpoint or TESSERA_ENDPOINT)";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "the Tessera server at " + endpoint + " did not answer within " +
             std::to_string(kCallDeadline.count()) + " s";
    case grpc::StatusCode::UNIMPLEMENTED:
      return "the server at " + endpoint + " does not support this command" +
             (detail.empty() ? "" : " (" + detail + ")");
    case grpc::StatusCode::NOT_FOUND:
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::ALREADY_EXISTS:
    case grpc::StatusCode::FAILED_PRECONDITION:
      if (!detail.empty()) return detail;
      break;
    default:
      break;
  }
  static constexpr const char* kCodeNames[] = {"OK",
                                               "CANCELLED",
                                               "UNKNOWN",
                                               "INVALID_ARGUMENT",
                                               "DEADLINE_EXCEEDED",
                                               "NOT_FOUND",
                                               "ALREADY_EXISTS",
                                               "PERMISSION_DENIED",
                                               "RESOURCE_EXHAUSTED",
                                               "FAILED_PRECONDITION",
                                               "ABORTED",
                                               "OUT_OF_RANGE",
                                               "UNIMPLEMENTED",
                                               "INTERNAL",
                                               "UNAVAILABLE",
                                               "DATA_LOSS",
                                               "UNAUTHENTICATED"};
  const int code = static_cast<int>(status.error_code());
  const std::string name = code >= 0 && code <= 16 ? kCodeNames[code] : std::to_string(code);
  return (detail.empty() ? std::string("the server failed") : detail) + " (" + name + ")";
}

Connection::Connection(std::string endpoint, std::string api_key, const std::string& ca)
    : endpoint_(std::move(endpoint)),
      api_key_(std::move(api_key)),
      channel_(MakeChannel(endpoint_, ca)) {}

void Connection::AddMetadata(grpc::ClientContext& context) const {
  if (!api_key_.empty()) context.AddMetadata("authorization", "Bearer " + api_key_);
}

std::unique_ptr<grpc::ClientContext> Connection::UnaryContext() const {
  auto context = std::make_unique<grpc::ClientContext>();
  AddMetadata(*context);
  context->set_deadline(std::chrono::system_clock::now() + kCallDeadline);
  return context;
}

std::unique_ptr<grpc::ClientContext> Connection::StreamContext() const {
  auto context = std::make_unique<grpc::ClientContext>();
  AddMetadata(*context);
  return context;
}

void Connection::Check(const grpc::Status& status) const {
  if (status.ok()) return;
  ThrowFailure(DescribeRpcError(status, endpoint_, !api_key_.empty()));
}

}  // namespace tessera::cli
