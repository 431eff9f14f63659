#include "worker/image/image_reference.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace tessera::worker::image {
namespace {

// Docker's limit on registry/repository; longer names are refused by registries anyway.
constexpr size_t kMaxNameLength = 255;
constexpr size_t kMaxTagLength = 128;

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

absl::Status Invalid(const std::string& ref, const std::string& why) {
  // Escaped, so that a control character or a huge paste cannot garble the message or the log.
  std::string shown = ref.size() > 100 ? ref.substr(0, 100) + "..." : ref;
  return absl::InvalidArgumentError(
      absl::StrCat("Invalid image reference \"", absl::CHexEscape(shown), "\": ", why));
}

// Docker's path-component: [a-z0-9]+ joined by ".", "_", "__" or any run of "-".
bool IsPathComponent(const std::string& s) {
  if (s.empty() || !IsLowerAlnum(s.front()) || !IsLowerAlnum(s.back())) return false;
  for (size_t i = 0; i < s.size();) {
    if (IsLowerAlnum(s[i])) {
      ++i;
      continue;
    }
    const size_t start = i;
    if (s[i] == '-') {
      while (i < s.size() && s[i] == '-') ++i;
    } else if (s[i] == '_') {
      while (i < s.size() && s[i] == '_' && i - start < 2) ++i;
    } else if (s[i] == '.') {
      ++i;
    } else {
      return false;
    }
    if (i >= s.size() || !IsLowerAlnum(s[i])) return false;
  }
  return true;
}

// Docker's domain: dot-separated labels of letters, digits and inner hyphens, then an optional
// ":port".
bool IsRegistry(const std::string& s) {
  std::string host = s;
  if (const size_t colon = s.rfind(':'); colon != std::string::npos) {
    host = s.substr(0, colon);
    const std::string port = s.substr(colon + 1);
    if (port.empty() || port.size() > 5) return false;
    for (char c : port) {
      if (!absl::ascii_isdigit(c)) return false;
    }
  }
  for (const absl::string_view label : absl::StrSplit(host, '.')) {
    if (label.empty() || label.front() == '-' || label.back() == '-') return false;
    for (char c : label) {
      if (!absl::ascii_isalnum(c) && c != '-') return false;
    }
  }
  return true;
}

bool IsTag(const std::string& s) {
  if (s.empty() || s.size() > kMaxTagLength || s.front() == '.' || s.front() == '-') return false;
  for (char c : s) {
    if (!absl::ascii_isalnum(c) && c != '_' && c != '.' && c != '-') return false;
  }
  return true;
}

bool IsLowerHex(const std::string& s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace

bool IsValidDigest(const std::string& digest) {
  constexpr absl::string_view kPrefix = "sha256:";
  return digest.size() == kPrefix.size() + 64 && absl::StartsWith(digest, kPrefix) &&
         IsLowerHex(digest.substr(kPrefix.size()));
}

std::string ImageReference::Name() const {
  std::string name = absl::StrCat(registry, "/", repository);
  if (!tag.empty()) absl::StrAppend(&name, ":", tag);
  if (!digest.empty()) absl::StrAppend(&name, "@", digest);
  return name;
}

std::string ImageReference::DockerTransport() const {
  // A digest names exactly one manifest; the tag is then only a label and skopeo refuses both.
  return absl::StrCat("docker://", registry, "/", repository,
                      digest.empty() ? absl::StrCat(":", tag) : absl::StrCat("@", digest));
}

absl::StatusOr<ImageReference> ParseImageReference(const std::string& ref,
                                                   const std::string& default_registry) {
  if (ref.empty()) return Invalid(ref, "the reference is empty");
  for (const char c : ref) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7f)
      return Invalid(ref, "it contains whitespace or a control character");
  }

  ImageReference out;
  std::string name = ref;
  if (const size_t at = name.find('@'); at != std::string::npos) {
    out.digest = name.substr(at + 1);
    name = name.substr(0, at);
    if (!IsValidDigest(out.digest)) {
      return Invalid(ref, "the digest must be \"sha256:\" followed by 64 lower-case hex digits");
    }
  }
  // A ':' after the last '/' starts the tag; one before it belongs to a registry's port.
  const size_t slash = name.rfind('/');
  if (const size_t colon = name.rfind(':');
      colon != std::string::npos && (slash == std::string::npos || colon > slash)) {
    out.tag = name.substr(colon + 1);
    name = name.substr(0, colon);
    if (!IsTag(out.tag)) {
      return Invalid(ref,
                     "the tag must be letters, digits, '_', '.' or '-' (not first), at most 128");
    }
  }
  if (name.empty()) return Invalid(ref, "it names no repository");
  if (name.size() > kMaxNameLength) {
    return Invalid(ref, absl::StrCat("the name is longer than ", kMaxNameLength, " characters"));
  }

  std::vector<std::string> parts = absl::StrSplit(name, '/');
  const std::string& first = parts.front();
  if (parts.size() > 1 &&
      (first.find_first_of(".:") != std::string::npos || first == "localhost")) {
    if (!IsRegistry(first))
      return Invalid(ref, absl::StrCat("\"", first, "\" is no registry host"));
    out.registry = first;
    parts.erase(parts.begin());
  } else {
    if (default_registry.empty()) {
      return Invalid(ref, "it names no registry and no default registry is configured");
    }
    out.registry = default_registry;
  }
  if (out.registry == "index.docker.io") out.registry = "docker.io";  // Docker's alias
  for (const std::string& part : parts) {
    if (part != absl::AsciiStrToLower(part)) {
      return Invalid(ref, "the repository name must be lower-case");
    }
    if (!IsPathComponent(part)) {
      return Invalid(ref, absl::StrCat("\"", part,
                                       "\" is no valid repository path component (lower-case "
                                       "letters and digits, joined by '.', '_', '__' or '-')"));
    }
  }
  // Docker refuses these as they read as image ids.
  if (parts.size() == 1 && parts[0].size() == 64 && IsLowerHex(parts[0])) {
    return Invalid(ref, "a 64-digit hex string is an image id, not a repository name");
  }
  if (out.registry == "docker.io" && parts.size() == 1) parts.insert(parts.begin(), "library");
  out.repository = absl::StrJoin(parts, "/");
  if (out.tag.empty() && out.digest.empty()) out.tag = "latest";
  return out;
}

}  // namespace tessera::worker::image
