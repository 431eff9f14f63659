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

std::string Utc(absl::Time t) {
  return absl::FormatTime(absl::RFC3339_full, t, absl::UTCTimeZone());
}

}  // namespace

AuditLog::AuditLog(std::shared_ptr<store::AuditStore> store, std::shared_ptr<Clock> clock,
                   absl::Duration refusal_window)
    : store_(std::move(store)), clock_(std::move(clock)), refusals_(refusal_window) {
  if (refusal_window > absl::ZeroDuration()) {
    flusher_ = std::make_unique<PeriodicRunner>(clock_, refusal_window, [this] { Flush(); });
  }
}

AuditLog::~AuditLog() {
  flusher_.reset();
  WriteFolded(refusals_.TakeDue(absl::InfiniteFuture()));
}

void AuditLog::Flush() {
  absl::WriterMutexLock order(&flush_order_);
  WriteFolded(refusals_.TakeDue(clock_->Now()));
}

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
  const absl::Time now = clock_->Now();
  auto make = [&] {
    v1::AuditRecord r;
    *r.mutable_time() = ToProtoTime(now);
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
    return r;
  };
  if (outcome.ok()) return Write(make());
  // The kind of a refusal: who (user and key), the method, the code.
  const std::string kind = absl::StrCat(who.user, "\n", who.key_id, "\n",
                                        absl::string_view(method.data(), method.size()), "\n",
                                        static_cast<int>(outcome.code()));
  std::vector<RefusalTally::Folded> due;
  absl::ReaderMutexLock order(&flush_order_);
  const auto record = refusals_.Admit(kind, now, make, &due);
  WriteFolded(due);
  if (record) Write(*record);
}

void AuditLog::Write(const v1::AuditRecord& r) {
  if (auto id = store_->AppendAudit(r); !id.ok()) {
    spdlog::error("audit: not recorded ({}): {} by {} on {} from {}: {}", id.status().ToString(),
                  r.action(), r.actor(), r.target(), r.source(), r.outcome());
  }
}

void AuditLog::WriteFolded(const std::vector<RefusalTally::Folded>& folded) {
  for (const auto& f : folded) {
    // The example's code, who, method and source; not its target or request, which the
    // counted refusals need not share.
    v1::AuditRecord r = f.example;
    *r.mutable_time() = ToProtoTime(f.until);
    r.clear_target();
    r.clear_detail();
    const absl::string_view code =
        absl::string_view(f.example.outcome()).substr(0, f.example.outcome().find(':'));
    r.set_outcome(
        absl::StrCat(code, ": ", f.count, f.count == 1 ? " more refusal" : " more refusals",
                     " like the one recorded at ", Utc(FromProtoTime(f.example.time())), ", from ",
                     Utc(f.since), " to ", Utc(f.until), ", counted, not recorded one by one"));
    Write(r);
  }
}

}  // namespace tessera::auth
