#pragma once
// Server-side gRPC metrics for every method, with no code in the services themselves:
//
//   tessera_grpc_server_started_total{grpc_service,grpc_method}
//   tessera_grpc_server_handled_total{grpc_service,grpc_method,grpc_code}
//   tessera_grpc_server_handling_seconds{grpc_service,grpc_method}  (histogram, 0.5 ms .. 10 s)
//
// grpc_service is the fully qualified service ("tessera.v1.AdminService"), grpc_method the method
// ("WhoAmI"), grpc_code the canonical status name ("OK", "NOT_FOUND", "UNAUTHENTICATED").
// A call is "started" when the server accepts it and "handled" when its status is sent; for
// streaming calls that is the end of the stream. A call that ends without sending a status (the
// server shut down under it) is counted as handled with CANCELLED.
//
// In a service's bootstrap:
//   grpc::ServerBuilder builder;
//   if (absl::Status s = metrics::AddMetricsInterceptor(builder); !s.ok()) return s;

#include <grpcpp/server_builder.h>
#include <grpcpp/support/server_interceptor.h>
#include <grpcpp/support/status.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "transport/metrics/registry.h"

namespace tessera::metrics {

// The time source for call durations; tests inject a fake one.
using SteadyNowFn = std::function<std::chrono::steady_clock::time_point()>;

inline constexpr std::string_view kGrpcStartedTotal = "tessera_grpc_server_started_total";
inline constexpr std::string_view kGrpcHandledTotal = "tessera_grpc_server_handled_total";
inline constexpr std::string_view kGrpcHandlingSeconds = "tessera_grpc_server_handling_seconds";

// "OK", "CANCELLED", ... "UNAUTHENTICATED"; "UNKNOWN" for a code outside the canonical set.
std::string_view GrpcCodeName(grpc::StatusCode code);

// Registers the three families in `registry` (which must outlive every server using the factory)
// and returns a factory for ServerBuilder::experimental().SetInterceptorCreators. Fails only if
// `registry` already holds one of these names with another shape.
absl::StatusOr<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
MakeMetricsInterceptorFactory(Registry& registry = Registry::Default(), SteadyNowFn now = {});

// The one-liner: installs the metrics interceptor as the builder's interceptor list. gRPC's
// SetInterceptorCreators replaces the list, so a server that needs more interceptors builds the
// vector itself with MakeMetricsInterceptorFactory.
absl::Status AddMetricsInterceptor(grpc::ServerBuilder& builder,
                                   Registry& registry = Registry::Default(), SteadyNowFn now = {});

}  // namespace tessera::metrics
