// bench_engine: tessera-train's speed against bounds measured in the same run.
//
//  1. Step time: one optimizer step of the engine (data, forward, backward, clipping, AdamW over
//     the flat buffer) against the same GPT in Python PyTorch (Debian's python3-torch, the same
//     LibTorch), same batch and threads. Target: ratio at most 1.0.
//  2. Checkpoint save throughput: a foreground save of a model's shard (params, exp_avg,
//     exp_avg_sq; written, hashed, flushed, committed) against a plain sequential write + fsync
//     of the same bytes to the same folder. Target: ratio at least 0.8.
//  3. Background save: the time training is blocked by a background save against a foreground
//     save of the same step. Target: at most 0.1.
//  4. Activation checkpointing of every block against none, steps alternated: the step's peak
//     CPU tensor memory beyond what lives between steps (CpuAllocationMeter), target at most
//     0.6; and the step time, target at most 1.4.
//  5. Parameter sharding on 4 ranks (tessera-train processes, Gloo over loopback, a model of
//     --shard-layers blocks), FULL_SHARD (ZeRO-3) against SHARD_GRAD_OP (ZeRO-2), jobs
//     alternated: the median step time, target at most 1.3; the parameter bytes a rank holds
//     between steps, target at most 0.35, and at most during a step.
//  6. Mixture of experts (8 experts, top 2, every block) against a dense model with the same
//     active parameters (an MLP twice as wide), steps alternated. Target: ratio at most 1.5.
//
//  7. In-memory checkpoints on 4 ranks as 2 nodes of 2 (tessera-train processes, the sharded
//     model of 5., each node's memory a folder in /dev/shm): a snapshot every step
//     (memory_checkpoint_interval: 1ba, each shard kept on its node and sent to its buddy's)
//     against none, jobs alternated: the median step time, whose excess is one snapshot's cost;
//     reported as that cost over a step, the fraction of training it takes at intervals of 10
//     and 50 steps (target at most 0.05 at 10), and against a foreground disk save of the same
//     job's shards.
//
//   bench_engine [--threads N] [--steps N] [--save-layers N] [--shard-layers N] [--folder DIR]
//                [--only memory]
#include <fcntl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "worker/engine/common/cpu_allocation_meter.h"
#include "worker/engine/data/token_shards.h"
#include "worker/engine/data/tokenizer.h"
#include "worker/engine/train/runtime_tuning.h"
#include "worker/engine/train/trainer.h"

namespace {
namespace fs = std::filesystem;
using namespace tessera::engine;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Shape {
  int64_t vocab = 4096, d_model = 256, heads = 8, layers = 4, seq = 256, batch = 8;
};

// Random tokens, enough for every step.
std::string MakeDataset(const std::string& folder, const Shape& s, int64_t samples) {
  fs::remove_all(folder);
  fs::create_directories(folder);
  ShardWriter w(folder, s.seq + 1, 2, 1 << 12);
  std::mt19937 rng(1);
  std::vector<uint32_t> sample(static_cast<size_t>(s.seq + 1));
  for (int64_t i = 0; i < samples; ++i) {
    for (auto& t : sample) t = rng() % static_cast<uint32_t>(s.vocab);
    if (!w.Add(sample).ok()) std::abort();
  }
  nlohmann::json tokenizer = {{"kind", "byte"}};
  // A vocabulary as large as the model's: the byte tokenizer's is 257, so name the model's.
  if (!w.Finish(tokenizer, samples * (s.seq + 1)).ok()) std::abort();
  return folder;
}

TrainConfig ConfigFor(const Shape& s, const std::string& data, int threads,
                      const std::string& save_folder) {
  TrainConfig c;
  c.model.preset = "custom";
  c.model.d_model = s.d_model;
  c.model.n_heads = s.heads;
  c.model.n_layers = s.layers;
  c.model.max_seq_len = s.seq;
  c.model.vocab_size = s.vocab;
  c.data_path = data;
  c.global_train_batch_size = s.batch;
  c.max_duration = TrainDuration{1000, TrainDuration::Unit::kBatches};
  c.threads = threads;
  c.save_folder = save_folder;
  c.autoresume = false;
  c.log_interval = 1000000;
  return c;
}

// The bound: the same bytes written the way a save writes a file (a new file under a temporary
// name, fsync, renamed over the previous one), without hashing, manifest or commit.
double PlainWrite(const std::string& path, const std::vector<char>& bytes) {
  const auto start = Clock::now();
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n =
        ::write(fd, bytes.data() + done, std::min<size_t>(8 << 20, bytes.size() - done));
    if (n <= 0) std::abort();
    done += static_cast<size_t>(n);
  }
  ::fsync(fd);
  ::close(fd);
  ::rename(tmp.c_str(), path.c_str());
  return Seconds(start);
}

