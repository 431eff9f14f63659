#include "runspec/yaml_fields.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "runspec/absl_view.h"
#include "runspec/yaml_document.h"
#include "runspec/yaml_scalar.h"

namespace tessera::spec {
namespace {

// Edit distance, for "did you mean" hints on short keys.
std::size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

absl::Status UnknownField(const YAML::Node& key, const FieldPath& path,
                          std::span<const FieldReader> fields) {
  std::vector<absl::string_view> names;
  std::string_view closest;
  // Suggest only names a few edits away: 2 for short names, a third of the length for long ones.
  std::size_t closest_distance = std::max<std::size_t>(3, key.Scalar().size() / 3 + 1);
  const std::string& name = key.Scalar();
  for (const FieldReader& field : fields) {
    if (field.unlisted || !field.alias_of.empty()) continue;
    names.push_back(AbslView(field.name));
    if (name.size() > 64) continue;
    const std::size_t distance = EditDistance(name, field.name);
    if (distance < closest_distance) {
      closest = field.name;
      closest_distance = distance;
    }
  }
  // The path quotes odd keys itself; quote it as a whole otherwise.
  const std::string field = path.Field(name).ToString();
  const std::string shown =
      field.find('"') == std::string::npos ? absl::StrCat("\"", field, "\"") : field;
  std::string message =
      absl::StrCat("unknown field ", shown, " (known: ", absl::StrJoin(names, ", "), ")");
  if (!closest.empty()) absl::StrAppend(&message, "; did you mean \"", AbslView(closest), "\"?");
  return SpecError(key.Mark(), message);
}

absl::StatusOr<TypedScalar> ReadTyped(const YAML::Node& node, const FieldPath& path,
                                      std::string_view expected) {
  if (!node.IsScalar()) return WrongValue(node, path, expected);
  return ResolveScalar(node);
}

}  // namespace

std::optional<bool> Yaml11Bool(std::string_view text) {
  for (const auto& [word, value] : {std::pair<std::string_view, bool>{"yes", true},
                                    {"no", false},
                                    {"on", true},
                                    {"off", false}}) {
    std::string title(word);
    title[0] = absl::ascii_toupper(static_cast<unsigned char>(title[0]));
    if (text == word || text == title || text == absl::AsciiStrToUpper(AbslView(word))) {
      return value;
    }
  }
  return std::nullopt;
}

absl::Status ReadMapping(const YAML::Node& node, const FieldPath& path,
                         std::span<const FieldReader> fields) {
  TESSERA_RETURN_IF_ERROR(ExpectMapping(node, path));
  // Each field given, by its canonical name, with the spelling it was given under.
  std::vector<std::pair<std::string_view, std::string_view>> given;
  for (const auto& pair : node) {
    const std::string& name = pair.first.Scalar();
    const auto field = std::find_if(fields.begin(), fields.end(),
                                    [&](const FieldReader& f) { return f.name == name; });
    if (field == fields.end()) return UnknownField(pair.first, path, fields);
    if (pair.second.IsNull()) continue;
    const std::string_view canonical = field->alias_of.empty() ? field->name : field->alias_of;
    const auto twice = std::find_if(given.begin(), given.end(),
                                    [&](const auto& g) { return g.first == canonical; });
    if (twice != given.end()) {
      return SpecError(pair.first.Mark(), path.Field(name),
                       absl::StrCat("is given twice (also as ",
                                    path.Field(twice->second).ToString(), "); give one of them"));
    }
    given.emplace_back(canonical, field->name);
    TESSERA_RETURN_IF_ERROR(field->read(pair.second, path.Field(name)));
  }
  return absl::OkStatus();
}

absl::Status WrongValue(const YAML::Node& node, const FieldPath& path, std::string_view expected) {
  return SpecError(node.Mark(), path,
                   absl::StrCat("must be ", AbslView(expected), ", got ", DescribeNode(node)));
}

absl::Status NullValue(const YAML::Node& key, const FieldPath& path, std::string_view expected) {
  return SpecError(key.Mark(), path, absl::StrCat("must be ", AbslView(expected), ", got null"));
}

absl::Status ExpectMapping(const YAML::Node& node, const FieldPath& path) {
  return node.IsMap() ? absl::OkStatus() : WrongValue(node, path, "a mapping");
}

absl::Status ExpectSequence(const YAML::Node& node, const FieldPath& path) {
  return node.IsSequence() ? absl::OkStatus() : WrongValue(node, path, "a sequence");
}

absl::StatusOr<std::string> ReadString(const YAML::Node& node, const FieldPath& path) {
  TESSERA_ASSIGN_OR_RETURN(const TypedScalar scalar, ReadTyped(node, path, "a string"));
  if (scalar.kind != ScalarKind::kString) {
    return SpecError(node.Mark(), path,
                     absl::StrCat("must be a string, got ", DescribeNode(node),
                                  " (quote it to use it as a string)"));
  }
  return std::string(scalar.text);
}

absl::StatusOr<std::string> ReadScalarText(const YAML::Node& node, const FieldPath& path) {
  constexpr std::string_view kExpected = "a string, number or boolean";
  if (!node.IsScalar()) return WrongValue(node, path, kExpected);
  const TypedScalar scalar = ResolveScalar(node);
  if (scalar.kind == ScalarKind::kNull) return WrongValue(node, path, kExpected);
  return std::string(scalar.text);
}

absl::StatusOr<int32_t> ReadInt32(const YAML::Node& node, const FieldPath& path,
                                  std::string_view expected, bool allow_zero) {
  TESSERA_ASSIGN_OR_RETURN(const TypedScalar scalar, ReadTyped(node, path, expected));
  if (scalar.kind != ScalarKind::kInt) return WrongValue(node, path, expected);
  if (!scalar.int_value || *scalar.int_value < std::numeric_limits<int32_t>::min() ||
      *scalar.int_value > std::numeric_limits<int32_t>::max()) {
    return SpecError(node.Mark(), path,
                     absl::StrCat("must be ", AbslView(expected), ", got ", DescribeNode(node),
                                  " (out of range)"));
  }
  if (!allow_zero && *scalar.int_value == 0) return WrongValue(node, path, expected);
  return static_cast<int32_t>(*scalar.int_value);
}

absl::StatusOr<double> ReadNumber(const YAML::Node& node, const FieldPath& path,
                                  std::string_view expected, bool allow_zero) {
  TESSERA_ASSIGN_OR_RETURN(const TypedScalar scalar, ReadTyped(node, path, expected));
  if (scalar.kind != ScalarKind::kInt && scalar.kind != ScalarKind::kFloat) {
    return WrongValue(node, path, expected);
  }
  if (!allow_zero && scalar.number == 0) return WrongValue(node, path, expected);
  return scalar.number;
}

absl::StatusOr<bool> ReadBool(const YAML::Node& node, const FieldPath& path,
                              std::vector<std::string>* notes) {
  constexpr std::string_view kExpected = "true or false";
  TESSERA_ASSIGN_OR_RETURN(const TypedScalar scalar, ReadTyped(node, path, kExpected));
  if (scalar.kind == ScalarKind::kString && node.Tag() == kPlainTag) {
    if (const std::optional<bool> value = Yaml11Bool(scalar.text)) {
      if (notes != nullptr) {
        notes->push_back(absl::StrCat(path.ToString(), ": ", AbslView(scalar.text), " read as ",
                                      *value ? "true" : "false",
                                      " (a YAML 1.1 boolean, as mcli reads it)"));
      }
      return *value;
    }
    const std::string lower = absl::AsciiStrToLower(AbslView(scalar.text));
    if (lower == "y" || lower == "n") {
      return SpecError(node.Mark(), path,
                       absl::StrCat("must be true or false, got ", DescribeNode(node),
                                    " (y and n are not booleans, in mcli either)"));
    }
  }
  if (scalar.kind != ScalarKind::kBool) return WrongValue(node, path, kExpected);
  return scalar.bool_value;
}

}  // namespace tessera::spec
