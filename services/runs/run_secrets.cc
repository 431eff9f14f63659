#include "services/runs/run_secrets.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "runspec/integrations.h"

namespace tessera::runs {

std::string RegistryNamedBy(std::string_view image) {
  const size_t slash = image.find('/');
  if (slash == std::string_view::npos) return "";
  const std::string_view first = image.substr(0, slash);
  // Docker's rule: the first component is a registry when it has a '.' or a ':' or is localhost.
  if (first.find_first_of(".:") == std::string_view::npos && first != "localhost") return "";
  return std::string(first);
}

bool RunGetsSecret(const v1::RunSpec& spec, const v1::Secret& secret) {
  if (spec.all_secrets()) return true;
  if (std::find(spec.secrets().begin(), spec.secrets().end(), secret.name()) !=
      spec.secrets().end()) {
    return true;
  }
  switch (secret.type()) {
    case v1::SECRET_TYPE_DOCKER_REGISTRY: {
      const std::string registry = RegistryNamedBy(spec.image());
      return !registry.empty() && registry == secret.server();
    }
    case v1::SECRET_TYPE_GIT_SSH:
      return std::any_of(
          spec.integrations().begin(), spec.integrations().end(), [](const v1::Integration& i) {
            return i.integration_type() == "git_repo" && spec::IntegrationFlag(i, "ssh_clone");
          });
    default:
      return false;
  }
}

absl::Status CheckNamedSecretsExist(const v1::RunSpec& spec,
                                    const std::vector<std::string>& owned) {
  for (const std::string& name : spec.secrets()) {
    if (std::find(owned.begin(), owned.end(), name) == owned.end()) {
      return absl::NotFoundError(
          absl::StrCat("secrets: you have no secret named '", name,
                       "' (mcli get secrets lists yours; mcli create secret makes one)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace tessera::runs