// Rank 0's account of its parameters (trainer.cc): bytes between steps, at most in a step.
std::pair<double, double> HeldBytes(const std::string& log_path) {
  std::ifstream in(log_path);
  std::string line;
  const std::string marker = "between steps, at most ";
  while (std::getline(in, line)) {
    const auto held = line.find("): ");
    const auto at_most = line.find(marker);
    if (line.find("parameters held by rank 0") == std::string::npos || held == std::string::npos ||
        at_most == std::string::npos) {
      continue;
    }
    return {std::stod(line.substr(held + 3)), std::stod(line.substr(at_most + marker.size()))};
  }
  std::cerr << "no parameter account in " << log_path << "\n";
  std::exit(1);
}

// One tessera-train job of `world` ranks (processes) under `fsdp`: the durations of its steps
// after the first three (from rank 0's progress records, one a step), and rank 0's account.
struct ShardedJob {
  std::vector<double> step_seconds;
  double between = 0, peak = 0;
};

// `extra` is appended to the config; with `memory_root`, the ranks sit on nodes of 2, each node
// keeping its in-memory checkpoints in memory_root/node-N.
ShardedJob RunShardedJob(const std::string& folder, const Shape& s, const std::string& data,
                         const std::string& fsdp, int world, int steps,
                         const std::string& extra = "", const std::string& memory_root = "") {
  fs::remove_all(folder);
  fs::create_directories(folder);
  const std::string config = folder + "/train.yaml";
  std::ofstream(config) << "model: {preset: tiny, d_model: " << s.d_model
                        << ", n_heads: " << s.heads << ", n_layers: " << s.layers
                        << ", max_seq_len: " << s.seq << ", vocab_size: " << s.vocab
                        << "}\ndata: {path: " << data << "}\nmax_duration: " << steps + 3
                        << "ba\nglobal_train_batch_size: " << s.batch
                        << "\nlog_interval: 1\nthreads: 1\nfsdp: " << fsdp << "\n"
                        << extra;
  std::string command;
  const int port = 20000 + static_cast<int>(::getpid() % 20000);
  for (int r = 0; r < world; ++r) {
    const int per_node = memory_root.empty() ? world : 2;
    if (!memory_root.empty()) {
      absl::StrAppend(&command, "TESSERA_MEMORY_CHECKPOINT_DIR=", memory_root, "/node-",
                      r / per_node, " ");
    }
    absl::StrAppend(&command, "env WORLD_SIZE=", world, " RANK=", r, " LOCAL_RANK=", r % per_node,
                    " LOCAL_WORLD_SIZE=", per_node, " NODE_RANK=", r / per_node,
                    " MASTER_ADDR=127.0.0.1 MASTER_PORT=", port, " TESSERA_PROGRESS_FILE=", folder,
                    "/progress-", r, " ", TESSERA_BIN_DIR, "/tessera-train --config ", config, " >",
                    folder, "/log-", r, " 2>&1 & ");
  }
  command += "wait";
  if (std::system(command.c_str()) != 0) std::abort();
  ShardedJob job;
  std::ifstream progress(folder + "/progress-0");
  std::string line;
  double previous = 0;
  int64_t records = 0;
  while (std::getline(progress, line)) {
    const auto record = nlohmann::json::parse(line);
    const double time = record["time"].get<double>();
    if (++records > 3) job.step_seconds.push_back(time - previous);
    previous = time;
  }
  if (records != steps + 3) {
    std::cerr << "the job in " << folder << " reported " << records << " steps\n";
    std::exit(1);
  }
  std::tie(job.between, job.peak) = HeldBytes(folder + "/log-0");
  return job;
}

