#include "worker/engine/train/device_peak.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/file.h>
#include <torch/torch.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "absl/strings/str_cat.h"
#include "base/file_util.h"
#include "base/status_macros.h"

namespace tessera::engine {

void SetComputeThreads(int threads) {
  threads = std::max(1, threads);
  torch::set_num_threads(threads);
  using SetThreads = void (*)(int);
  if (auto set = reinterpret_cast<SetThreads>(::dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) {
    set(threads);
  }
}

double MeasureMatmulFlops(int threads, int n, double seconds) {
  const int before = torch::get_num_threads();
  SetComputeThreads(threads);
  torch::NoGradGuard no_grad;
  auto a = torch::full({n, n}, 0.5f), b = torch::full({n, n}, 0.25f);
  auto c = torch::mm(a, b);  // warm up
  // The best of short intervals: other processes (ranks starting beside this one) only ever
  // slow an interval down, so the best one measures the hardware.
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  const double interval = std::min(0.05, seconds / 5);
  double best = 0;
  while (std::chrono::duration<double>(clock::now() - start).count() < seconds) {
    const auto t = clock::now();
    int64_t count = 0;
    double elapsed = 0;
    do {
      torch::mm_out(c, a, b);
      ++count;
      elapsed = std::chrono::duration<double>(clock::now() - t).count();
    } while (elapsed < interval);
    best =
        std::max(best, 2.0 * n * n * static_cast<double>(n) * static_cast<double>(count) / elapsed);
  }
  SetComputeThreads(before);
  return best;
}

std::string DefaultPeakCachePath() {
  if (const char* dir = std::getenv("TESSERA_CACHE_DIR"); dir != nullptr && *dir != '\0') {
    return absl::StrCat(dir, "/cpu-peak.json");
  }
  const char* home = std::getenv("HOME");
  return absl::StrCat(home != nullptr && *home != '\0' ? home : "/tmp",
                      "/.cache/tessera/cpu-peak.json");
}

absl::StatusOr<double> CpuNodePeakFlops(const std::string& cache_path) {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const std::string key = absl::StrCat("cores-", cores);
  TESSERA_RETURN_IF_ERROR(MakeFolders(std::filesystem::path(cache_path).parent_path().string()));
  const std::string lock_path = cache_path + ".lock";
  const int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return absl::UnavailableError(absl::StrCat(lock_path, ": cannot open"));
  ::flock(fd, LOCK_EX);
  nlohmann::json cache = nlohmann::json::object();
  if (auto text = ReadWholeFile(cache_path); text.ok()) {
    auto parsed = nlohmann::json::parse(*text, nullptr, false);
    if (parsed.is_object()) cache = parsed;
  }
  double peak = 0;
  if (cache.contains(key) && cache[key].is_number() && cache[key].get<double>() > 0) {
    peak = cache[key].get<double>();
  } else {
    peak = MeasureMatmulFlops(static_cast<int>(cores), 512, 0.5);
    cache[key] = peak;
    (void)WriteFileDurably(cache_path, cache.dump() + "\n");
  }
  ::flock(fd, LOCK_UN);
  ::close(fd);
  return peak;
}

}  // namespace tessera::engine
