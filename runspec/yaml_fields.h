#pragma once
// Reading typed fields out of a checked run spec document (see LoadSpecDocument). Each reader
// returns an InvalidArgument error located at the node, naming the field, when the node does not
// hold what the field needs.

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runspec/field_path.h"
#include "yaml-cpp/yaml.h"

namespace tessera::spec {

// One known field of a mapping and what to do with its (non-null) value.
struct FieldReader {
  using Read = std::function<absl::Status(const YAML::Node& value, const FieldPath& path)>;
  std::string_view name;
  Read read;
  // When set, this is another spelling of the field named `alias_of` (an older mcli name, or the
  // protobuf JSON one): writing both is an error.
  std::string_view alias_of = {};
  // Accepted but not listed among the known fields in errors (aliases never are): fields that
  // older mcli versions took and that are read only to say they are ignored.
  bool unlisted = false;
};

// Reads a mapping whose keys must all be among `fields`. Fields written as null are skipped, as
// if absent. An unknown key is an error that lists the known ones (the listed ones); a field
// given under two of its spellings is an error at the second.
absl::Status ReadMapping(const YAML::Node& node, const FieldPath& path,
                         std::span<const FieldReader> fields);

// "<path>: must be <expected>, got <what the node holds>" at the node.
absl::Status WrongValue(const YAML::Node& node, const FieldPath& path, std::string_view expected);

// "<path>: must be <expected>, got null", at `key`: yaml-cpp places an empty value where the
// next token starts, often on the next line, so the key is the better position.
absl::Status NullValue(const YAML::Node& key, const FieldPath& path, std::string_view expected);

absl::Status ExpectMapping(const YAML::Node& node, const FieldPath& path);
absl::Status ExpectSequence(const YAML::Node& node, const FieldPath& path);

// A string scalar (quoted, or plain text that is not a number, boolean or null).
absl::StatusOr<std::string> ReadString(const YAML::Node& node, const FieldPath& path);

// Any non-null scalar, as written ("true", "1.50", "abc"): for environment variables and metadata.
absl::StatusOr<std::string> ReadScalarText(const YAML::Node& node, const FieldPath& path);

// An integer that fits in 32 bits. `expected` describes the field's values for the error
// ("a non-negative integer"). Unless allow_zero, 0 is rejected too: the spec proto uses 0 for
// "not set", so writing it explicitly would silently mean something else.
absl::StatusOr<int32_t> ReadInt32(const YAML::Node& node, const FieldPath& path,
                                  std::string_view expected, bool allow_zero = true);

// A number (integer or float, including .inf/.nan: the validator judges the value). Unless
// allow_zero, 0 is rejected (see ReadInt32).
absl::StatusOr<double> ReadNumber(const YAML::Node& node, const FieldPath& path,
                                  std::string_view expected, bool allow_zero = true);

// PyYAML's (YAML 1.1) other booleans: yes/no/on/off, each in lower, Title or UPPER case; nullopt
// for any other text.
std::optional<bool> Yaml11Bool(std::string_view text);

// true or false. mcli reads its YAML with PyYAML, whose YAML 1.1 booleans yes/no/on/off (in
// lower, Title or UPPER case, unquoted) are accepted too, each with a note in `notes` (when not
// null) saying how it was read. "y" and "n" are not booleans in PyYAML either: an error.
absl::StatusOr<bool> ReadBool(const YAML::Node& node, const FieldPath& path,
                              std::vector<std::string>* notes = nullptr);

}  // namespace tessera::spec
