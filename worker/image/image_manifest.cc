#include "worker/image/image_manifest.h"

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "worker/image/image_reference.h"

namespace tessera::worker::image {
namespace {

using nlohmann::json;

std::string StringField(const json& j, const char* name) {
  const auto it = j.find(name);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

absl::StatusOr<Descriptor> ReadDescriptor(const json& j, const std::string& where) {
  if (!j.is_object()) return absl::InvalidArgumentError(where + " is not an object");
  Descriptor d;
  d.media_type = StringField(j, "mediaType");
  d.digest = StringField(j, "digest");
  if (!IsValidDigest(d.digest)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, " has no sha256 digest (\"", d.digest.substr(0, 80), "\")"));
  }
  if (const auto size = j.find("size"); size != j.end() && size->is_number_integer()) {
    d.size = size->get<int64_t>();
  }
  if (const auto p = j.find("platform"); p != j.end() && p->is_object()) {
    d.os = StringField(*p, "os");
    d.architecture = StringField(*p, "architecture");
    d.variant = StringField(*p, "variant");
  }
  if (const auto urls = j.find("urls"); urls != j.end() && urls->is_array() && !urls->empty()) {
    d.has_urls = true;
  }
  return d;
}

// The descriptors of the list `name` ("manifests", "layers"); `what` names the document.
absl::Status ReadDescriptors(const json& doc, const char* name, const char* what,
                             std::vector<Descriptor>* out) {
  const auto list = doc.find(name);
  if (list == doc.end() || !list->is_array()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " has no \"", name, "\" list"));
  }
  for (size_t i = 0; i < list->size(); ++i) {
    auto d = ReadDescriptor((*list)[i], absl::StrCat(name, "[", i, "]"));
    if (!d.ok()) return d.status();
    out->push_back(*std::move(d));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ParsedManifest> ParseManifest(const std::string& body,
                                             const std::string& media_type) {
  const json doc = json::parse(body, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    return absl::InvalidArgumentError("the manifest is not a JSON object");
  }
  std::string type = StringField(doc, "mediaType");
  if (type.empty()) type = media_type;
  if (const auto version = doc.find("schemaVersion");
      version != doc.end() && version->is_number_integer() && version->get<int>() == 1) {
    return absl::UnimplementedError("Docker schema 1 manifests are not read directly");
  }
  ParsedManifest out;
  const bool index = absl::StrContains(type, "image.index") ||
                     absl::StrContains(type, "manifest.list") ||
                     (type.empty() && doc.contains("manifests"));
  if (index) {
    out.is_index = true;
    if (absl::Status st = ReadDescriptors(doc, "manifests", "the image index", &out.manifests);
        !st.ok()) {
      return st;
    }
    return out;
  }
  const auto config = doc.find("config");
  if (config == doc.end()) return absl::InvalidArgumentError("the manifest has no \"config\"");
  auto c = ReadDescriptor(*config, "config");
  if (!c.ok()) return c.status();
  out.config = *c;
  if (absl::Status st = ReadDescriptors(doc, "layers", "the manifest", &out.layers); !st.ok()) {
    return st;
  }
  return out;
}

absl::StatusOr<Descriptor> ChoosePlatform(const ParsedManifest& index, const std::string& os,
                                          const std::string& architecture,
                                          const std::string& variant) {
  std::vector<std::string> offered;
  for (const Descriptor& d : index.manifests) {
    if (d.os == os && d.architecture == architecture &&
        (variant.empty() || d.variant.empty() || d.variant == variant)) {
      return d;
    }
    offered.push_back(
        absl::StrCat(d.os, "/", d.architecture, d.variant.empty() ? "" : "/", d.variant));
  }
  return absl::NotFoundError(absl::StrCat("the image has no ", os, "/", architecture,
                                          " variant (it has: ", absl::StrJoin(offered, ", "), ")"));
}

std::string HostArchitecture() {
#if defined(__x86_64__)
  return "amd64";
#elif defined(__aarch64__)
  return "arm64";
#elif defined(__powerpc64__)
  return "ppc64le";
#elif defined(__s390x__)
  return "s390x";
#else
  return "unknown";
#endif
}

LayerCompression CompressionOf(const std::string& media_type) {
  if (absl::StrContains(media_type, "encrypted") || absl::StrContains(media_type, "zstd")) {
    return LayerCompression::kUnsupported;
  }
  if (absl::EndsWith(media_type, "gzip")) return LayerCompression::kGzip;  // +gzip, .gzip
  if (absl::EndsWith(media_type, "tar")) return LayerCompression::kNone;   // OCI, Docker .tar
  return LayerCompression::kUnsupported;
}

}  // namespace tessera::worker::image
