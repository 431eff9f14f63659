#pragma once
// absl::Status <-> grpc::Status: the codes are the same canonical set. What a caller is told of a
// failure is the status itself, except for text that is not the caller's to read: a log-only
// status (base/log_only_status.h; a database's own error: statements, constraints, hosts) and
// internal errors are answered with a clean message and a reference, and the detail is logged
// here under that reference.

#include <grpcpp/support/status.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/log_only_status.h"

namespace tessera {

// "PID-N": unique within the process's log.
inline std::string NextErrorReference() {
  static std::atomic<uint64_t> next{0};
  return absl::StrCat(::getpid(), "-", ++next);
}

inline grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  const auto code = static_cast<grpc::StatusCode>(status.code());
  const bool internal =
      absl::IsInternal(status) || absl::IsUnknown(status) || absl::IsDataLoss(status);
  if (!internal && !IsLogOnly(status)) {
    return grpc::Status(code, std::string(status.message()));
  }
  const std::string reference = NextErrorReference();
  spdlog::warn("error {} (the caller was told less): {}", reference, status.ToString());
  const char* what = absl::IsUnavailable(status)     ? "the database is unavailable; try again"
                     : absl::IsAlreadyExists(status) ? "already exists"
                     : absl::IsAborted(status)       ? "a conflicting change; try again"
                                                     : "internal error";
  return grpc::Status(code, absl::StrCat(what, " (reference ", reference, " in the log of the ",
                                         "service that answered)"));
}

inline absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

}  // namespace tessera
