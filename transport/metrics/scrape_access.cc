#include "transport/metrics/scrape_access.h"

#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/file_util.h"

namespace tessera::metrics {
namespace {

constexpr std::size_t kMinTokenBytes = 16;
constexpr std::size_t kMaxTokenBytes = 4096;

// Compares without stopping at the first difference, so the time taken says nothing about how
// much of a guess was right (the length may show; a token's length is no secret).
bool SameSecret(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return diff == 0;
}

}  // namespace

void AddScrapeFlags(CLI::App& app, ScrapeFlags& flags) {
  app.add_option("--metrics-token-file", flags.token_file,
                 "a file (not readable by others) holding the token that /metrics asks for as "
                 "'Authorization: Bearer TOKEN' (Prometheus: authorization.credentials_file); "
                 "without it or --metrics-open, /metrics is served to no one");
  app.add_flag("--metrics-open", flags.open,
               "serve /metrics to anyone who can reach its port (its series name nodes, runs "
               "and users)");
}

absl::StatusOr<ScrapeAccess> ScrapeAccess::Load(const ScrapeFlags& flags) {
  if (flags.open && !flags.token_file.empty()) {
    return absl::InvalidArgumentError(
        "--metrics-open and --metrics-token-file: give one (open serves /metrics to anyone)");
  }
  if (flags.open) return Open();
  if (flags.token_file.empty()) return Closed();

  const std::string where = absl::StrCat("--metrics-token-file ", flags.token_file);
  struct stat st {};
  if (::stat(flags.token_file.c_str(), &st) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": not a regular file"));
  }
  if ((st.st_mode & (S_IROTH | S_IWOTH)) != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: other users may read or write it (mode %04o); chmod o-rw it", where,
                        st.st_mode & 07777));
  }
  auto bytes = ReadWholeFile(flags.token_file);
  if (!bytes.ok())
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", bytes.status().message()));
  std::string token = *std::move(bytes);
  if (absl::EndsWith(token, "\n")) token.pop_back();
  if (token.size() < kMinTokenBytes || token.size() > kMaxTokenBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": the token has ", token.size(), " characters; it needs ",
                     kMinTokenBytes, " to ", kMaxTokenBytes, " (openssl rand -hex 32 makes one)"));
  }
  for (char c : token) {
    if (!absl::ascii_isgraph(static_cast<unsigned char>(c))) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": the token may hold only visible ASCII characters (no spaces or newlines)"));
    }
  }
  return WithToken(std::move(token));
}

absl::Status ScrapeAccess::Check(std::string_view authorization) const {
  switch (kind_) {
    case Kind::kOpen:
      return absl::OkStatus();
    case Kind::kClosed:
      return absl::PermissionDeniedError(
          "this binary serves /metrics to no one: start it with --metrics-token-file FILE "
          "(and send 'Authorization: Bearer TOKEN') or --metrics-open");
    case Kind::kToken:
      break;
  }
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.empty()) {
    return absl::UnauthenticatedError(
        "/metrics needs the scrape token: send 'Authorization: Bearer TOKEN' with the token of "
        "this binary's --metrics-token-file");
  }
  if (authorization.size() < kBearer.size() ||
      !absl::EqualsIgnoreCase(absl::string_view(authorization.data(), kBearer.size()),
                              absl::string_view(kBearer.data(), kBearer.size())) ||
      !SameSecret(authorization.substr(kBearer.size()), token_)) {
    return absl::UnauthenticatedError(
        "/metrics: the scrape token sent is not this binary's (--metrics-token-file)");
  }
  return absl::OkStatus();
}

std::string_view ScrapeAccess::Who() const {
  switch (kind_) {
    case Kind::kOpen:
      return "anyone";
    case Kind::kToken:
      return "holders of the scrape token";
    case Kind::kClosed:
      break;
  }
  return "no one";
}

}  // namespace tessera::metrics
