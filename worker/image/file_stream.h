// Bytes to and from spool files, for the image unpackers: a sink of bytes, a whole write, a
// file read in large pieces. Only Abseil (the layer fuzzer builds it alone).
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "absl/status/status.h"

namespace tessera::worker::image {

using ByteSink = std::function<absl::Status(const char* data, size_t size)>;

// Writes all of `data` to `fd` (a spool file), retrying short writes.
absl::Status WriteAll(int fd, const char* data, size_t size);
// Reads the file at `path` in large pieces into `sink`, until its end or the sink's error.
absl::Status StreamFile(const std::string& path, const ByteSink& sink);

}  // namespace tessera::worker::image
