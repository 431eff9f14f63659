#pragma once
// Who is calling: resolved from the API key on every request. What each role may call is the
// table in rpc_roles.h; these predicates are what handlers decide beyond it (whose runs).

#include <string>
#include <utility>

#include "tessera/v1/admin.pb.h"

namespace tessera::auth {

struct Principal {
  Principal() = default;
  Principal(std::string user_name, v1::Role key_role, std::string node_name = "")
      : user(std::move(user_name)), role(key_role), node(std::move(node_name)) {}

  std::string user;
  v1::Role role = v1::ROLE_USER;
  // The node a ROLE_NODE key acts as; empty otherwise.
  std::string node;
  // What the admin says the node of a ROLE_NODE key is (its key's terms); empty otherwise.
  v1::NodeTerms node_terms;
  // The id of the key that called (for the audit log); empty for principals made in code.
  std::string key_id;

  // API keys and settings.
  bool is_admin() const { return role == v1::ROLE_ADMIN; }
  // One of Tessera's own services.
  bool is_system() const { return role == v1::ROLE_SYSTEM; }
  // A worker, acting only as `node`.
  bool is_node() const { return role == v1::ROLE_NODE; }
  // Cordon, drain, label nodes, sweeps: operators, admins, and the services that do it for them.
  bool may_operate_nodes() const {
    return role == v1::ROLE_OPERATOR || role == v1::ROLE_ADMIN || role == v1::ROLE_SYSTEM;
  }
  // Whether this principal may see a run owned by `owner` (its spec, logs, events).
  bool may_see(const std::string& owner) const { return may_operate_nodes() || owner == user; }
  // Whether this principal may change a run owned by `owner`. Operators see every run but
  // change only their own.
  bool may_act_for(const std::string& owner) const {
    return is_admin() || is_system() || owner == user;
  }
  // A person (user, operator or admin), not a node or one of Tessera's services.
  bool is_person() const { return !is_system() && !is_node(); }
  // Whether this principal sees every user's runs in lists.
  bool sees_all_runs() const { return may_operate_nodes(); }
};

}  // namespace tessera::auth
