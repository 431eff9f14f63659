#include "worker/engine/common/cpu_allocation_meter.h"

#include <c10/core/CPUAllocator.h>

#include <atomic>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace tessera::engine {
namespace {

std::atomic<int64_t> live{0};
std::atomic<int64_t> peak{0};

void Count(int64_t delta) {
  const int64_t now = live.fetch_add(delta) + delta;
  int64_t seen = peak.load();
  while (now > seen && !peak.compare_exchange_weak(seen, now)) {
  }
}

// What each live allocation is: its size and the wrapped allocator's deleter. The pointer is its
// own context (as LibTorch's raw_allocate requires), so the size is looked up by pointer.
struct Allocation {
  int64_t bytes;
  c10::DeleterFnPtr deleter;
};
absl::Mutex allocations_mu;
absl::flat_hash_map<void*, Allocation>& Allocations() {
  static auto* allocations = new absl::flat_hash_map<void*, Allocation>();
  return *allocations;
}

// The wrapped allocator's raw deleter, for memory it gave before the meter was installed and
// that is handed back through ours (raw_deallocate).
std::atomic<c10::DeleterFnPtr> inner_raw_deleter{nullptr};

void Release(void* ptr) {
  Allocation a;
  {
    absl::MutexLock lock(&allocations_mu);
    auto it = Allocations().find(ptr);
    if (it == Allocations().end()) {
      if (auto deleter = inner_raw_deleter.load(); deleter != nullptr) deleter(ptr);
      return;
    }
    a = it->second;
    Allocations().erase(it);
  }
  Count(-a.bytes);
  a.deleter(ptr);
}

class CountingAllocator final : public c10::Allocator {
 public:
  explicit CountingAllocator(c10::Allocator* inner) : inner_(inner) {}
  c10::DataPtr allocate(size_t n) const override {
    c10::DataPtr data = inner_->allocate(n);
    void* ptr = data.get();
    if (ptr == nullptr) return data;  // zero bytes
    // LibTorch's CPU allocator makes the pointer its own context; one that does not cannot be
    // wrapped this way, and is passed through uncounted.
    if (data.get_context() != ptr) return data;
    const c10::Device device = data.device();
    const c10::DeleterFnPtr deleter = data.get_deleter();
    data.release_context();
    {
      absl::MutexLock lock(&allocations_mu);
      Allocations()[ptr] = Allocation{static_cast<int64_t>(n), deleter};
    }
    Count(static_cast<int64_t>(n));
    return {ptr, ptr, &Release, device};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &Release; }

 private:
  c10::Allocator* inner_;
};

}  // namespace

CpuAllocationMeter& CpuAllocationMeter::Install() {
  static CpuAllocationMeter* meter = [] {
    c10::Allocator* inner = c10::GetCPUAllocator();
    inner_raw_deleter.store(inner->raw_deleter());
    // Never destroyed: it stays LibTorch's CPU allocator until the process ends, static
    // destructors included. The highest priority: nothing registered later replaces it.
    auto* allocator = new CountingAllocator(inner);
    c10::SetCPUAllocator(allocator, /*priority=*/255);
    return new CpuAllocationMeter();
  }();
  return *meter;
}

int64_t CpuAllocationMeter::live_bytes() const { return live.load(); }
int64_t CpuAllocationMeter::peak_bytes() const { return peak.load(); }
void CpuAllocationMeter::ResetPeak() { peak.store(live.load()); }

}  // namespace tessera::engine
