#include "services/common/auth/audit_log.h"

#include <google/protobuf/util/json_util.h>
#include <spdlog/spdlog.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "base/timestamps.h"
#include "services/common/auth/peer_identity.h"
#include "services/common/auth/service_caller.h"

namespace tessera::auth {
namespace {

constexpr size_t kMaxDetailBytes = 4096;
constexpr size_t kMaxTargetBytes = 512;

// The fields that name what an audited request acts on, in the order they are shown.
constexpr const char* kTargetFields[] = {"node_name", "node", "run_name", "name", "id", "user"};

}  // namespace

AuditLog::AuditLog(std::shared_ptr<store::AuditStore> store, std::shared_ptr<Clock> clock)
    : store_(std::move(store)), clock_(std::move(clock)) {}

std::string AuditLog::TargetOf(const google::protobuf::Message& request) {
  const auto* descriptor = request.GetDescriptor();
  const auto* reflection = request.GetReflection();
  std::vector<std::string> parts;
  for (const char* name : kTargetFields) {
    const auto* field = descriptor->FindFieldByName(name);
    if (field == nullptr || field->type() != google::protobuf::FieldDescriptor::TYPE_STRING) {
      continue;
    }
    if (field->is_repeated()) {
      const int n = reflection->FieldSize(request, field);
      for (int i = 0; i < n; ++i) {
        parts.push_back(absl::StrCat(name, " ", reflection->GetRepeatedString(request, field, i)));
      }
    } else if (std::string value = reflection->GetString(request, field); !value.empty()) {
      parts.push_back(absl::StrCat(name, " ", value));
    }
  }
  std::string target = absl::StrJoin(parts, ", ");
  if (target.size() > kMaxTargetBytes) target = target.substr(0, kMaxTargetBytes) + "...";
  return target;
}

std::string AuditLog::DetailOf(const google::protobuf::Message& request) {
  std::unique_ptr<google::protobuf::Message> copy(request.New());
  copy->CopyFrom(request);
  // Never recorded: a retry's key, and a secret's value (CreateSecret).
  for (const char* field : {"idempotency_key", "value"}) {
    if (const auto* f = copy->GetDescriptor()->FindFieldByName(field)) {
      copy->GetReflection()->ClearField(copy.get(), f);
    }
  }
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  if (!google::protobuf::util::MessageToJsonString(*copy, &json, options).ok()) return "";
  if (json.size() > kMaxDetailBytes) json = json.substr(0, kMaxDetailBytes) + "...";
  return json;
}

std::string AuditLog::SourceOf(const grpc::ServerContextBase& context) {
  const std::string peer = InProcess(context) ? "in-process" : context.peer();
  // The gateway's client, believed only from the gateway (in this process, or showing the
  // services' certificate).
  if (const std::string client = RelayedClientAddress(context); !client.empty()) {
    return absl::StrCat(client, " via the REST gateway (", peer, ")");
  }
  return peer;
}

void AuditLog::Record(const Principal& who, std::string_view method,
                      const grpc::ServerContextBase& context,
                      const google::protobuf::Message* request, const absl::Status& outcome) {
  v1::AuditRecord r;
  *r.mutable_time() = ToProtoTime(clock_->Now());
  r.set_actor(who.user);
  r.set_role(who.role);
  r.set_key_id(who.key_id);
  r.set_action(std::string(
      absl::StripPrefix(absl::string_view(method.data(), method.size()), "tessera.v1.")));
  if (request != nullptr) {
    r.set_target(TargetOf(*request));
    r.set_detail(DetailOf(*request));
  }
  r.set_source(SourceOf(context));
  r.set_outcome(outcome.ok() ? "OK"
                             : absl::StrCat(absl::StatusCodeToString(outcome.code()), ": ",
                                            std::string(outcome.message()).substr(0, 256)));
  if (auto id = store_->AppendAudit(r); !id.ok()) {
    spdlog::error("audit: not recorded ({}): {} by {} on {} from {}: {}", id.status().ToString(),
                  r.action(), r.actor(), r.target(), r.source(), r.outcome());
  }
}

}  // namespace tessera::auth
