#pragma once
// What text a run spec may hold, for the YAML parser and the validator alike.

#include <optional>
#include <string>
#include <string_view>

namespace tessera::spec {

// Why `text` cannot be part of a run spec, or nullopt when it can. Text must be valid UTF-8
// (protobuf strings must be) without Unicode noncharacters (U+FDD0..U+FDEF and U+xFFFE/U+xFFFF
// in every plane): YAML emitters, yaml-cpp's included, replace those, so they could not be
// written out and read back unchanged.
std::optional<std::string> TextProblem(std::string_view text);

// mcli's rule for a secret's name: 1 to 63 lower-case letters, digits and '-', not starting with
// '-'. For the names a run's `secrets:` gives and the secrets users create alike.
bool IsSecretName(std::string_view name);

}  // namespace tessera::spec
