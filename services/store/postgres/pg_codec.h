#pragma once
// Encoding of protobuf messages and times in PostgreSQL rows.

#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "google/protobuf/message.h"
#include "google/protobuf/timestamp.pb.h"
#include "services/store/filters.h"

namespace tessera::store {

// SQL for a timestamptz from a parameter holding microseconds since the epoch.
inline std::string MicrosParam(int n) {
  return absl::StrCat("(timestamptz 'epoch' + $", n, "::bigint * interval '1 microsecond')");
}

inline pqxx::binarystring EncodeMessage(const google::protobuf::Message& message) {
  std::string bytes;
  message.SerializeToString(&bytes);
  return pqxx::binarystring(bytes);
}

inline absl::Status DecodeMessage(const pqxx::field& field, google::protobuf::Message* message) {
  const pqxx::binarystring bytes(field);
  if (!message->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::DataLossError(
        absl::StrCat("a stored ", message->GetTypeName(), " could not be decoded"));
  }
  return absl::OkStatus();
}

// Rows whose first column is a message's body.
template <typename M>
absl::Status DecodeBodyRows(const pqxx::result& rows, std::vector<M>* out) {
  for (const auto& row : rows) {
    M message;
    TESSERA_RETURN_IF_ERROR(DecodeMessage(row[0], &message));
    out->push_back(std::move(message));
  }
  return absl::OkStatus();
}

// Rows of (id, body): the id is the row's, set on each decoded message.
template <typename M>
absl::Status DecodeIdRows(const pqxx::result& rows, std::vector<M>* out) {
  for (const auto& row : rows) {
    M message;
    TESSERA_RETURN_IF_ERROR(DecodeMessage(row[1], &message));
    message.set_id(row[0].as<int64_t>());
    out->push_back(std::move(message));
  }
  return absl::OkStatus();
}

}  // namespace tessera::store
