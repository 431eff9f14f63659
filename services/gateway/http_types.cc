#include "services/gateway/http_types.h"

namespace tessera::gateway {

const std::string& Request::Empty() {
  static const std::string empty;
  return empty;
}

const std::string& Request::Query(const std::string& name, const std::string& fallback) const {
  auto it = query.find(name);
  if (it == query.end() || it->second.empty()) return fallback;
  return it->second.front();
}

const std::vector<std::string>& Request::QueryAll(const std::string& name) const {
  static const std::vector<std::string> none;
  auto it = query.find(name);
  return it == query.end() ? none : it->second;
}

const std::string& Request::PathParam(const std::string& name) const {
  auto it = path_params.find(name);
  return it == path_params.end() ? Empty() : it->second;
}

}  // namespace tessera::gateway
