#include "worker/daemon/fault_injector.h"

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "base/timestamps.h"

namespace tessera::worker {

FaultInjector::FaultInjector(bool allowed, std::string node_name, FaultTargets targets)
    : allowed_(allowed), node_name_(std::move(node_name)), targets_(std::move(targets)) {}

absl::Status FaultInjector::Validate(const v1::InjectFault& f) const {
  if (!allowed_) {
    return absl::FailedPreconditionError(
        absl::StrCat("node ", node_name_,
                     " does not allow fault injection (start its worker with "
                     "--allow-fault-injection)"));
  }
  switch (f.kind()) {
    case v1::FAULT_KIND_XID:
    case v1::FAULT_KIND_ECC:
      if (targets_.simulated_gpus == nullptr) {
        return absl::FailedPreconditionError(absl::StrCat(
            "node ", node_name_, " has real GPUs: xid and ecc faults go to simulated GPUs only"));
      }
      if (f.gpu_index() < 0 || f.gpu_index() >= std::max(1, targets_.gpu_count)) {
        return absl::InvalidArgumentError(absl::StrCat("gpu_index: ", f.gpu_index(),
                                                       " is not one of the node's ",
                                                       targets_.gpu_count, " GPUs"));
      }
      return absl::OkStatus();
    case v1::FAULT_KIND_SLOW:
      if (!(f.factor() > 0 && f.factor() < 1)) {
        return absl::InvalidArgumentError(
            absl::StrCat("factor: a slow node keeps a fraction of its speed, between 0 and 1 (not ",
                         f.factor(), ")"));
      }
      return absl::OkStatus();
    case v1::FAULT_KIND_HANG:
    case v1::FAULT_KIND_CLEAR:
    case v1::FAULT_KIND_CRASH:
    case v1::FAULT_KIND_NETDROP:
      return absl::OkStatus();
    case v1::FAULT_KIND_LINK_DOWN:
      if (!targets_.link_down) {
        return absl::FailedPreconditionError(
            absl::StrCat("node ", node_name_, " runs no canaries: it has no link to take down"));
      }
      if (f.seconds() < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("seconds: ", f.seconds(), " is negative (0: until cleared)"));
      }
      return absl::OkStatus();
    default:
      return absl::InvalidArgumentError(
          "kind: must be xid, ecc, slow, hang, crash, netdrop, link-down or clear");
  }
}

absl::Status FaultInjector::Inject(const v1::InjectFault& f) {
  if (absl::Status st = Validate(f); !st.ok()) return st;
  spdlog::warn("fault injected on {}: {} (factor {}, GPU {})", node_name_,
               v1::FaultKind_Name(f.kind()), f.factor(), f.gpu_index());
  switch (f.kind()) {
    case v1::FAULT_KIND_XID:
    case v1::FAULT_KIND_ECC: {
      v1::GpuFault fault;
      fault.set_node_name(node_name_);
      fault.set_gpu_index(f.gpu_index());
      fault.set_injected(true);
      *fault.mutable_time() = ToProtoTime(absl::Now());
      if (f.kind() == v1::FAULT_KIND_XID) {
        const int xid = f.factor() >= 1 ? static_cast<int>(f.factor()) : 79;
        fault.set_kind(v1::GPU_FAULT_KIND_XID);
        fault.set_xid(xid);
        fault.set_detail(absl::StrCat("XID ", xid, xid == 79 ? " (GPU has fallen off the bus)" : "",
                                      ", injected"));
      } else {
        fault.set_kind(v1::GPU_FAULT_KIND_ECC_UNCORRECTABLE);
        fault.set_detail("1 new uncorrectable ECC error, injected");
      }
      targets_.simulated_gpus->Inject(std::move(fault));
      return absl::OkStatus();
    }
    case v1::FAULT_KIND_SLOW:
      targets_.throttle->SetFactor(f.factor());
      return absl::OkStatus();
    case v1::FAULT_KIND_HANG:
      targets_.throttle->SetFactor(0);
      return absl::OkStatus();
    case v1::FAULT_KIND_CLEAR:
      targets_.throttle->SetFactor(1);
      if (targets_.link_down) targets_.link_down(absl::ZeroDuration());
      return absl::OkStatus();
    case v1::FAULT_KIND_LINK_DOWN:
      targets_.link_down(f.seconds() > 0 ? absl::Seconds(f.seconds()) : absl::InfiniteDuration());
      return absl::OkStatus();
    case v1::FAULT_KIND_NETDROP:
      targets_.drop_network(absl::Seconds(f.seconds() > 0 ? f.seconds() : 30));
      return absl::OkStatus();
    case v1::FAULT_KIND_CRASH:
      targets_.crash();  // does not return
      return absl::OkStatus();
    default:
      return absl::OkStatus();  // Validate refused it
  }
}

}  // namespace tessera::worker