// 7. In-memory checkpoints: a snapshot every step against none, on 2 nodes of 2 ranks.
int MemoryCheckpointCost(const std::string& folder, const Shape& s, const std::string& data,
                         int steps, int shard_layers) {
  Shape sharded = s;
  sharded.layers = shard_layers;
  const std::string memory = absl::StrCat("/dev/shm/tessera-bench-engine-", ::getpid());
  const std::string fsdp = "{sharding_strategy: FULL_SHARD}";
  std::vector<double> times[2];
  for (int round = 0; round < 4; ++round) {
    const bool snapshots = round % 2 == 1;
    fs::remove_all(memory);
    ShardedJob job = RunShardedJob(
        folder + "/memory", sharded, data, fsdp, 4, steps,
        absl::StrCat("autoresume: false\nsave_folder: ", folder, "/memory-ckpt-", round, "\n",
                     snapshots ? "memory_checkpoint_interval: 1ba\n" : ""),
        memory);
    times[snapshots].insert(times[snapshots].end(), job.step_seconds.begin(),
                            job.step_seconds.end());
  }
  // The memory after the last job with snapshots: its newest two, 2 nodes' worth of shards.
  int64_t held = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(memory, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file()) held += static_cast<int64_t>(it->file_size());
  }
  fs::remove_all(memory);
  // A foreground disk save of the same job's shards, from its end (a save every step's cost).
  std::vector<double> saves;
  for (int round = 0; round < 2; ++round) {
    ShardedJob job =
        RunShardedJob(folder + "/memory", sharded, data, fsdp, 4, steps,
                      absl::StrCat("autoresume: false\nsave_folder: ", folder, "/save-ckpt-", round,
                                   "\nsave_interval: 1ba\nsave_in_background: false\n"));
    saves.insert(saves.end(), job.step_seconds.begin(), job.step_seconds.end());
  }
  const double plain = Median(times[0]), with = Median(times[1]), saved = Median(saves);
  const double snapshot = std::max(0.0, with - plain), save = std::max(0.0, saved - plain);
  std::printf(
      "in-memory checkpoints on 2 nodes x 2 ranks (%lld layers; %.1f MB in memory, both "
      "nodes, 2 snapshots):\n",
      (long long)sharded.layers, held / 1e6);
  std::printf(
      "  step %.1f ms, with a snapshot every step %.1f ms: a snapshot costs %.1f ms, %.3f "
      "of a step\n",
      plain * 1e3, with * 1e3, snapshot * 1e3, snapshot / plain);
  std::printf("  at every 10 steps %.4f of training (target <= 0.05), at every 50 %.4f\n",
              snapshot / (10 * plain + snapshot), snapshot / (50 * plain + snapshot));
  std::printf("  a foreground disk save of the same shards costs %.1f ms: snapshot / save %.2f\n",
              save * 1e3, save > 0 ? snapshot / save : 0.0);
  fs::remove_all(folder);
  return 0;
}

