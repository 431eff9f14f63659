#include "services/gateway/params.h"

#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "base/utf8.h"

namespace tessera::gateway {
namespace {

constexpr std::size_t kMaxStringParam = 1024;

// Quotes a client value for an error message, cut short when long.
std::string Quoted(std::string_view value) {
  constexpr std::size_t kShown = 80;
  std::string shown(value.substr(0, kShown));
  if (value.size() > kShown) shown += "...";
  return absl::StrCat("\"", shown, "\"");
}

absl::Status Invalid(const ParamSpec& spec, std::string_view value) {
  return absl::InvalidArgumentError(absl::StrCat(Where(spec), " \"", spec.name, "\": expected ",
                                                 DescribeType(spec), ", got ", Quoted(value)));
}

bool AllOf(std::string_view s, std::size_t max_len, bool (*ok)(char)) {
  if (s.empty() || s.size() > max_len) return false;
  for (char c : s) {
    if (!ok(c)) return false;
  }
  return true;
}

bool RunNameChar(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; }
bool NodeNameChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
}
bool IdChar(char c) { return NodeNameChar(c) || c == ':'; }
bool TokenChar(char c) { return c >= 0x20 && c <= 0x7e; }
bool DigitChar(char c) { return c >= '0' && c <= '9'; }

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

absl::StatusOr<std::string> PercentDecode(std::string_view in, bool plus_is_space) {
  std::string out;
  out.reserve(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    const char c = in[i];
    if (c == '%') {
      const int hi = i + 2 < in.size() ? HexValue(in[i + 1]) : -1;
      const int lo = i + 2 < in.size() ? HexValue(in[i + 2]) : -1;
      if (hi < 0 || lo < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("bad percent-escape in ", Quoted(in), " (expected %XX)"));
      }
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out.push_back(' ');
    } else {
      out.push_back(c);
    }
  }
  if (!IsValidUtf8(out)) {
    return absl::InvalidArgumentError(absl::StrCat(Quoted(in), " does not decode to UTF-8 text"));
  }
  return out;
}

}  // namespace

ParamSpec PathParam(std::string name, ParamType type, std::string description) {
  ParamSpec p;
  p.name = std::move(name);
  p.in = ParamIn::kPath;
  p.type = type;
  p.required = true;
  p.description = std::move(description);
  return p;
}

ParamSpec QueryParam(std::string name, ParamType type, std::string description) {
  ParamSpec p;
  p.name = std::move(name);
  p.type = type;
  p.description = std::move(description);
  return p;
}

ParamSpec RepeatedQueryParam(std::string name, ParamType type, std::string description) {
  ParamSpec p = QueryParam(std::move(name), type, std::move(description));
  p.repeated = true;
  return p;
}

ParamSpec EnumQueryParam(std::string name, const google::protobuf::EnumDescriptor* type,
                         std::string prefix, bool repeated, std::string description) {
  ParamSpec p = QueryParam(std::move(name), ParamType::kEnum, std::move(description));
  p.repeated = repeated;
  p.enum_type = type;
  p.enum_prefix = std::move(prefix);
  return p;
}

ParamSpec HeaderParam(std::string name, std::string description) {
  ParamSpec p;
  p.name = std::move(name);
  p.in = ParamIn::kHeader;
  p.type = ParamType::kToken;
  p.description = std::move(description);
  return p;
}

std::string Where(const ParamSpec& spec) {
  switch (spec.in) {
    case ParamIn::kPath:
      return "path parameter";
    case ParamIn::kHeader:
      return "header";
    case ParamIn::kQuery:
      break;
  }
  return "query parameter";
}

std::string DescribeType(const ParamSpec& spec) {
  switch (spec.type) {
    case ParamType::kString:
      return "UTF-8 text of at most 1024 bytes";
    case ParamType::kCount:
      return "a non-negative integer";
    case ParamType::kId64:
      return "a non-negative 64-bit integer";
    case ParamType::kBoolean:
      return "true or false";
    case ParamType::kDateTime:
      return "an RFC 3339 time such as 2024-05-01T12:00:00Z";
    case ParamType::kEnum:
      return absl::StrCat("one of ", absl::StrJoin(EnumValues(spec), ", "));
    case ParamType::kRunName:
      return "a run name: 1 to 63 characters of a-z, 0-9 and '-'";
    case ParamType::kNodeName:
      return "a node name: 1 to 253 characters of A-Z, a-z, 0-9, '.', '_' and '-'";
    case ParamType::kId:
      return "an id: 1 to 128 characters of A-Z, a-z, 0-9, '.', '_', ':' and '-'";
    case ParamType::kToken:
      return "1 to 256 printable ASCII characters";
    case ParamType::kKeyValue:
      return "KEY=VALUE (UTF-8 of at most 1024 bytes, the key not empty)";
  }
  return "a value";
}

