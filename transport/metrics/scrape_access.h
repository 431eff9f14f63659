#pragma once
// Who may read a binary's /metrics. Its series name nodes, runs and users, so by default no one
// may: the operator gives a scrape token (--metrics-token-file, which Prometheus sends as
// `authorization: {credentials_file: ...}`), or opts out with --metrics-open. /healthz stays
// open to anyone who can reach the port (a liveness probe carries no token and learns nothing).
//
//   metrics::ScrapeFlags flags;                 // on the command line
//   metrics::AddScrapeFlags(app, flags);
//   auto access = metrics::ScrapeAccess::Load(flags);  // the token read once, at start
//   if (!access.ok()) return access.status();
//   absl::Status ok = access->Check(authorization_header);

#include "base/cli_app_fwd.h"
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tessera::metrics {

struct ScrapeFlags {
  std::string token_file{};  // --metrics-token-file: a file holding the scrape token
  bool open = false;         // --metrics-open: anyone who reaches the port may read
};

// Adds --metrics-token-file and --metrics-open.
void AddScrapeFlags(CLI::App& app, ScrapeFlags& flags);

class ScrapeAccess {
 public:
  // Nobody may read (the default when neither flag is given).
  static ScrapeAccess Closed() { return ScrapeAccess(Kind::kClosed, ""); }
  // Anyone may read.
  static ScrapeAccess Open() { return ScrapeAccess(Kind::kOpen, ""); }
  // Whoever shows `token` as a bearer token may read. The token must be valid (see Load).
  static ScrapeAccess WithToken(std::string token) {
    return ScrapeAccess(Kind::kToken, std::move(token));
  }

  // From the flags: both given, a file that cannot be read, one others may read or write, or a
  // token that is not 16 to 4,096 visible ASCII characters (no spaces; one trailing newline is
  // dropped) is INVALID_ARGUMENT naming the flag and the file.
  static absl::StatusOr<ScrapeAccess> Load(const ScrapeFlags& flags);

  // Whether a request whose Authorization header is `authorization` (empty: none) may read:
  // OK; UNAUTHENTICATED when the token is missing or wrong; PERMISSION_DENIED when no one may.
  // The messages say what to do and never echo what was sent.
  absl::Status Check(std::string_view authorization) const;

  // For the binary's start line: "anyone", "holders of the scrape token", "no one".
  std::string_view Who() const;

 private:
  enum class Kind { kClosed, kOpen, kToken };
  ScrapeAccess(Kind kind, std::string token) : kind_(kind), token_(std::move(token)) {}

  Kind kind_;
  std::string token_;
};

}  // namespace tessera::metrics
