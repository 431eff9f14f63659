#pragma once
// Route parameters (path, query, header): their declared types, which both validate requests and
// document them in the OpenAPI document, and the parsers that turn a validated value into what
// the gRPC request needs. Every error message names the parameter.

#include <google/protobuf/descriptor.h>
#include <google/protobuf/timestamp.pb.h>

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tessera::gateway {

enum class ParamIn { kPath, kQuery, kHeader };

enum class ParamType {
  kString,    // any UTF-8 text
  kCount,     // a non-negative 32-bit integer (limits)
  kId64,      // a non-negative 64-bit integer (event ids)
  kBoolean,   // true/false/1/0; a bare "?flag" is true
  kDateTime,  // RFC 3339, e.g. 2024-05-01T12:00:00Z
  kEnum,      // a value of a proto enum, short ("RUNNING") or full ("RUN_STATUS_RUNNING")
  kRunName,   // 1..63 of [a-z0-9-]
  kNodeName,  // 1..253 of [A-Za-z0-9._-]
  kId,        // 1..128 of [A-Za-z0-9._:-]
  kToken,     // printable ASCII, 1..256 (header values such as Idempotency-Key)
  kKeyValue,  // KEY=VALUE, UTF-8 of at most 1024 bytes, the key not empty (metadata filters)
};

struct ParamSpec {
  std::string name;
  ParamIn in = ParamIn::kQuery;
  ParamType type = ParamType::kString;
  bool repeated = false;
  bool required = false;
  std::string description;
  // kEnum: the proto enum, and the prefix its short names drop ("RUN_STATUS_").
  const google::protobuf::EnumDescriptor* enum_type = nullptr;
  std::string enum_prefix;
};

// Builders, so that route tables read as a list.
ParamSpec PathParam(std::string name, ParamType type, std::string description);
ParamSpec QueryParam(std::string name, ParamType type, std::string description);
ParamSpec RepeatedQueryParam(std::string name, ParamType type, std::string description);
ParamSpec EnumQueryParam(std::string name, const google::protobuf::EnumDescriptor* type,
                         std::string prefix, bool repeated, std::string description);
ParamSpec HeaderParam(std::string name, std::string description);

// "path parameter", "query parameter" or "header".
std::string Where(const ParamSpec& spec);

// INVALID_ARGUMENT naming the parameter when `value` is not of the declared type.
absl::Status ValidateParam(const ParamSpec& spec, std::string_view value);

// What the type accepts, in words, e.g. "a run name: 1 to 63 characters of a-z, 0-9 and '-'".
std::string DescribeType(const ParamSpec& spec);
// The accepted values of a kEnum parameter: short names, then full names; empty otherwise.
std::vector<std::string> EnumValues(const ParamSpec& spec);
// The regular expression a name/id type matches ("^[a-z0-9-]{1,63}$"); empty for other types.
std::string PatternOf(ParamType type);

// Parsers for validated values (they check again, so they are safe on any input).
absl::StatusOr<std::int32_t> ParseCount(const ParamSpec& spec, std::string_view value);
absl::StatusOr<std::int64_t> ParseId64(const ParamSpec& spec, std::string_view value);
absl::StatusOr<bool> ParseBoolean(const ParamSpec& spec, std::string_view value);
absl::StatusOr<google::protobuf::Timestamp> ParseDateTime(const ParamSpec& spec,
                                                          std::string_view value);
// The enum's number.
absl::StatusOr<int> ParseEnum(const ParamSpec& spec, std::string_view value);
// KEY=VALUE split at its first '=' (the value may hold more).
absl::StatusOr<std::pair<std::string, std::string>> ParseKeyValue(const ParamSpec& spec,
                                                                  std::string_view value);

// Splits and percent-decodes a query string ("a=1&b=x%20y&b=z", '+' is a space) into pairs in
// order. INVALID_ARGUMENT for a bad escape or text that is not UTF-8.
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ParseQueryString(
    std::string_view query);

// Percent-decodes one path segment ('+' stays '+').
absl::StatusOr<std::string> DecodePathSegment(std::string_view segment);

bool IsValidUtf8(std::string_view s);

// Validates the query of a request against a route's parameters: unknown names, a parameter that
// is not repeated given twice, missing required ones, bad values; INVALID_ARGUMENT naming it.
absl::Status BindQuery(const std::vector<ParamSpec>& params,
                       const std::vector<std::pair<std::string, std::string>>& pairs,
                       std::map<std::string, std::vector<std::string>>& out);

}  // namespace tessera::gateway
