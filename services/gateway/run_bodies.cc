#include "services/gateway/run_bodies.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "runspec/run_spec_parser.h"
#include "services/gateway/route_helpers.h"

namespace tessera::gateway {
namespace {

// "application/yaml; charset=utf-8" -> "application/yaml".
std::string MediaType(const std::string& content_type) {
  const std::size_t semicolon = content_type.find(';');
  return absl::AsciiStrToLower(
      absl::StripAsciiWhitespace(absl::string_view(content_type).substr(0, semicolon)));
}

absl::Status BodyError(const char* where, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat("request body: ", where, status.message()));
}

std::string PrintJson(const google::protobuf::Message& message) {
  std::string out;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  // Cannot fail for a Struct or a Value, which hold only what JSON holds.
  (void)google::protobuf::util::MessageToJsonString(message, &out, options);
  return out;
}

}  // namespace

bool IsYamlBody(const Request& request) {
  const std::string type = MediaType(request.content_type);
  if (type == "application/yaml" || type == "application/x-yaml" || type == "text/yaml" ||
      type == "text/x-yaml") {
    return true;
  }
  if (type == "application/json" || absl::EndsWith(type, "+json")) return false;
  const absl::string_view body = absl::StripLeadingAsciiWhitespace(request.body);
  return !body.empty() && body.front() != '{' && body.front() != '[';
}

absl::Status BindSubmitRun(const Request& request, v1::SubmitRunRequest* out,
                           std::vector<std::string>* notes) {
  if (IsYamlBody(request)) {
    absl::StatusOr<v1::RunSpec> spec = spec::ParseRunSpec(request.body, notes);
    if (!spec.ok()) return BodyError("", spec.status());
    if (absl::Status st = BindRequest(request, /*with_body=*/false, {}, out); !st.ok()) return st;
    *out->mutable_spec() = *std::move(spec);
    return absl::OkStatus();
  }
  // JSON: the spec is read by the run spec parser, the rest of the request as before. A body
  // that is not a JSON object gets BindRequest's error.
  const absl::string_view trimmed = absl::StripAsciiWhitespace(request.body);
  google::protobuf::Struct body;
  if (trimmed.empty() || trimmed.front() != '{' ||
      !google::protobuf::util::JsonStringToMessage(
           google::protobuf::StringPiece(trimmed.data(), trimmed.size()), &body)
           .ok()) {
    return BindRequest(request, /*with_body=*/true, {}, out);
  }
  const auto spec_field = body.fields().find("spec");
  if (spec_field == body.fields().end() ||
      spec_field->second.kind_case() == google::protobuf::Value::kNullValue) {
    return BindRequest(request, /*with_body=*/true, {}, out);
  }
  absl::StatusOr<v1::RunSpec> spec = spec::ParseRunSpecJson(PrintJson(spec_field->second), notes);
  if (!spec.ok()) return BodyError("spec: ", spec.status());
  body.mutable_fields()->erase("spec");
  Request rest = request;
  rest.body = PrintJson(body);
  if (absl::Status st = BindRequest(rest, /*with_body=*/true, {}, out); !st.ok()) return st;
  *out->mutable_spec() = *std::move(spec);
  return absl::OkStatus();
}

absl::Status BindUpdateRun(const Request& request, v1::UpdateRunRequest* out) {
  const std::vector<PathField> path = {{"name", "name"}};
  nlohmann::json body = nlohmann::json::parse(request.body, nullptr, /*allow_exceptions=*/false);
  if (!body.is_object() || !body.contains("priority") || !body["priority"].is_string()) {
    return BindRequest(request, /*with_body=*/true, path, out);
  }
  const std::optional<v1::Priority> priority =
      spec::PriorityFromName(body["priority"].get<std::string>());
  if (!priority) return BindRequest(request, /*with_body=*/true, path, out);
  body["priority"] = v1::Priority_Name(*priority);
  Request named = request;
  named.body = body.dump();
  return BindRequest(named, /*with_body=*/true, path, out);
}

std::string WarningHeader(const std::vector<std::string>& notes) {
  constexpr std::size_t kMaxNotes = 20;
  std::string out;
  auto append = [&out](std::string_view text) {
    if (!out.empty()) out += ", ";
    out += "299 - \"";
    for (char c : text) {
      if (c == '"' || c == '\\') {
        out += '\\';
        out += c;
      } else if (c >= 0x20 && c <= 0x7e) {
        out += c;
      } else {
        out += '?';
      }
    }
    out += '"';
  };
  for (std::size_t i = 0; i < notes.size() && i < kMaxNotes; ++i) append(notes[i]);
  if (notes.size() > kMaxNotes) {
    append(absl::StrCat("and ", notes.size() - kMaxNotes, " more notes about the spec"));
  }
  return out;
}

}  // namespace tessera::gateway
