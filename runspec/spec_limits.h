#pragma once
// Limits and fixed vocabularies of the run spec, shared by the YAML parser and the validator.

#include <array>
#include <cstddef>
#include <string_view>

namespace tessera::spec {

// Inputs larger than this are rejected before they reach the YAML parser.
inline constexpr std::size_t kMaxSpecBytes = 1 << 20;
// The same for a spec sent as JSON (REST), which spells the same spec with more bytes (quotes,
// escapes), up to the gateway's limit on a request body; as YAML it is held to the same limit.
inline constexpr std::size_t kMaxJsonSpecBytes = 4 << 20;
// The document root is at depth 1; a node deeper than this is rejected.
inline constexpr int kMaxNestingDepth = 64;
// Values (mapping keys aside; counting every node an alias expands to) a document may hold.
inline constexpr int kMaxSpecNodes = 200'000;
// Bytes of scalar text (keys included, counting every copy an alias expands to) a document may
// hold. With kMaxSpecNodes this bounds the work and memory of everything after loading.
inline constexpr std::size_t kMaxExpandedTextBytes = 4 << 20;

// The gzip tar of a `local` integration's files, as mcli packs it (base64 in the spec, whose
// whole encoded size stays within kMaxSpecBytes).
inline constexpr std::size_t kMaxLocalArchiveBytes = 512 << 10;

inline constexpr std::size_t kMaxRunNameLength = 54;
inline constexpr int kMaxRetriesLimit = 1000;
// scheduling.retry_on_exit_codes: at most this many codes.
inline constexpr int kMaxRetryExitCodes = 32;

// Set by the platform for every rank; a run may not override them.
inline constexpr std::array<std::string_view, 12> kReservedEnvVars = {
    "RUN_NAME",         "WORLD_SIZE",       "RANK",       "LOCAL_RANK",
    "LOCAL_WORLD_SIZE", "NODE_RANK",        "NUM_NODES",  "MASTER_ADDR",
    "MASTER_PORT",      "RESUMPTION_INDEX", "PARAMETERS", "CUDA_VISIBLE_DEVICES"};

}  // namespace tessera::spec