std::string PatternOf(ParamType type) {
  switch (type) {
    case ParamType::kRunName:
      return "^[a-z0-9-]{1,63}$";
    case ParamType::kNodeName:
      return "^[A-Za-z0-9._-]{1,253}$";
    case ParamType::kId:
      return "^[A-Za-z0-9._:-]{1,128}$";
    default:
      return "";
  }
}

std::vector<std::string> EnumValues(const ParamSpec& spec) {
  std::vector<std::string> shorts, fulls;
  if (spec.type != ParamType::kEnum || spec.enum_type == nullptr) return shorts;
  for (int i = 0; i < spec.enum_type->value_count(); ++i) {
    const auto* v = spec.enum_type->value(i);
    if (v->number() == 0) continue;  // *_UNSPECIFIED is not a value one can ask for
    std::string full = v->name();
    std::string short_name = full;
    if (!spec.enum_prefix.empty() && short_name.rfind(spec.enum_prefix, 0) == 0) {
      short_name = short_name.substr(spec.enum_prefix.size());
    }
    shorts.push_back(short_name);
    if (short_name != full) fulls.push_back(full);
  }
  shorts.insert(shorts.end(), fulls.begin(), fulls.end());
  return shorts;
}

absl::Status ValidateParam(const ParamSpec& spec, std::string_view value) {
  switch (spec.type) {
    case ParamType::kString:
      if (value.size() > kMaxStringParam || !IsValidUtf8(value)) return Invalid(spec, value);
      return absl::OkStatus();
    case ParamType::kCount:
      return ParseCount(spec, value).status();
    case ParamType::kId64:
      return ParseId64(spec, value).status();
    case ParamType::kBoolean:
      return ParseBoolean(spec, value).status();
    case ParamType::kDateTime:
      return ParseDateTime(spec, value).status();
    case ParamType::kEnum:
      return ParseEnum(spec, value).status();
    case ParamType::kRunName:
      return AllOf(value, 63, RunNameChar) ? absl::OkStatus() : Invalid(spec, value);
    case ParamType::kNodeName:
      return AllOf(value, 253, NodeNameChar) ? absl::OkStatus() : Invalid(spec, value);
    case ParamType::kId:
      return AllOf(value, 128, IdChar) ? absl::OkStatus() : Invalid(spec, value);
    case ParamType::kToken:
      return AllOf(value, 256, TokenChar) ? absl::OkStatus() : Invalid(spec, value);
    case ParamType::kKeyValue:
      return ParseKeyValue(spec, value).status();
  }
  return Invalid(spec, value);
}

absl::StatusOr<std::pair<std::string, std::string>> ParseKeyValue(const ParamSpec& spec,
                                                                  std::string_view value) {
  const size_t equals = value.find('=');
  if (value.size() > kMaxStringParam || !IsValidUtf8(value) || equals == 0 ||
      equals == std::string_view::npos) {
    return Invalid(spec, value);
  }
  return std::pair{std::string(value.substr(0, equals)), std::string(value.substr(equals + 1))};
}

absl::StatusOr<std::int32_t> ParseCount(const ParamSpec& spec, std::string_view value) {
  std::int32_t n = 0;
  // SimpleAtoi accepts surrounding spaces and a '+'; a count is digits only.
  if (value.empty() || value.size() > 10 || !AllOf(value, 10, DigitChar) ||
      !absl::SimpleAtoi(absl::string_view(value.data(), value.size()), &n) || n < 0) {
    return Invalid(spec, value);
  }
  return n;
}

absl::StatusOr<std::int64_t> ParseId64(const ParamSpec& spec, std::string_view value) {
  std::int64_t n = 0;
  if (!AllOf(value, 19, DigitChar) ||
      !absl::SimpleAtoi(absl::string_view(value.data(), value.size()), &n) || n < 0) {
    return Invalid(spec, value);
  }
  return n;
}

