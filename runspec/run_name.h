#pragma once
// Run names: which ones Tessera takes, and how a name that is not one is turned into one the way
// mcli does it.
//
// What mcli does (mosaicml-cli: mcli/utils/utils_string_functions.py, clean_run_name and
// ensure_rfc1123_compatibility; mcli/models/run_config.py calls it on finalizing a run config):
// a name that is already a Kubernetes (RFC 1123) label is kept. Otherwise, unless it is longer
// than 56 characters (63, a label's limit, less mcli's 6-character suffix and its dash), it is
// lower-cased, every character other than a-z, 0-9 and '-' becomes '-', a name that then starts
// with something other than a letter or digit gets a '1' put in front (and loses its last
// character), and one that ends that way has its last character replaced by '1'. mcli warns and
// submits the result. Longer names are refused.
//
// Tessera adds a suffix of up to 8 characters ("-a1b2" ... "-a1b2c3d") to a run's name, so its
// names have at most 54 characters (kMaxRunNameLength): a name that mcli would take with 55 or 56
// characters is cut to 54 (and ends with '1' if the cut leaves a '-' at the end).

#include <string>
#include <string_view>

namespace tessera::spec {

// mcli's limit on a name it will still make valid (a longer one is refused).
inline constexpr std::size_t kMaxMcliRunNameLength = 56;

// 1 to kMaxRunNameLength characters of a-z, 0-9 and '-', starting and ending with a letter or
// digit.
bool IsValidRunName(std::string_view name);

// `name` made valid as mcli makes it (see above), or `name` itself when it is already valid or
// cannot be made valid (empty, or longer than kMaxMcliRunNameLength characters; the validator
// then says why). Characters are counted as Unicode code points, as mcli (Python) counts them;
// each non-ASCII one becomes a single '-'.
std::string NormalizeRunName(std::string_view name);

}  // namespace tessera::spec