// 1. Step time against Python PyTorch.
int StepAgainstPython(const Shape& s, const std::string& data, int threads, int steps) {
  double engine_step = 0;
  {
    auto trainer = Trainer::Create(ConfigFor(s, data, threads, ""), RankContext{});
    if (!trainer.ok()) {
      std::cerr << trainer.status() << "\n";
      return 1;
    }
    std::vector<double> times;
    for (int i = 0; i < steps + 3; ++i) {
      const auto start = Clock::now();
      if (!(*trainer)->Step().ok()) return 1;
      if (i >= 3) times.push_back(Seconds(start));
    }
    engine_step = Median(times);
  }
  const std::string python = absl::StrCat(
      "OPENBLAS_NUM_THREADS=", threads, " OMP_NUM_THREADS=", threads, " /usr/bin/python3 ",
      TESSERA_SOURCE_DIR, "/bench/engine/gpt_reference.py --vocab ", s.vocab, " --d-model ",
      s.d_model, " --heads ", s.heads, " --layers ", s.layers, " --seq ", s.seq, " --batch ",
      s.batch, " --threads ", threads, " --steps ", steps);
  FILE* p = ::popen(python.c_str(), "r");
  std::string out;
  char buf[4096];
  while (p != nullptr && std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
  if (p == nullptr || ::pclose(p) != 0) {
    std::cerr << "the Python reference failed: " << out << "\n";
    return 1;
  }
  const double python_step = nlohmann::json::parse(out)["step_seconds"].get<double>();
  std::printf("step time (d_model %lld, %lld layers, seq %lld, batch %lld, %d threads):\n",
              (long long)s.d_model, (long long)s.layers, (long long)s.seq, (long long)s.batch,
              threads);
  std::printf("  tessera-train %.1f ms, Python PyTorch %.1f ms: ratio %.2f (target <= 1.0)\n",
              engine_step * 1e3, python_step * 1e3, engine_step / python_step);
  return 0;
}

// 4. Activation checkpointing, alternated with the same model without it.
int ActivationCheckpointingCost(const Shape& s, const std::string& data, int threads, int steps) {
  auto& meter = CpuAllocationMeter::Install();
  TrainConfig with = ConfigFor(s, data, threads, "");
  with.activation_checkpointing_interval = 1;
  auto plain = Trainer::Create(ConfigFor(s, data, threads, ""), RankContext{});
  auto checkpointed = Trainer::Create(with, RankContext{});
  if (!plain.ok() || !checkpointed.ok()) {
    std::cerr << (plain.ok() ? checkpointed.status() : plain.status()) << "\n";
    return 1;
  }
  std::vector<double> times[2], peaks[2];
  for (int i = 0; i < 2 * (steps + 3); ++i) {
    Trainer& t = i % 2 == 0 ? **plain : **checkpointed;
    const int64_t before = meter.live_bytes();
    meter.ResetPeak();
    const auto start = Clock::now();
    if (!t.Step().ok()) return 1;
    if (i >= 6) {
      times[i % 2].push_back(Seconds(start));
      peaks[i % 2].push_back(static_cast<double>(meter.peak_bytes() - before));
    }
  }
  const double peak_plain = Median(peaks[0]), peak_ckpt = Median(peaks[1]);
  const double time_plain = Median(times[0]), time_ckpt = Median(times[1]);
  std::printf("activation checkpointing (every block of %lld):\n", (long long)s.layers);
  std::printf("  step peak memory %.1f MB, without %.1f MB: ratio %.2f (target <= 0.6)\n",
              peak_ckpt / 1e6, peak_plain / 1e6, peak_ckpt / peak_plain);
  std::printf("  step %.1f ms, without %.1f ms: ratio %.2f (target <= 1.4)\n", time_ckpt * 1e3,
              time_plain * 1e3, time_ckpt / time_plain);
  return 0;
}

// 6. A mixture of experts against the dense model with its active parameters, alternated.
int MixtureOfExpertsCost(const Shape& s, const std::string& data, int threads, int steps) {
  TrainConfig moe = ConfigFor(s, data, threads, "");
  moe.model.moe_num_experts = 8;
  moe.model.moe_top_k = 2;
  TrainConfig dense = ConfigFor(s, data, threads, "");
  dense.model.mlp_ratio = 2 * moe.model.mlp_ratio;
  auto experts = Trainer::Create(moe, RankContext{});
  auto wide = Trainer::Create(dense, RankContext{});
  if (!experts.ok() || !wide.ok()) {
    std::cerr << (experts.ok() ? wide.status() : experts.status()) << "\n";
    return 1;
  }
  std::vector<double> times[2];
  for (int i = 0; i < 2 * (steps + 3); ++i) {
    Trainer& t = i % 2 == 0 ? **wide : **experts;
    const auto start = Clock::now();
    if (!t.Step().ok()) return 1;
    if (i >= 6) times[i % 2].push_back(Seconds(start));
  }
  const double time_dense = Median(times[0]), time_moe = Median(times[1]);
  std::printf("mixture of experts (8 experts, top 2, every block of %lld):\n", (long long)s.layers);
  std::printf(
      "  step %.1f ms, dense with the same active parameters %.1f ms: ratio %.2f "
      "(target <= 1.5)\n",
      time_moe * 1e3, time_dense * 1e3, time_moe / time_dense);
  return 0;
}

// 5. FULL_SHARD against SHARD_GRAD_OP on 4 ranks, alternated.
int ShardingCost(const std::string& folder, const Shape& s, const std::string& data,
                 int shard_layers, int steps) {
  Shape sharded = s;
  sharded.layers = shard_layers;
  ShardedJob jobs[2];
  const char* strategies[2] = {"{sharding_strategy: SHARD_GRAD_OP}",
                               "{sharding_strategy: FULL_SHARD}"};
  for (int round = 0; round < 4; ++round) {
    const int which = round % 2;
    ShardedJob job = RunShardedJob(folder + "/sharded", sharded, data, strategies[which], 4, steps);
    jobs[which].step_seconds.insert(jobs[which].step_seconds.end(), job.step_seconds.begin(),
                                    job.step_seconds.end());
    jobs[which].between = job.between;
    jobs[which].peak = job.peak;
  }
  const double zero2 = Median(jobs[0].step_seconds), zero3 = Median(jobs[1].step_seconds);
  std::printf("parameter sharding on 4 ranks (%lld layers, %.1f MB of parameters):\n",
              (long long)sharded.layers, jobs[0].between / 1e6);
  std::printf("  FULL_SHARD step %.1f ms, SHARD_GRAD_OP %.1f ms: ratio %.2f (target <= 1.3)\n",
              zero3 * 1e3, zero2 * 1e3, zero3 / zero2);
  std::printf(
      "  parameters per rank between steps %.2f MB against %.2f MB: ratio %.2f (target <= "
      "0.35); at most during a step %.2f MB: ratio %.2f\n",
      jobs[1].between / 1e6, jobs[0].between / 1e6, jobs[1].between / jobs[0].between,
      jobs[1].peak / 1e6, jobs[1].peak / jobs[0].peak);
  return 0;
}

// 2 and 3. Saves of a larger model's shard.
int SaveCost(const std::string& folder, const Shape& s, const std::string& data, int threads,
             int save_layers) {
  Shape big = s;
  big.layers = save_layers;
  big.d_model = 768;
  big.heads = 12;
  const std::string ckpt = folder + "/ckpt";
  auto trainer = Trainer::Create(ConfigFor(big, data, threads, ckpt), RankContext{});
  if (!trainer.ok()) {
    std::cerr << trainer.status() << "\n";
    return 1;
  }
  const int64_t bytes = (*trainer)->parameters().numel() * 3 * 4;
  std::vector<char> plain(static_cast<size_t>(bytes), 'x');
  fs::create_directories(ckpt);
  std::vector<double> save_times, plain_times, blocked;
  for (int round = 0; round < 6; ++round) {
    // Alternate which goes first: the disk's write-back of one slows the other.
    auto plain_write = [&] { plain_times.push_back(PlainWrite(ckpt + "/plain.bin", plain)); };
    if (round % 2 == 0) plain_write();
    const auto start = Clock::now();
    if (!(*trainer)->Save(false).ok()) return 1;
    save_times.push_back(Seconds(start));
    if (round % 2 == 1) plain_write();
    if (!(*trainer)->Save(true).ok()) return 1;
    blocked.push_back(absl::ToDoubleSeconds((*trainer)->saver()->last_blocked()));
    if (!(*trainer)->saver()->Wait().ok()) return 1;
  }
  const double save = Median(save_times), raw = Median(plain_times), block = Median(blocked);
  std::printf("checkpoint save (%.0f MB: params, exp_avg, exp_avg_sq of %.1fM parameters):\n",
              bytes / 1e6, (*trainer)->parameters().numel() / 1e6);
  std::printf("  save %.0f MB/s, plain write + fsync %.0f MB/s: ratio %.2f (target >= 0.8)\n",
              bytes / save / 1e6, bytes / raw / 1e6, raw / save);
  std::printf(
      "  blocked by a background save %.1f ms, foreground save %.1f ms: ratio %.3f "
      "(target <= 0.1)\n",
      block * 1e3, save * 1e3, block / save);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  EnsurePassiveOpenMpWait(argv);  // as tessera-train does; Python inherits it
  int threads = 2, steps = 20, save_layers = 8, shard_layers = 8;
  std::string folder = "/tmp/tessera-bench-engine", only;
  CLI::App app{"bench_engine: tessera-train's speed against bounds measured in the same run"};
  app.add_option("--threads", threads, "CPU threads of the engine and of Python PyTorch")
      ->capture_default_str();
  app.add_option("--steps", steps, "steps measured of each configuration")->capture_default_str();
  app.add_option("--save-layers", save_layers, "blocks of the model whose shard is saved")
      ->capture_default_str();
  app.add_option("--shard-layers", shard_layers,
                 "blocks of the model sharded on 4 ranks (and snapshotted in memory)")
      ->capture_default_str();
  app.add_option("--folder", folder, "where the data, checkpoints and jobs are written")
      ->capture_default_str();
  app.add_option("--only", only, "memory: the in-memory checkpoints' figure alone")
      ->check(CLI::IsMember({"memory"}));
  CLI11_PARSE(app, argc, argv);
  // A figure of no steps is a median of nothing, and Python's threads must be at least one.
  if (threads < 1 || steps < 1 || save_layers < 1 || shard_layers < 1) {
    std::cerr << "need --threads, --steps, --save-layers and --shard-layers >= 1\n";
    return 2;
  }
  setenv("TESSERA_CACHE_DIR", (folder + "/cache").c_str(), 1);
  TuneAllocatorForTraining();  // as tessera-train does
  Shape s;
  const std::string data = MakeDataset(folder + "/data", s, (steps + 5) * s.batch);
  if (only == "memory") return MemoryCheckpointCost(folder, s, data, steps, shard_layers);

  // Each alternates what it compares where it can (these machines are noisy).
  for (const auto& item : std::vector<std::function<int()>>{
           [&] { return StepAgainstPython(s, data, threads, steps); },
           [&] { return ActivationCheckpointingCost(s, data, threads, steps); },
           [&] { return MixtureOfExpertsCost(s, data, threads, steps); },
           [&] { return ShardingCost(folder, s, data, shard_layers, steps); },
           [&] { return SaveCost(folder, s, data, threads, save_layers); }}) {
    if (const int rc = item(); rc != 0) return rc;
  }
  fs::remove_all(folder);
  return 0;
}
