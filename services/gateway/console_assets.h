#pragma once
// The web console's files, served by the gateway beside the REST API: every file of one flat
// folder (the console's HTML, scripts and styles, bundled there by the build from
// services/gateway/console) is read into memory once, when the gateway starts, so a request
// never touches the file system and no path from a client ever reaches it.
//
//   GET /assets/NAME   the file NAME of the folder (404 when there is none)
//   GET /anything-else that is not under /api/: index.html, so that the console's own paths
//                      (/runs/train-1, /nodes) load the page, which then routes them itself
//
// Each answer carries an ETag (a hash of the content; If-None-Match gets a 304), `no-cache` so
// a new console is picked up at once, and a strict Content-Security-Policy: scripts and styles
// from the gateway only, no inline script, no frames. The files are public (the console's code);
// what they show comes from the API, which checks the API key of every call.

#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "services/gateway/http_types.h"

namespace tessera::gateway {

class ConsoleAssets {
 public:
  // Bounds on what a folder may hold: the console is a few hundred KiB.
  static constexpr std::size_t kMaxFiles = 256;
  static constexpr std::size_t kMaxTotalBytes = 32u << 20;

  // Reads the folder's regular files (not its subfolders). An error names the folder and what is
  // wrong with it: missing, unreadable, without index.html, or over the bounds above.
  static absl::StatusOr<std::shared_ptr<const ConsoleAssets>> Load(const std::string& folder);

  // The folder a build or an installation puts the console in, beside the running binary
  // (BIN/../share/tessera/console), when it holds an index.html; nullopt otherwise.
  static std::optional<std::string> DefaultFolder();

  // What a --console-dir flag names: "auto" is DefaultFolder(), or no console (with a warning
  // in the log) when there is none; "none" is no console; anything else is that folder.
  // Returns the folder for GatewayOptions::console_dir (empty: no console).
  static std::string ResolveFlag(const std::string& flag);
  static constexpr char kFlagHelp[] =
      "the web console's files: a folder, 'auto' (BIN/../share/tessera/console, where the build "
      "puts them, if there) or 'none'";

  // The answer to a GET of `path` (no query) outside /api/, given the request's If-None-Match
  // header (empty when absent).
  Response Serve(std::string_view path, std::string_view if_none_match) const;

  const std::string& folder() const { return folder_; }
  std::size_t file_count() const { return files_.size(); }

 private:
  struct File {
    std::string content;
    std::string content_type;
    std::string etag;  // quoted, as sent
  };
  Response Answer(const File& file, std::string_view if_none_match) const;

  std::string folder_;
  std::map<std::string, File, std::less<>> files_;  // by file name
};

// The Content-Type for a file name, from its extension; application/octet-stream when unknown.
std::string ContentTypeForFile(std::string_view name);

// The headers every console answer carries (the security policy among them).
void AddConsoleHeaders(Response& response);

}  // namespace tessera::gateway
