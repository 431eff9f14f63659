#pragma once
// Sizes in bytes as people write them on command lines and in configs: "4096", "64MiB", "1GiB",
// "2MB" (binary and decimal units, case-insensitive). Used by tessera-canary's --sizes and by
// the health API's --canary-sizes.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tessera {

// One size; errors name the text. At most 1 TiB.
absl::StatusOr<int64_t> ParseByteSize(const std::string& text);
// A comma-separated list of sizes (at least one).
absl::StatusOr<std::vector<int64_t>> ParseByteSizes(const std::string& text);
// The size in the largest binary unit that divides it ("16MiB", "10GiB", "1500B"), so that it
// parses back to the same number.
std::string FormatByteSize(int64_t bytes);

}  // namespace tessera
