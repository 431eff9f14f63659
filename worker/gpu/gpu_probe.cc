#include "worker/gpu/gpu_probe.h"

#include <dlfcn.h>

#include "absl/strings/str_cat.h"
#include "base/timestamps.h"

namespace tessera::worker {

void SimulatedGpuProbe::Inject(v1::GpuFault fault) {
  absl::MutexLock lock(&mu_);
  pending_.push_back(std::move(fault));
}

std::vector<v1::GpuFault> SimulatedGpuProbe::Poll() {
  absl::MutexLock lock(&mu_);
  return std::exchange(pending_, {});
}

NvmlGpuProbe::NvmlGpuProbe(NvmlApi api, int gpu_count, std::string node_name)
    : api_(std::move(api)),
      gpu_count_(gpu_count),
      node_name_(std::move(node_name)),
      state_(static_cast<size_t>(gpu_count)) {}

v1::GpuFault NvmlGpuProbe::Fault(int gpu, v1::GpuFaultKind kind, std::string detail) const {
  v1::GpuFault f;
  f.set_node_name(node_name_);
  f.set_gpu_index(gpu);
  f.set_kind(kind);
  f.set_detail(std::move(detail));
  *f.mutable_time() = ToProtoTime(absl::Now());
  return f;
}

std::vector<v1::GpuFault> NvmlGpuProbe::Poll() {
  std::vector<v1::GpuFault> faults;
  for (int i = 0; i < gpu_count_; ++i) {
    GpuState& s = state_[static_cast<size_t>(i)];
    void* dev = nullptr;
    const int rc = api_.device_handle(static_cast<unsigned>(i), &dev);
    if (rc == kNvmlErrorGpuIsLost) {
      if (!s.lost) {
        faults.push_back(Fault(i, v1::GPU_FAULT_KIND_FELL_OFF_BUS, "NVML: GPU is lost"));
      }
      s.lost = true;
      continue;
    }
    if (rc != 0) continue;
    unsigned long long ecc = 0;
    if (api_.uncorrected_ecc && api_.uncorrected_ecc(dev, &ecc) == 0) {
      if (s.ecc_known && ecc > s.ecc) {
        faults.push_back(Fault(i, v1::GPU_FAULT_KIND_ECC_UNCORRECTABLE,
                               absl::StrCat(ecc - s.ecc, " new uncorrectable ECC error(s), ", ecc,
                                            " since the driver loaded")));
      }
      s.ecc = ecc;
      s.ecc_known = true;
    }
    bool pending = false, failure = false;
    if (api_.remapped_rows && api_.remapped_rows(dev, &pending, &failure) == 0) {
      if (failure && !s.remap_failed) {
        faults.push_back(Fault(i, v1::GPU_FAULT_KIND_ROW_REMAP_FAILURE,
                               "row remapping failed: the GPU needs service"));
      }
      s.remap_failed = failure;
    }
    unsigned long long reasons = 0;
    if (api_.throttle_reasons && api_.throttle_reasons(dev, &reasons) == 0) {
      const bool thermal = (reasons & (kThrottleSwThermal | kThrottleHwThermal)) != 0;
      const bool power = (reasons & kThrottleHwPowerBrake) != 0;
      if (thermal && !s.thermal) {
        faults.push_back(Fault(
            i, v1::GPU_FAULT_KIND_THERMAL_THROTTLE,
            absl::StrCat("clocks throttled for temperature (reasons 0x", absl::Hex(reasons), ")")));
      }
      if (power && !s.power) {
        faults.push_back(Fault(i, v1::GPU_FAULT_KIND_POWER_THROTTLE,
                               absl::StrCat("clocks throttled by the power brake (reasons 0x",
                                            absl::Hex(reasons), ")")));
      }
      s.thermal = thermal;
      s.power = power;
    }
  }
  if (api_.next_xid_event) {
    unsigned device = 0;
    unsigned long long xid = 0;
    for (int n = 0; n < 64 && api_.next_xid_event(&device, &xid) == 0; ++n) {
      auto f = Fault(static_cast<int>(device), v1::GPU_FAULT_KIND_XID, absl::StrCat("XID ", xid));
      f.set_xid(static_cast<int>(xid));
      faults.push_back(std::move(f));
    }
  }
  return faults;
}

namespace {

// NVML's declarations, by hand (nvml.h ships with the driver, not needed to build).
struct NvmlEventData {
  void* device;
  unsigned long long event_type;
  unsigned long long event_data;
  unsigned gpu_instance_id;
  unsigned compute_instance_id;
};
constexpr unsigned long long kEventXidCritical = 0x8;
constexpr int kMemoryErrorUncorrected = 1;
constexpr int kVolatileEcc = 0;

}  // namespace

std::optional<NvmlApi> LoadNvmlApi(int gpu_count) {
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return std::nullopt;
  using InitFn = int (*)();
  using HandleFn = int (*)(unsigned, void**);
  using EccFn = int (*)(void*, int, int, unsigned long long*);
  using RemapFn = int (*)(void*, unsigned*, unsigned*, unsigned*, unsigned*);
  using ReasonsFn = int (*)(void*, unsigned long long*);
  using SetCreateFn = int (*)(void**);
  using RegisterFn = int (*)(void*, unsigned long long, void*);
  using WaitFn = int (*)(void*, NvmlEventData*, unsigned);
  using IndexFn = int (*)(void*, unsigned*);
  auto sym = [lib](const char* name) { return dlsym(lib, name); };
  auto init = reinterpret_cast<InitFn>(sym("nvmlInit_v2"));
  auto handle = reinterpret_cast<HandleFn>(sym("nvmlDeviceGetHandleByIndex_v2"));
  if (init == nullptr || handle == nullptr || init() != 0) return std::nullopt;
  auto ecc = reinterpret_cast<EccFn>(sym("nvmlDeviceGetTotalEccErrors"));
  auto remap = reinterpret_cast<RemapFn>(sym("nvmlDeviceGetRemappedRows"));
  auto reasons = reinterpret_cast<ReasonsFn>(sym("nvmlDeviceGetCurrentClocksThrottleReasons"));
  auto set_create = reinterpret_cast<SetCreateFn>(sym("nvmlEventSetCreate"));
  auto reg = reinterpret_cast<RegisterFn>(sym("nvmlDeviceRegisterEvents"));
  auto wait = reinterpret_cast<WaitFn>(sym("nvmlEventSetWait_v2"));
  auto index = reinterpret_cast<IndexFn>(sym("nvmlDeviceGetIndex"));

  NvmlApi api;
  api.device_handle = [handle](unsigned i, void** dev) { return handle(i, dev); };
  if (ecc) {
    api.uncorrected_ecc = [ecc](void* dev, unsigned long long* count) {
      return ecc(dev, kMemoryErrorUncorrected, kVolatileEcc, count);
    };
  }
  if (remap) {
    api.remapped_rows = [remap](void* dev, bool* pending, bool* failure) {
      unsigned corr = 0, unc = 0, p = 0, f = 0;
      const int rc = remap(dev, &corr, &unc, &p, &f);
      *pending = p != 0;
      *failure = f != 0;
      return rc;
    };
  }
  if (reasons)
    api.throttle_reasons = [reasons](void* dev, unsigned long long* r) { return reasons(dev, r); };
  void* events = nullptr;
  if (set_create && reg && wait && index && set_create(&events) == 0) {
    for (int i = 0; i < gpu_count; ++i) {
      void* dev = nullptr;
      if (handle(static_cast<unsigned>(i), &dev) == 0) (void)reg(dev, kEventXidCritical, events);
    }
    api.next_xid_event = [wait, index, events](unsigned* device, unsigned long long* xid) {
      NvmlEventData data{};
      const int rc = wait(events, &data, 0);
      if (rc != 0) return rc;
      *xid = data.event_data;
      return index(data.device, device);
    };
  }
  return api;
}

}  // namespace tessera::worker
