#pragma once
// Label values from enum names: "RUN_STATUS_COMPLETED" is "COMPLETED" on a series, as mcli
// shows it; bounded, since an enum has few values.

#include <string>
#include <string_view>

namespace tessera::metrics {

inline std::string EnumLabel(std::string name, std::string_view prefix) {
  return name.rfind(prefix, 0) == 0 ? name.substr(prefix.size()) : name;
}

}  // namespace tessera::metrics
