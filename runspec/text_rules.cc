#include "runspec/text_rules.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_format.h"

namespace tessera::spec {

bool IsSecretName(std::string_view name) {
  if (name.empty() || name.size() > 63 || name.front() == '-') return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  });
}
namespace {

bool IsNoncharacter(uint32_t code) {
  return (code >= 0xFDD0 && code <= 0xFDEF) || (code & 0xFFFE) == 0xFFFE;
}

}  // namespace

std::optional<std::string> TextProblem(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto lead = static_cast<unsigned char>(text[i]);
    if (lead < 0x80) {
      ++i;
      continue;
    }
    std::size_t length = 0;
    uint32_t code = 0;
    if ((lead & 0xE0) == 0xC0) {
      length = 2;
      code = lead & 0x1F;
    } else if ((lead & 0xF0) == 0xE0) {
      length = 3;
      code = lead & 0x0F;
    } else if ((lead & 0xF8) == 0xF0) {
      length = 4;
      code = lead & 0x07;
    } else {
      return "text is not valid UTF-8";
    }
    if (i + length > text.size()) return "text is not valid UTF-8";
    for (std::size_t k = 1; k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      if ((next & 0xC0) != 0x80) return "text is not valid UTF-8";
      code = (code << 6) | (next & 0x3F);
    }
    const uint32_t min_code = length == 2 ? 0x80 : length == 3 ? 0x800 : 0x10000;
    if (code < min_code || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) {
      return "text is not valid UTF-8";
    }
    if (IsNoncharacter(code)) {
      return absl::StrFormat("text contains U+%04X, a Unicode noncharacter", code);
    }
    i += length;
  }
  return std::nullopt;
}

}  // namespace tessera::spec
