#pragma once
// Which roles may call each RPC: one table for every service, checked by Serve (rpc.h) before a
// handler runs. REST routes reach the services with the caller's own key, so the table covers
// them too. `unit:rpc_roles_test` fails when a method of the API has no row or a row names no
// method; docs/security.md prints the table.
//
// Handlers decide what is beyond a method: whose runs a caller sees or changes (Principal).

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "services/common/auth/principal.h"

namespace tessera::auth {

// Which calls of a method go to the audit log (audit_log.h), refused attempts included.
enum class Audit {
  kNever,
  // Every call by a person (user, operator, admin): keys, cordons, sweeps ...
  kPeople,
  // Calls by operators and admins: what they do to other users' runs and logs.
  kPrivileged,
  // Every call but those of Tessera's own services: nodes renewing their credentials too.
  kAllButServices,
  // Calls in which a person read another user's run (its spec, logs, metrics): an operator's or
  // an admin's; the handler notes such a read (others_run_reads.h).
  kReadsOfOthersRuns,
};

struct RpcRule {
  // "tessera.v1.RunService/SubmitRun".
  std::string_view method;
  std::vector<v1::Role> roles;
  Audit audit = Audit::kNever;
  // Open without an API key: the request carries its own credential (a join token), which the
  // handler checks. `roles` is empty then.
  bool open = false;
};

// Every RPC of the API with the roles that may call it.
const std::vector<RpcRule>& RpcRoleTable();

// The method's row; null when it has none.
const RpcRule* FindRpcRule(std::string_view method);

// Whether a call of `rule`'s method by `who` goes to the audit log; `read_others_run`: its
// handler let `who` read another user's run.
bool Audited(const RpcRule& rule, const Principal& who, bool read_others_run = false);

// OK when `who` may call `method`; PERMISSION_DENIED naming the method and the roles that may,
// or for a method with no row (a new RPC is closed until it is given one).
absl::Status CheckRpcRole(std::string_view method, const Principal& who);
// The same with the method's row already found (FindRpcRule; null: none).
absl::Status CheckRpcRole(std::string_view method, const RpcRule* rule, const Principal& who);

// "user", "admin", "system", "operator", "node".
std::string RoleName(v1::Role role);

}  // namespace tessera::auth
