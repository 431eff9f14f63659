#pragma once
// Loading the YAML document of a run spec, and positions in it.

#include <cstddef>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runspec/field_path.h"
#include "runspec/spec_limits.h"
#include "yaml-cpp/yaml.h"

namespace tessera::spec {

// An InvalidArgument error "line L, column C: <path>: <message>" (1-based; no path part when the
// path is empty).
absl::Status SpecError(const YAML::Mark& mark, const FieldPath& path, std::string_view message);
absl::Status SpecError(const YAML::Mark& mark, std::string_view message);

// Loads the one YAML document of a run spec and checks its shape: size (at most `max_bytes`),
// syntax, exactly one document, a mapping at the root, nesting depth, number of values (aliases
// expanded), mapping keys (non-null scalars, no duplicates), tags (only !!str and the standard
// collection tags) and UTF-8 text. Later stages rely on all of these. Never throws.
absl::StatusOr<YAML::Node> LoadSpecDocument(std::string_view text,
                                            std::size_t max_bytes = kMaxSpecBytes);

// Where the field at `path` is written: its value, or its key when the value is null. When the
// path does not exist, the nearest enclosing field that does; the document start at worst.
YAML::Mark LocateField(const YAML::Node& root, const FieldPath& path);

}  // namespace tessera::spec
