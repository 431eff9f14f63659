#pragma once
// Who is calling: resolved from the API key on every request.

#include <string>

#include "tessera/v1/admin.pb.h"

namespace tessera::auth {

struct Principal {
  std::string user;
  v1::Role role = v1::ROLE_USER;

  // Admins and Tessera's own components may act on every user's runs and on nodes.
  bool is_admin() const { return role == v1::ROLE_ADMIN || role == v1::ROLE_SYSTEM; }
  bool is_system() const { return role == v1::ROLE_SYSTEM; }
  // Whether this principal may see or change a run owned by `owner`.
  bool may_act_for(const std::string& owner) const { return is_admin() || owner == user; }
};

}  // namespace tessera::auth
