// Continuous GPU probes. On NVIDIA nodes the probe reads NVML (loaded at run time, like
// discovery): XID errors (as events), uncorrectable ECC errors, row-remap failures, thermal and
// power throttling, and a GPU fallen off the bus. Simulated GPUs report only injected faults, so
// everything above the hardware is tested on machines without GPUs. Faults are reported once,
// when they appear; the worker sends them to the control plane at once.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "tessera/v1/health.pb.h"

namespace tessera::worker {

class GpuProbe {
 public:
  virtual ~GpuProbe() = default;
  // Faults that appeared since the last call.
  virtual std::vector<v1::GpuFault> Poll() = 0;
  virtual bool simulated() const = 0;
};

// Simulated GPUs: healthy until a fault is injected.
class SimulatedGpuProbe final : public GpuProbe {
 public:
  void Inject(v1::GpuFault fault);
  std::vector<v1::GpuFault> Poll() override;
  bool simulated() const override { return true; }

 private:
  absl::Mutex mu_;
  std::vector<v1::GpuFault> pending_ ABSL_GUARDED_BY(mu_);
};

// The NVML entry points the probe uses, as function values so that tests can stand in for the
// driver. Return codes are NVML's (0: success; 15: NVML_ERROR_GPU_IS_LOST).
struct NvmlApi {
  std::function<int(unsigned index, void** device)> device_handle;
  // Uncorrected volatile ECC error count.
  std::function<int(void* device, unsigned long long* count)> uncorrected_ecc;
  std::function<int(void* device, bool* pending, bool* failure)> remapped_rows;
  std::function<int(void* device, unsigned long long* reasons)> throttle_reasons;
  // The next XID event without waiting: returns 0 with the device index and XID, or non-zero
  // when there is none.
  std::function<int(unsigned* device_index, unsigned long long* xid)> next_xid_event;
};

inline constexpr int kNvmlErrorGpuIsLost = 15;
// nvmlClocksThrottleReasons bits.
inline constexpr unsigned long long kThrottleSwThermal = 0x20;
inline constexpr unsigned long long kThrottleHwThermal = 0x40;
inline constexpr unsigned long long kThrottleHwPowerBrake = 0x80;

class NvmlGpuProbe final : public GpuProbe {
 public:
  NvmlGpuProbe(NvmlApi api, int gpu_count, std::string node_name);
  std::vector<v1::GpuFault> Poll() override;
  bool simulated() const override { return false; }

 private:
  struct GpuState {
    unsigned long long ecc = 0;
    bool ecc_known = false;
    bool remap_failed = false;
    bool lost = false;
    bool thermal = false;
    bool power = false;
  };
  v1::GpuFault Fault(int gpu, v1::GpuFaultKind kind, std::string detail) const;

  NvmlApi api_;
  int gpu_count_;
  std::string node_name_;
  std::vector<GpuState> state_;
};

// NVML's API from libnvidia-ml.so.1 (with XID events registered on every GPU); nullopt when the
// library is not there.
std::optional<NvmlApi> LoadNvmlApi(int gpu_count);

}  // namespace tessera::worker
