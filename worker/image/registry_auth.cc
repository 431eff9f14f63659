#include "worker/image/registry_auth.h"

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace tessera::worker::image {
namespace {

// "https://index.docker.io/v1/" -> "docker.io"; "r.example.com:5000/team/" ->
// "r.example.com:5000/team".
std::string NormalizedKey(std::string key) {
  absl::string_view k = key;
  if (!absl::ConsumePrefix(&k, "https://")) absl::ConsumePrefix(&k, "http://");
  while (absl::ConsumeSuffix(&k, "/")) {
  }
  if (!absl::ConsumeSuffix(&k, "/v1")) absl::ConsumeSuffix(&k, "/v2");
  std::string out(k);
  const size_t slash = out.find('/');
  const std::string host = out.substr(0, slash);
  if (host == "index.docker.io" || host == "registry-1.docker.io") {
    out = "docker.io" + (slash == std::string::npos ? "" : out.substr(slash));
  }
  return out;
}

}  // namespace

absl::StatusOr<RegistryCredentials> CredentialsFor(absl::string_view auth_json,
                                                   const std::string& registry,
                                                   const std::string& repository) {
  const nlohmann::json doc = nlohmann::json::parse(auth_json, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return absl::InvalidArgumentError("the registry auth file is not a JSON object");
  }
  const auto auths = doc.find("auths");
  if (auths == doc.end()) return RegistryCredentials{};
  if (!auths->is_object()) {
    return absl::InvalidArgumentError("the registry auth file's \"auths\" is not an object");
  }
  // The most specific key that names this repository or one of its namespaces.
  const std::string full = absl::StrCat(registry, "/", repository);
  const nlohmann::json* best = nullptr;
  std::string best_key;
  size_t best_length = 0;
  for (const auto& [key, entry] : auths->items()) {
    const std::string normalized = NormalizedKey(key);
    const bool matches =
        normalized == registry || normalized == full || absl::StartsWith(full, normalized + "/");
    if (matches && normalized.size() >= best_length && normalized.size() > 0) {
      best = &entry;
      best_key = key;
      best_length = normalized.size();
    }
  }
  if (best == nullptr) return RegistryCredentials{};
  const auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("the registry auth file's entry \"", absl::CHexEscape(best_key), "\" ", why));
  };
  if (!best->is_object()) return bad("is not an object");
  RegistryCredentials creds;
  if (const auto auth = best->find("auth"); auth != best->end()) {
    if (!auth->is_string()) return bad("has an \"auth\" that is not a string");
    std::string decoded;
    if (!absl::Base64Unescape(auth->get<std::string>(), &decoded)) {
      return bad("has an \"auth\" that is not base64");
    }
    const size_t colon = decoded.find(':');
    if (colon == std::string::npos) return bad("has an \"auth\" that is not \"user:password\"");
    creds.username = decoded.substr(0, colon);
    creds.password = decoded.substr(colon + 1);
    return creds;
  }
  // Docker's config.json may spell them out.
  const auto user = best->find("username");
  const auto pass = best->find("password");
  if (user != best->end() && pass != best->end() && user->is_string() && pass->is_string()) {
    creds.username = user->get<std::string>();
    creds.password = pass->get<std::string>();
    return creds;
  }
  return bad("has neither \"auth\" nor \"username\" and \"password\"");
}

absl::StatusOr<AuthChallenge> ParseAuthChallenge(absl::string_view header) {
  absl::string_view rest = absl::StripAsciiWhitespace(header);
  size_t i = 0;
  while (i < rest.size() && !absl::ascii_isspace(static_cast<unsigned char>(rest[i]))) ++i;
  AuthChallenge challenge;
  challenge.scheme = absl::AsciiStrToLower(rest.substr(0, i));
  if (challenge.scheme.empty() || challenge.scheme.find('=') != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("not an authentication challenge: \"", absl::CHexEscape(header), "\""));
  }
  rest.remove_prefix(i);
  // auth-params: name=token or name="quoted string", separated by commas.
  while (true) {
    rest = absl::StripLeadingAsciiWhitespace(rest);
    while (absl::ConsumePrefix(&rest, ",")) rest = absl::StripLeadingAsciiWhitespace(rest);
    if (rest.empty()) break;
    const size_t eq = rest.find('=');
    if (eq == absl::string_view::npos) break;  // a token68 or a next challenge: not ours
    const std::string name = absl::AsciiStrToLower(absl::StripAsciiWhitespace(rest.substr(0, eq)));
    if (name.find_first_of(" \t,") != std::string::npos) break;  // the next challenge begins
    rest.remove_prefix(eq + 1);
    rest = absl::StripLeadingAsciiWhitespace(rest);
    std::string value;
    if (absl::ConsumePrefix(&rest, "\"")) {
      size_t j = 0;
      for (; j < rest.size() && rest[j] != '"'; ++j) {
        if (rest[j] == '\\' && j + 1 < rest.size()) ++j;
        value.push_back(rest[j]);
      }
      if (j == rest.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("unterminated quoted value in \"", absl::CHexEscape(header), "\""));
      }
      rest.remove_prefix(j + 1);
    } else {
      const size_t end = rest.find(',');
      value = std::string(absl::StripTrailingAsciiWhitespace(rest.substr(0, end)));
      rest.remove_prefix(end == absl::string_view::npos ? rest.size() : end);
    }
    challenge.params.emplace(name, value);
  }
  return challenge;
}

}  // namespace tessera::worker::image
