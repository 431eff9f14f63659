#pragma once
// Typing of YAML scalars the way the YAML 1.2 core schema types them. yaml-cpp leaves every
// scalar as text; this decides whether a plain scalar is null, a boolean, an integer, a float or
// a string. Quoted and block scalars, and scalars tagged !!str, are always strings.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "yaml-cpp/yaml.h"

namespace tessera::spec {

enum class ScalarKind { kNull, kBool, kInt, kFloat, kString };

struct TypedScalar {
  ScalarKind kind = ScalarKind::kNull;
  std::string_view text;  // as written; points into the node
  bool bool_value = false;
  double number = 0;                 // kInt and kFloat
  std::optional<int64_t> int_value;  // kInt, when it fits in 64 bits
};

// The YAML tag yaml-cpp gives a non-specific plain scalar ("?") and a quoted one ("!").
inline constexpr std::string_view kPlainTag = "?";
inline constexpr std::string_view kQuotedTag = "!";
inline constexpr std::string_view kStrTag = "tag:yaml.org,2002:str";
inline constexpr std::string_view kMapTag = "tag:yaml.org,2002:map";
inline constexpr std::string_view kSeqTag = "tag:yaml.org,2002:seq";

// Types a node that is a scalar or null. The node must have passed the document check (so its
// tag is one of the supported ones).
TypedScalar ResolveScalar(const YAML::Node& node);

// Types plain scalar text with the core schema.
TypedScalar ResolvePlain(std::string_view text);

// Describes a node for "got ..." in an error message: null, true, 2.5, "abc", a sequence, ...
std::string DescribeNode(const YAML::Node& node);

}  // namespace tessera::spec
