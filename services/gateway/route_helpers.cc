#include "services/gateway/route_helpers.h"

#include <google/protobuf/descriptor.h>

#include "absl/strings/str_cat.h"

namespace tessera::gateway {

const ParamSpec& QueryReader::Spec(const std::string& name) {
  if (request_.params != nullptr) {
    for (const ParamSpec& p : *request_.params) {
      if (p.name == name && p.in == ParamIn::kQuery) return p;
    }
  }
  if (status_.ok()) {
    status_ = absl::InternalError(absl::StrCat("query parameter \"", name, "\" is not declared"));
  }
  unknown_.name = name;
  return unknown_;
}

std::int32_t QueryReader::Count(const std::string& name) {
  if (!Has(name)) return 0;
  return Keep<std::int32_t>(ParseCount(Spec(name), String(name)), 0);
}

std::int64_t QueryReader::Id64(const std::string& name) {
  if (!Has(name)) return 0;
  return Keep<std::int64_t>(ParseId64(Spec(name), String(name)), 0);
}

bool QueryReader::Boolean(const std::string& name) {
  if (!Has(name)) return false;
  return Keep<bool>(ParseBoolean(Spec(name), String(name)), false);
}

std::optional<google::protobuf::Timestamp> QueryReader::DateTime(const std::string& name) {
  if (!Has(name)) return std::nullopt;
  auto ts = ParseDateTime(Spec(name), String(name));
  if (!ts.ok()) {
    if (status_.ok()) status_ = ts.status();
    return std::nullopt;
  }
  return *ts;
}

std::vector<int> QueryReader::Enums(const std::string& name) {
  std::vector<int> out;
  for (const std::string& v : Strings(name)) {
    auto n = ParseEnum(Spec(name), v);
    if (n.ok()) {
      out.push_back(*n);
    } else if (status_.ok()) {
      status_ = n.status();
    }
  }
  return out;
}

std::map<std::string, std::string> QueryReader::KeyValues(const std::string& name) {
  std::map<std::string, std::string> out;
  for (const std::string& v : Strings(name)) {
    auto pair = ParseKeyValue(Spec(name), v);
    if (pair.ok()) {
      out[pair->first] = pair->second;
    } else if (status_.ok()) {
      status_ = pair.status();
    }
  }
  return out;
}

namespace {

// Sets string field `field` of `message` to `value`; INVALID_ARGUMENT when the body had set it
// to something else. `source` says where `value` came from, for the message.
absl::Status BindString(google::protobuf::Message* message, const std::string& field,
                        const std::string& value, const std::string& source) {
  const google::protobuf::FieldDescriptor* fd = message->GetDescriptor()->FindFieldByName(field);
  if (fd == nullptr || fd->type() != google::protobuf::FieldDescriptor::TYPE_STRING ||
      fd->is_repeated()) {
    return absl::InternalError(
        absl::StrCat(message->GetTypeName(), " has no string field \"", field, "\""));
  }
  const google::protobuf::Reflection* r = message->GetReflection();
  const std::string current = r->GetString(*message, fd);
  if (!current.empty() && current != value) {
    return absl::InvalidArgumentError(absl::StrCat("request body field \"", field, "\" is \"",
                                                   current, "\" but the ", source, " says \"",
                                                   value, "\""));
  }
  r->SetString(message, fd, value);
  return absl::OkStatus();
}

}  // namespace

absl::Status BindRequest(const Request& request, bool with_body,
                         const std::vector<PathField>& path_fields,
                         google::protobuf::Message* message) {
  if (with_body) {
    if (absl::Status st = ParseJsonBody(request.body, message); !st.ok()) return st;
  }
  for (const PathField& pf : path_fields) {
    if (absl::Status st = BindString(message, pf.field, request.PathParam(pf.param),
                                     absl::StrCat("path parameter \"", pf.param, "\""));
        !st.ok()) {
      return st;
    }
  }
  if (!request.idempotency_key.empty() &&
      message->GetDescriptor()->FindFieldByName("idempotency_key") != nullptr) {
    return BindString(message, "idempotency_key", request.idempotency_key,
                      "Idempotency-Key header");
  }
  return absl::OkStatus();
}

}  // namespace tessera::gateway
