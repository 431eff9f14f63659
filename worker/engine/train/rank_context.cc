#include "worker/engine/train/rank_context.h"

#include <algorithm>
#include <cctype>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

extern char** environ;

namespace tessera::engine {
namespace {

absl::Status ReadInt(const std::map<std::string, std::string>& env, const char* name, int min,
                     int* out) {
  auto it = env.find(name);
  if (it == env.end() || it->second.empty()) return absl::OkStatus();
  int v = 0;
  if (!absl::SimpleAtoi(it->second, &v) || v < min) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, "=", it->second, ": must be an integer of at least ", min));
  }
  *out = v;
  return absl::OkStatus();
}

}  // namespace

std::map<std::string, std::string> ProcessEnvironment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string kv = *e;
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

absl::StatusOr<RankContext> RankContextFromEnv(const std::map<std::string, std::string>& env) {
  RankContext c;
  for (const auto& [name, min, out] : {std::tuple<const char*, int, int*>{"RANK", 0, &c.rank},
                                       {"WORLD_SIZE", 1, &c.world_size},
                                       {"LOCAL_RANK", 0, &c.local_rank},
                                       {"LOCAL_WORLD_SIZE", 1, &c.local_world_size},
                                       {"NODE_RANK", 0, &c.node_rank},
                                       {"MASTER_PORT", 1, &c.master_port},
                                       {"RESUMPTION_INDEX", 0, &c.resumption_index}}) {
    if (auto st = ReadInt(env, name, min, out); !st.ok()) return st;
  }
  if (c.rank >= c.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("RANK=", c.rank, " is not below WORLD_SIZE=", c.world_size));
  }
  if (c.local_rank >= c.local_world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LOCAL_RANK=", c.local_rank, " is not below LOCAL_WORLD_SIZE=", c.local_world_size));
  }
  if (c.master_port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("MASTER_PORT=", c.master_port, ": not a port"));
  }
  auto get = [&](const char* name) {
    auto it = env.find(name);
    return it == env.end() ? std::string() : it->second;
  };
  if (!get("MASTER_ADDR").empty()) c.master_addr = get("MASTER_ADDR");
  c.run_name = get("RUN_NAME");
  c.run_id = get("RUN_ID");
  if (std::any_of(c.run_id.begin(), c.run_id.end(),
                  [](unsigned char ch) { return std::isspace(ch) || std::iscntrl(ch); })) {
    return absl::InvalidArgumentError("RUN_ID: must not contain spaces or control characters");
  }
  c.parameters_path = get("PARAMETERS");
  c.progress_file = get("TESSERA_PROGRESS_FILE");
  c.memory_checkpoint_dir = get("TESSERA_MEMORY_CHECKPOINT_DIR");
  if (const std::string bytes = get("TESSERA_MEMORY_CHECKPOINT_BYTES");
      !bytes.empty() &&
      (!absl::SimpleAtoi(bytes, &c.memory_checkpoint_bytes) || c.memory_checkpoint_bytes < 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("TESSERA_MEMORY_CHECKPOINT_BYTES=", bytes, ": a number of bytes, please"));
  }
  return c;
}

}  // namespace tessera::engine
