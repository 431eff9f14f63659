#include "proto/policy/gpu_faults.h"

namespace tessera {

bool IsFatalXid(int xid) {
  switch (xid) {
    case 48:   // double-bit ECC error
    case 61:   // internal micro-controller breakpoint/warning
    case 62:   // internal micro-controller halt
    case 63:   // ECC page retirement or row remapping recording event
    case 64:   // ECC page retirement or row remapper recording failure
    case 74:   // NVLink error
    case 79:   // GPU has fallen off the bus
    case 92:   // high single-bit ECC error rate
    case 94:   // contained ECC error
    case 95:   // uncontained ECC error
    case 119:  // GSP RPC timeout
    case 120:  // GSP error
    case 140:  // unrecovered ECC error
      return true;
    default:
      return false;
  }
}

bool IsFatalGpuFault(const v1::GpuFault& fault) {
  switch (fault.kind()) {
    case v1::GPU_FAULT_KIND_XID:
      return IsFatalXid(fault.xid());
    case v1::GPU_FAULT_KIND_ECC_UNCORRECTABLE:
    case v1::GPU_FAULT_KIND_ROW_REMAP_FAILURE:
    case v1::GPU_FAULT_KIND_FELL_OFF_BUS:
      return true;
    default:
      return false;
  }
}

}  // namespace tessera
