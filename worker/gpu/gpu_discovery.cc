#include "worker/gpu/gpu_discovery.h"

#include <dlfcn.h>

#include <cctype>

#include "absl/strings/str_cat.h"

namespace tessera::worker {
namespace {

// The few NVML entry points used, declared by hand (nvml.h ships with the driver or CUDA,
// neither of which is needed to build).
using NvmlReturn = int;
using NvmlDevice = void*;
struct NvmlMemory {
  unsigned long long total, free, used;
};
using InitFn = NvmlReturn (*)();
using CountFn = NvmlReturn (*)(unsigned int*);
using HandleFn = NvmlReturn (*)(unsigned int, NvmlDevice*);
using NameFn = NvmlReturn (*)(NvmlDevice, char*, unsigned int);
using MemoryFn = NvmlReturn (*)(NvmlDevice, NvmlMemory*);
using ErrorFn = const char* (*)(NvmlReturn);
using DriverVersionFn = NvmlReturn (*)(char*, unsigned int);

template <typename Fn>
Fn Symbol(void* lib, const char* name) {
  return reinterpret_cast<Fn>(dlsym(lib, name));
}

absl::StatusOr<GpuInventory> FromNvml(void* lib) {
  auto init = Symbol<InitFn>(lib, "nvmlInit_v2");
  auto count = Symbol<CountFn>(lib, "nvmlDeviceGetCount_v2");
  auto handle = Symbol<HandleFn>(lib, "nvmlDeviceGetHandleByIndex_v2");
  auto name = Symbol<NameFn>(lib, "nvmlDeviceGetName");
  auto uuid = Symbol<NameFn>(lib, "nvmlDeviceGetUUID");
  auto memory = Symbol<MemoryFn>(lib, "nvmlDeviceGetMemoryInfo");
  auto error = Symbol<ErrorFn>(lib, "nvmlErrorString");
  if (!init || !count || !handle || !name || !uuid || !memory) {
    return absl::FailedPreconditionError("NVML: libnvidia-ml.so.1 lacks the v2 entry points");
  }
  auto fail = [&](const char* what, NvmlReturn rc) {
    return absl::UnavailableError(
        absl::StrCat("NVML ", what, ": ", error ? std::string(error(rc)) : std::to_string(rc)));
  };
  if (NvmlReturn rc = init(); rc != 0) return fail("init", rc);
  unsigned int n = 0;
  if (NvmlReturn rc = count(&n); rc != 0) return fail("device count", rc);
  GpuInventory inv;
  inv.source = "nvml";
  if (auto driver = Symbol<DriverVersionFn>(lib, "nvmlSystemGetDriverVersion")) {
    char version[96] = {};
    if (driver(version, sizeof version) == 0) inv.driver_version = version;
  }
  for (unsigned int i = 0; i < n; ++i) {
    NvmlDevice dev = nullptr;
    if (NvmlReturn rc = handle(i, &dev); rc != 0) return fail("device handle", rc);
    char buf[96] = {};
    v1::Gpu gpu;
    gpu.set_index(static_cast<int>(i));
    if (name(dev, buf, sizeof buf) == 0) gpu.set_model(buf);
    if (uuid(dev, buf, sizeof buf) == 0) gpu.set_uuid(buf);
    NvmlMemory mem{};
    if (memory(dev, &mem) == 0) gpu.set_memory_bytes(static_cast<int64_t>(mem.total));
    inv.gpus.push_back(gpu);
  }
  if (!inv.gpus.empty()) inv.gpu_type = GpuTypeFromModel(inv.gpus[0].model());
  return inv;
}

}  // namespace

std::string GpuTypeFromModel(const std::string& model) {
  // The first word with a digit after the vendor prefix is the family: H100, A100, L40S, V100.
  std::string word;
  for (size_t i = 0; i <= model.size(); ++i) {
    const char c = i < model.size() ? model[i] : ' ';
    if (c == ' ' || c == '-' || c == '_') {
      bool has_digit = false;
      for (char w : word) has_digit = has_digit || std::isdigit(static_cast<unsigned char>(w));
      if (has_digit && std::isalpha(static_cast<unsigned char>(word[0]))) {
        for (char& w : word) w = static_cast<char>(std::tolower(static_cast<unsigned char>(w)));
        return word;
      }
      word.clear();
    } else {
      word += c;
    }
  }
  return "";
}

absl::StatusOr<GpuInventory> DiscoverGpus(int simulate) {
  if (simulate >= 0) {
    GpuInventory inv;
    inv.source = "simulated";
    for (int i = 0; i < simulate; ++i) {
      v1::Gpu gpu;
      gpu.set_index(i);
      gpu.set_model("Simulated GPU");
      gpu.set_uuid(absl::StrCat("GPU-simulated-", i));
      gpu.set_memory_bytes(80LL << 30);
      gpu.set_simulated(true);
      inv.gpus.push_back(gpu);
    }
    if (simulate > 0) inv.gpu_type = "simulated";
    return inv;
  }
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    GpuInventory inv;
    inv.source = absl::StrCat("none (NVML not found: ", dlerror(), ")");
    return inv;
  }
  // The library stays loaded for the health probes; NVML is not meant to be unloaded.
  return FromNvml(lib);
}

}  // namespace tessera::worker
