#pragma once
// Which GPU faults take a node out of service. XIDs are the driver's error codes; those listed
// here mean broken or unreliable hardware (memory errors, a GPU off the bus, NVLink or GSP
// failures), while others (13, 31, 43 ...) are usually the application's own bugs. Throttling
// is recorded but does not cordon by itself: a throttled GPU that matters shows up as a slow
// node in the next sweep.

#include "tessera/v1/health.pb.h"

namespace tessera {

bool IsFatalXid(int xid);
bool IsFatalGpuFault(const v1::GpuFault& fault);

}  // namespace tessera
