#pragma once
// The `local` integration's files, packed by `mcli run -f` on the submitting machine: `path`
// (a file or folder, relative to the current folder) becomes a gzip tar whose entries start
// with the integration's target (their place in the rank's working folder), put in the spec as
// `archive` (base64). The node unpacks it before the command (worker/daemon/integration_script.h).

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "tessera/v1/run_spec.pb.h"

namespace tessera::cli {

struct PackedFiles {
  std::string archive;  // gzip tar
  int entries = 0;
  int skipped = 0;    // sockets, devices, FIFOs: not packed
  int64_t bytes = 0;  // of the files' contents
};

// Packs `path` (symbolic links kept as links, not followed) under `target`. Fails, naming the
// path, when it cannot be read or the archive would pass `max_bytes`.
absl::StatusOr<PackedFiles> PackLocalFiles(const std::string& path, const std::string& target,
                                           size_t max_bytes);

// Packs the files of every `local` integration of `spec` that has no archive yet. Throws
// CliError (exit 2) naming the integration.
void PackLocalIntegrations(tessera::v1::RunSpec& spec);

}  // namespace tessera::cli
