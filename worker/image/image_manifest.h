// An image's manifest (OCI image manifest or Docker schema 2) and index (OCI image index or
// Docker manifest list), as a registry serves them: which config and layers make the image, and
// which manifest of an index is this node's platform.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tessera::worker::image {

struct Descriptor {
  std::string media_type;
  std::string digest;
  int64_t size = -1;
  std::string os, architecture, variant;  // an index entry's platform
  bool has_urls = false;                  // a foreign layer, fetched from elsewhere
};

struct ParsedManifest {
  bool is_index = false;
  std::vector<Descriptor> manifests;  // is_index
  Descriptor config;                  // !is_index
  std::vector<Descriptor> layers;     // !is_index, lowest first
};

// `media_type` is the Content-Type the registry gave (the document's own mediaType wins when
// present). UNIMPLEMENTED for manifest kinds Tessera does not read itself (Docker schema 1),
// INVALID_ARGUMENT for a document that does not parse or lacks what it must have.
absl::StatusOr<ParsedManifest> ParseManifest(const std::string& body,
                                             const std::string& media_type);

// The entry of an index for `os`/`architecture` (and `variant` when the entry names one),
// NOT_FOUND listing the platforms there are otherwise.
absl::StatusOr<Descriptor> ChoosePlatform(const ParsedManifest& index, const std::string& os,
                                          const std::string& architecture,
                                          const std::string& variant = "");

// This machine's platform in OCI's words: "amd64", "arm64", ...
std::string HostArchitecture();

enum class LayerCompression { kNone, kGzip, kUnsupported };
// What a layer's media type says about its compression (zstd and encrypted layers are
// kUnsupported: skopeo pulls those).
LayerCompression CompressionOf(const std::string& media_type);

}  // namespace tessera::worker::image
