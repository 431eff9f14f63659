#include "runspec/field_path.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "runspec/absl_view.h"

namespace tessera::spec {
namespace {

constexpr std::size_t kMaxQuotedChars = 64;
constexpr std::size_t kMaxShownElements = 12;

bool IsPlainKey(std::string_view key) {
  if (key.empty() || key.size() > kMaxQuotedChars) return false;
  for (char c : key) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

FieldPath FieldPath::Field(std::string_view key) const {
  FieldPath copy = *this;
  copy.Push(key);
  return copy;
}

FieldPath FieldPath::Index(int index) const {
  FieldPath copy = *this;
  copy.PushIndex(index);
  return copy;
}

std::string FieldPath::ToString() const {
  std::string out;
  for (std::size_t i = 0; i < elements_.size(); ++i) {
    // Very deep paths keep their start and their last step.
    if (elements_.size() > kMaxShownElements && i == kMaxShownElements - 1) {
      absl::StrAppend(&out, "...(", elements_.size() - kMaxShownElements, " more)...");
      i = elements_.size() - 1;
    }
    const Element& element = elements_[i];
    if (element.is_index()) {
      absl::StrAppend(&out, "[", element.index, "]");
      continue;
    }
    if (!out.empty()) out += '.';
    out += IsPlainKey(element.key) ? element.key : Quoted(element.key);
  }
  return out;
}

std::string Quoted(std::string_view text) {
  if (text.size() <= kMaxQuotedChars)
    return absl::StrCat("\"", absl::CHexEscape(AbslView(text)), "\"");
  // Cut on a UTF-8 character boundary so the message stays valid UTF-8.
  std::size_t cut = kMaxQuotedChars;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return absl::StrCat("\"", absl::CHexEscape(AbslView(text.substr(0, cut))), "...\"");
}

}  // namespace tessera::spec
