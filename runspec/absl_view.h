#pragma once
// Debian's Abseil 20220623 is built with its own absl::string_view rather than an alias of
// std::string_view, so std::string_view does not convert to what StrCat, SimpleAtoi & co. take.

#include <string_view>

#include "absl/strings/string_view.h"

namespace tessera::spec {

inline absl::string_view AbslView(std::string_view text) {
  return absl::string_view(text.data(), text.size());
}

}  // namespace tessera::spec
