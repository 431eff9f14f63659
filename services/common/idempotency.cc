#include "services/common/idempotency.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <memory>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "services/common/auth/api_keys.h"

namespace tessera {

std::string RequestFingerprint(const google::protobuf::Message& request) {
  std::unique_ptr<google::protobuf::Message> copy(request.New());
  copy->CopyFrom(request);
  if (const auto* field = copy->GetDescriptor()->FindFieldByName("idempotency_key")) {
    copy->GetReflection()->ClearField(copy.get(), field);
  }
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream out(&bytes);
    google::protobuf::io::CodedOutputStream coded(&out);
    coded.SetSerializationDeterministic(true);
    copy->SerializeToCodedStream(&coded);
  }
  return auth::HashSecret(absl::StrCat(request.GetTypeName(), "\n", bytes));
}

std::optional<absl::Status> IdempotentCalls::Replay(const std::string& scope,
                                                    const std::string& key,
                                                    const std::string& fingerprint,
                                                    google::protobuf::Message* response) {
  auto previous = store_->Lookup(scope, key);
  if (!previous.ok()) return previous.status();
  if (!previous->has_value()) return std::nullopt;
  if ((*previous)->request_fingerprint != fingerprint) {
    return absl::InvalidArgumentError(
        absl::StrCat("idempotency_key: \"", key, "\" was already used for a different request"));
  }
  if (!response->ParseFromString((*previous)->response)) {
    return absl::DataLossError("the recorded response for this idempotency_key is corrupt");
  }
  return absl::OkStatus();
}

namespace {
absl::Status CheckKeyLength(const std::string& key) {
  if (key.size() > 256) {
    return absl::InvalidArgumentError("idempotency_key: at most 256 characters");
  }
  return absl::OkStatus();
}
}  // namespace

absl::Status IdempotentCalls::Run(const std::string& scope, const std::string& key,
                                  const google::protobuf::Message& request,
                                  google::protobuf::Message* response,
                                  const std::function<absl::Status()>& body) {
  if (key.empty()) return body();
  TESSERA_RETURN_IF_ERROR(CheckKeyLength(key));
  const std::string fingerprint = RequestFingerprint(request);
  if (auto replayed = Replay(scope, key, fingerprint, response)) return *replayed;
  if (absl::Status st = body(); !st.ok()) return st;
  absl::Status recorded =
      store_->Record(scope, key, {fingerprint, response->SerializeAsString()}, clock_->Now());
  // A concurrent duplicate recorded first: both ran (this path has no transaction shared with
  // the effect; see RunAtomically), and the caller still gets its own, valid answer.
  if (!recorded.ok() && !absl::IsAlreadyExists(recorded)) return recorded;
  return absl::OkStatus();
}

absl::Status IdempotentCalls::RunAtomically(const std::string& scope, const std::string& key,
                                            const google::protobuf::Message& request,
                                            google::protobuf::Message* response,
                                            const AtomicBody& body) {
  if (key.empty()) return body(std::nullopt);
  TESSERA_RETURN_IF_ERROR(CheckKeyLength(key));
  const std::string fingerprint = RequestFingerprint(request);
  if (auto replayed = Replay(scope, key, fingerprint, response)) return *replayed;
  absl::Status st = body(store::IdempotencyKey{scope, key, fingerprint, clock_->Now()});
  if (!store::IsKeyTaken(st)) return st;
  // Another call with this key committed first (concurrently, or before an in-doubt commit of
  // this one): nothing of ours took effect; answer as that call did.
  response->Clear();
  if (auto replayed = Replay(scope, key, fingerprint, response)) return *replayed;
  return absl::InternalError(
      absl::StrCat("idempotency_key: \"", key, "\" is taken but has no recorded response"));
}

}  // namespace tessera
