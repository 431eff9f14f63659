#include "services/gateway/proto_json.h"

#include <google/protobuf/util/json_util.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "services/gateway/errors.h"

namespace tessera::gateway {

std::string ToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = false;
  options.always_print_primitive_fields = true;
  options.always_print_enums_as_ints = false;
  options.preserve_proto_field_names = true;
  std::string out;
  const auto status = google::protobuf::util::MessageToJsonString(message, &out, options);
  if (!status.ok()) {
    // Only a message the printer cannot represent gets here (an Any of an unknown type).
    return ErrorJson("INTERNAL", absl::StrCat("cannot print ", message.GetTypeName(),
                                              " as JSON: ", status.ToString()));
  }
  return out;
}

Response JsonResponse(const google::protobuf::Message& message, int status) {
  Response r;
  r.status = status;
  r.body = ToJson(message);
  return r;
}

absl::Status ParseJsonBody(std::string_view body, google::protobuf::Message* message) {
  const absl::string_view trimmed =
      absl::StripAsciiWhitespace(absl::string_view(body.data(), body.size()));
  if (trimmed.empty()) return absl::OkStatus();
  if (trimmed.front() != '{') {
    return absl::InvalidArgumentError(
        absl::StrCat("request body: expected a JSON object (", message->GetTypeName(), ")"));
  }
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  const auto status = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(trimmed.data(), trimmed.size()), message, options);
  if (!status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("request body is not a valid ",
                                                   message->GetTypeName(), ": ",
                                                   std::string(status.message())));
  }
  return absl::OkStatus();
}

}  // namespace tessera::gateway
