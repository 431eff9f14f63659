#include "worker/image/image_config.h"

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "worker/image/image_reference.h"

namespace tessera::worker::image {

absl::StatusOr<ImageConfig> ParseImageConfig(const std::string& json) {
  const nlohmann::json doc = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return absl::InvalidArgumentError("the image's config is not a JSON object");
  }
  ImageConfig out;
  if (const auto c = doc.find("config"); c != doc.end() && c->is_object()) {
    if (const auto env = c->find("Env"); env != c->end() && env->is_array()) {
      for (const auto& e : *env) {
        if (!e.is_string()) return absl::InvalidArgumentError("the image's Env holds a non-string");
        out.env.push_back(e.get<std::string>());
      }
    }
    if (const auto wd = c->find("WorkingDir");
        wd != c->end() && wd->is_string() && !wd->get<std::string>().empty()) {
      out.working_dir = wd->get<std::string>();
    }
  }
  const auto rootfs = doc.find("rootfs");
  const nlohmann::json* ids = nullptr;
  if (rootfs != doc.end() && rootfs->is_object()) {
    if (const auto d = rootfs->find("diff_ids"); d != rootfs->end() && d->is_array()) ids = &*d;
  }
  if (ids == nullptr) return absl::InvalidArgumentError("the image's config lists no layers");
  for (const auto& id : *ids) {
    if (!id.is_string() || !IsValidDigest(id.get<std::string>())) {
      return absl::InvalidArgumentError(
          absl::StrCat("the image's config has a malformed layer id: ", id.dump().substr(0, 100)));
    }
    out.diff_ids.push_back(id.get<std::string>());
  }
  return out;
}

std::string BundleConfigJson(const ImageConfig& config) {
  nlohmann::json spec;
  spec["process"]["env"] = config.env;
  spec["process"]["cwd"] = config.working_dir;
  return spec.dump(2);
}

}  // namespace tessera::worker::image
