#pragma once
// A folder for one engine test, the tessera-train configs it writes there, and the check that
// every rank of a job exited 0.
#include <catch2/catch.hpp>
#include <fstream>
#include <string>

#include "absl/strings/str_replace.h"
#include "tests/support/engine_job.h"
#include "tests/support/temp_dir.h"

namespace tessera::testing {

// A test's folder, with the configs it writes there.
struct Scratch {
  TempDir dir{"tessera-engine-test"};
  const std::string& path = dir.path;
  // `extra` is appended; `model` replaces the model's line.
  std::string Config(const std::string& name, const std::string& save_folder,
                     const std::string& extra = "",
                     const std::string& model =
                         "{preset: tiny, d_model: 64, n_heads: 4, "
                         "n_layers: 2}") const {
    const std::string file = path + "/" + name + ".yaml";
    std::ofstream(file) << absl::StrReplaceAll(R"(
model: MODEL
data: {path: DATA, shuffle_seed: 7, num_canonical_nodes: 2}
optimizer: {lr: 3.0e-3, weight_decay: 0.1}
scheduler: {t_warmup: 5ba, alpha_f: 0.1}
max_duration: 60ba
global_train_batch_size: 8
gradient_clipping: 1.0
save_folder: SAVE
save_interval: 10ba
log_interval: 1
threads: 1
)",
                                               {{"MODEL", model},
                                                {"DATA", LicenceDataset()},
                                                {"SAVE", save_folder}})
                        << extra;
    return file;
  }
};

inline void RequireAllExitedZero(EngineJob& job, int world) {
  const auto codes = job.Wait();
  for (int r = 0; r < world; ++r) {
    INFO("rank " << r << " log:\n" << job.Log(r));
    REQUIRE(codes[static_cast<size_t>(r)] == 0);
  }
}

}  // namespace tessera::testing
