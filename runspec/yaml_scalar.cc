#include "runspec/yaml_scalar.h"

#include <cmath>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "runspec/absl_view.h"
#include "runspec/field_path.h"

namespace tessera::spec {
namespace {

bool IsDigits(std::string_view s, int base) {
  if (s.empty()) return false;
  for (char c : s) {
    const bool ok = base == 8    ? (c >= '0' && c <= '7')
                    : base == 16 ? absl::ascii_isxdigit(static_cast<unsigned char>(c))
                                 : absl::ascii_isdigit(static_cast<unsigned char>(c));
    if (!ok) return false;
  }
  return true;
}

std::string_view StripSign(std::string_view s) {
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) s.remove_prefix(1);
  return s;
}

// [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?
bool IsCoreFloat(std::string_view s) {
  s = StripSign(s);
  std::size_t i = 0;
  const auto digits = [&] {
    const std::size_t start = i;
    while (i < s.size() && absl::ascii_isdigit(static_cast<unsigned char>(s[i]))) ++i;
    return i - start;
  };
  if (i < s.size() && s[i] == '.') {
    ++i;
    if (digits() == 0) return false;
  } else {
    if (digits() == 0) return false;
    if (i < s.size() && s[i] == '.') {
      ++i;
      digits();
    }
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (digits() == 0) return false;
  }
  return i == s.size();
}

// Integer value of unsigned digits in base 8 or 16; nullopt on overflow.
std::optional<uint64_t> ParseUnsigned(std::string_view digits, int base) {
  uint64_t value = 0;
  for (char c : digits) {
    const int d = absl::ascii_isdigit(static_cast<unsigned char>(c))
                      ? c - '0'
                      : absl::ascii_tolower(static_cast<unsigned char>(c)) - 'a' + 10;
    if (value > (std::numeric_limits<uint64_t>::max() - d) / base) return std::nullopt;
    value = value * base + d;
  }
  return value;
}

TypedScalar Typed(ScalarKind kind, std::string_view text) {
  TypedScalar scalar;
  scalar.kind = kind;
  scalar.text = text;
  return scalar;
}

TypedScalar IntFromUnsigned(std::string_view text, std::string_view digits, int base) {
  TypedScalar scalar = Typed(ScalarKind::kInt, text);
  const std::optional<uint64_t> value = ParseUnsigned(digits, base);
  if (!value) {
    // Beyond 64 bits: only the (approximate) double value is kept.
    double approximate = 0;
    for (char c : digits) {
      approximate = approximate * base +
                    (absl::ascii_isdigit(static_cast<unsigned char>(c))
                         ? c - '0'
                         : absl::ascii_tolower(static_cast<unsigned char>(c)) - 'a' + 10);
    }
    scalar.number = approximate;
    return scalar;
  }
  scalar.number = static_cast<double>(*value);
  if (*value <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    scalar.int_value = static_cast<int64_t>(*value);
  }
  return scalar;
}

// Parses decimal float text (already matched by IsCoreFloat or a decimal integer).
double DecimalValue(std::string_view text) {
  const bool negative = !text.empty() && text[0] == '-';
  double value = 0;
  if (!absl::SimpleAtod(AbslView(StripSign(text)), &value)) return std::nan("");
  return negative ? -value : value;
}

}  // namespace

TypedScalar ResolvePlain(std::string_view text) {
  if (text.empty() || text == "~" || text == "null" || text == "Null" || text == "NULL") {
    return Typed(ScalarKind::kNull, text);
  }
  if (text == "true" || text == "True" || text == "TRUE") {
    TypedScalar scalar = Typed(ScalarKind::kBool, text);
    scalar.bool_value = true;
    return scalar;
  }
  if (text == "false" || text == "False" || text == "FALSE") {
    return Typed(ScalarKind::kBool, text);
  }
  if (text.size() > 2 && text[0] == '0' && text[1] == 'o' && IsDigits(text.substr(2), 8)) {
    return IntFromUnsigned(text, text.substr(2), 8);
  }
  if (text.size() > 2 && text[0] == '0' && text[1] == 'x' && IsDigits(text.substr(2), 16)) {
    return IntFromUnsigned(text, text.substr(2), 16);
  }
  if (IsDigits(StripSign(text), 10)) {
    TypedScalar scalar = Typed(ScalarKind::kInt, text);
    scalar.number = DecimalValue(text);
    int64_t value = 0;
    if (absl::SimpleAtoi(AbslView(text), &value)) scalar.int_value = value;
    return scalar;
  }
  if (IsCoreFloat(text)) {
    TypedScalar scalar = Typed(ScalarKind::kFloat, text);
    scalar.number = DecimalValue(text);
    return scalar;
  }
  const std::string_view unsigned_text = StripSign(text);
  if (unsigned_text == ".inf" || unsigned_text == ".Inf" || unsigned_text == ".INF") {
    TypedScalar scalar = Typed(ScalarKind::kFloat, text);
    scalar.number = text[0] == '-' ? -std::numeric_limits<double>::infinity()
                                   : std::numeric_limits<double>::infinity();
    return scalar;
  }
  if (text == ".nan" || text == ".NaN" || text == ".NAN") {
    TypedScalar scalar = Typed(ScalarKind::kFloat, text);
    scalar.number = std::numeric_limits<double>::quiet_NaN();
    return scalar;
  }
  return Typed(ScalarKind::kString, text);
}

TypedScalar ResolveScalar(const YAML::Node& node) {
  if (!node.IsScalar()) return Typed(ScalarKind::kNull, {});
  const std::string& text = node.Scalar();
  if (node.Tag() == kPlainTag) return ResolvePlain(text);
  return Typed(ScalarKind::kString, text);
}

std::string DescribeNode(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Sequence:
      return "a sequence";
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Scalar: {
      const TypedScalar scalar = ResolveScalar(node);
      if (scalar.kind == ScalarKind::kString) return Quoted(scalar.text);
      if (scalar.kind == ScalarKind::kNull) return "null";
      // Booleans and numbers are plain ASCII; show them unquoted (shortened when very long).
      if (scalar.text.size() <= 64) return std::string(scalar.text);
      return absl::StrCat(AbslView(scalar.text.substr(0, 64)), "...");
    }
    default:
      return "null";
  }
}

}  // namespace tessera::spec