absl::StatusOr<bool> ParseBoolean(const ParamSpec& spec, std::string_view value) {
  const std::string lower = absl::AsciiStrToLower(absl::string_view(value.data(), value.size()));
  if (lower.empty() || lower == "true" || lower == "1") return true;
  if (lower == "false" || lower == "0") return false;
  return Invalid(spec, value);
}

absl::StatusOr<google::protobuf::Timestamp> ParseDateTime(const ParamSpec& spec,
                                                          std::string_view value) {
  absl::Time t;
  std::string err;
  if (value.empty() || value.size() > 64 ||
      !absl::ParseTime(absl::RFC3339_full, absl::string_view(value.data(), value.size()), &t,
                       &err)) {
    return Invalid(spec, value);
  }
  // Timestamp's range: 0001-01-01 to 9999-12-31.
  const std::int64_t seconds = absl::ToUnixSeconds(t);
  if (seconds < -62135596800LL || seconds > 253402300799LL) return Invalid(spec, value);
  google::protobuf::Timestamp ts;
  ts.set_seconds(seconds);
  ts.set_nanos(
      static_cast<std::int32_t>(absl::ToInt64Nanoseconds(t - absl::FromUnixSeconds(seconds))));
  return ts;
}

absl::StatusOr<int> ParseEnum(const ParamSpec& spec, std::string_view value) {
  if (spec.enum_type == nullptr || value.empty() || value.size() > 128) {
    return Invalid(spec, value);
  }
  const std::string upper = absl::AsciiStrToUpper(absl::string_view(value.data(), value.size()));
  const google::protobuf::EnumValueDescriptor* v = spec.enum_type->FindValueByName(upper);
  if (v == nullptr) v = spec.enum_type->FindValueByName(spec.enum_prefix + upper);
  if (v == nullptr || v->number() == 0) return Invalid(spec, value);
  return v->number();
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ParseQueryString(
    std::string_view query) {
  std::vector<std::pair<std::string, std::string>> out;
  std::size_t start = 0;
  while (start <= query.size()) {
    std::size_t end = query.find('&', start);
    if (end == std::string_view::npos) end = query.size();
    const std::string_view part = query.substr(start, end - start);
    start = end + 1;
    if (part.empty()) continue;
    const std::size_t eq = part.find('=');
    auto name = PercentDecode(part.substr(0, eq), /*plus_is_space=*/true);
    if (!name.ok())
      return absl::InvalidArgumentError(absl::StrCat("query: ", name.status().message()));
    std::string value;
    if (eq != std::string_view::npos) {
      auto decoded = PercentDecode(part.substr(eq + 1), /*plus_is_space=*/true);
      if (!decoded.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("query parameter \"", *name, "\": ", decoded.status().message()));
      }
      value = *std::move(decoded);
    }
    out.emplace_back(*std::move(name), std::move(value));
  }
  return out;
}

absl::StatusOr<std::string> DecodePathSegment(std::string_view segment) {
  return PercentDecode(segment, /*plus_is_space=*/false);
}

bool IsValidUtf8(std::string_view s) { return tessera::IsValidUtf8(s); }

absl::Status BindQuery(const std::vector<ParamSpec>& params,
                       const std::vector<std::pair<std::string, std::string>>& pairs,
                       std::map<std::string, std::vector<std::string>>& out) {
  std::map<std::string, const ParamSpec*> known;
  for (const ParamSpec& p : params) {
    if (p.in == ParamIn::kQuery) known[p.name] = &p;
  }
  for (const auto& [name, value] : pairs) {
    auto it = known.find(name);
    if (it == known.end()) {
      std::vector<std::string> names;
      for (const auto& [n, _] : known) names.push_back(n);
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown query parameter ", Quoted(name),
          names.empty() ? std::string(" (this route takes none)")
                        : absl::StrCat(" (expected one of: ", absl::StrJoin(names, ", "), ")")));
    }
    const ParamSpec& spec = *it->second;
    std::vector<std::string>& values = out[name];
    if (!spec.repeated && !values.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("query parameter \"", name, "\" may be given only once"));
    }
    if (absl::Status st = ValidateParam(spec, value); !st.ok()) return st;
    values.push_back(value);
  }
  for (const auto& [name, spec] : known) {
    if (spec->required && out.count(name) == 0) {
      return absl::InvalidArgumentError(absl::StrCat("query parameter \"", name, "\" is required"));
    }
  }
  return absl::OkStatus();
}

}  // namespace tessera::gateway
