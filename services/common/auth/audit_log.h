#pragma once
// The audit log's writer: every call of a method the role table marks as audited (rpc_roles.h)
// is recorded by Serve (rpc.h) with who called, when, from where, on what, and how it ended;
// refused attempts too. Records go to the AuditStore; a store that cannot be reached costs the
// record (logged as an error), never the call. One caller's repeated refusals of one kind are
// written once per window and counted in between (refusal_tally.h), so that a client looping
// past its rate cannot make the audit log the database's heaviest writer.

#include <grpcpp/server_context.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "base/clock.h"
#include "google/protobuf/message.h"
#include "services/common/auth/principal.h"
#include "services/common/auth/refusal_tally.h"
#include "services/store/audit_store.h"
#include "transport/client_address.h"
#include "transport/periodic_runner.h"

namespace tessera::auth {

class AuditLog {
 public:
  // `refusal_window` <= 0: every refusal is written one by one.
  AuditLog(std::shared_ptr<store::AuditStore> store, std::shared_ptr<Clock> clock,
           absl::Duration refusal_window = absl::Seconds(1));
  // Writes the refusals still only counted.
  ~AuditLog();

  // Records the call of `method` ("tessera.v1.CordonService/CordonNode") by `who`, which ended
  // with `outcome`. `request` may be null (a stream's first message is not known here).
  void Record(const Principal& who, std::string_view method, const grpc::ServerContextBase& context,
              const google::protobuf::Message* request, const absl::Status& outcome);

  // Writes the counts of refusals whose windows are over (every window_ in the background).
  void Flush();

  // What a request acts on: its node, run, key, token or user fields ("node_name node-3").
  static std::string TargetOf(const google::protobuf::Message& request);
  // The request as JSON without its idempotency key, at most 4 KiB.
  static std::string DetailOf(const google::protobuf::Message& request);
  // The peer's address, and the REST client's behind the gateway when the peer is the gateway.
  static std::string SourceOf(const grpc::ServerContextBase& context);

 private:
  void Write(const v1::AuditRecord& record);
  void WriteFolded(const std::vector<RefusalTally::Folded>& folded);

  std::shared_ptr<store::AuditStore> store_;
  std::shared_ptr<Clock> clock_;
  // The background flush holds it exclusively from taking the due counts to writing them, and a
  // refusal shared from its tally to its writes: a refusal never reaches the store before the
  // counts of an earlier window that the flush has taken but not yet written. Refusals do not
  // wait for each other, only for a flush in progress (once a window).
  absl::Mutex flush_order_;
  RefusalTally refusals_;
  std::unique_ptr<PeriodicRunner> flusher_;  // last: stopped before what it uses goes
};

}  // namespace tessera::auth
