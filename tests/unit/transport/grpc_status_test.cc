// What a caller is told of a failure: the database's own text and internal errors never reach it.
#include "transport/grpc_status.h"

#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "services/store/store_error.h"

namespace tessera {
namespace grpc_status_test {

TEST_CASE("a database's error text reaches the log, the caller a clean status with a reference") {
  const absl::Status from_store = store::StoreError(absl::UnavailableError(
      "database unavailable while listing runs: could not connect to server at "
      "\"db-7.internal\" (10.0.3.7), port 5432: password authentication failed for user ops"));
  const grpc::Status told = ToGrpcStatus(from_store);
  CHECK(told.error_code() == grpc::StatusCode::UNAVAILABLE);  // still retryable
  CHECK(absl::StartsWith(told.error_message(), "the database is unavailable; try again"));
  CHECK(absl::StrContains(told.error_message(), "reference "));
  for (const char* secret : {"db-7", "10.0.3.7", "5432", "password", "ops"}) {
    CHECK_FALSE(absl::StrContains(told.error_message(), secret));
  }
  const grpc::Status internal =
      ToGrpcStatus(absl::InternalError("relation \"runs\" column \"spec\" is of type bytea"));
  CHECK(internal.error_code() == grpc::StatusCode::INTERNAL);
  CHECK_FALSE(absl::StrContains(internal.error_message(), "bytea"));
  // Any log-only status, not only the store's, is told so.
  const grpc::Status log_only =
      ToGrpcStatus(LogOnly(absl::FailedPreconditionError("volume /srv/secret-host-3 is full")));
  CHECK(log_only.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  CHECK_FALSE(absl::StrContains(log_only.error_message(), "secret-host"));
  CHECK(absl::StrContains(log_only.error_message(), "reference "));
  // Two failures get two references, to tell them apart in the log.
  CHECK(ToGrpcStatus(from_store).error_message() != told.error_message());
}

TEST_CASE("the caller's own mistakes keep their message") {
  const grpc::Status told = ToGrpcStatus(absl::InvalidArgumentError("spec.compute.gpus: too many"));
  CHECK(told.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(told.error_message() == "spec.compute.gpus: too many");
  CHECK(ToGrpcStatus(absl::NotFoundError("run x not found")).error_message() == "run x not found");
  // UNAVAILABLE that is not the database's (a standby, a service away) keeps its advice.
  CHECK(ToGrpcStatus(absl::UnavailableError("this scheduler instance is a standby"))
            .error_message() == "this scheduler instance is a standby");
}

}  // namespace grpc_status_test
}  // namespace tessera
