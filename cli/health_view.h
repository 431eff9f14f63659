#pragma once
// How mcli shows health sweeps and check results.

#include <ostream>

#include "tessera/v1/health.pb.h"

namespace tessera::cli {

// "compute 1.23 TFLOP/s" or "busbw 4.56 GB/s at 64 MiB" or the error.
std::string HealthFigures(const tessera::v1::HealthCheckResult& result);
void PrintHealthResults(
    std::ostream& out,
    const google::protobuf::RepeatedPtrField<tessera::v1::HealthCheckResult>& results,
    const char* indent = "");
void PrintSweeps(std::ostream& out,
                 const google::protobuf::RepeatedPtrField<tessera::v1::Sweep>& sweeps);
void PrintSweep(std::ostream& out, const tessera::v1::GetSweepResponse& sweep);

}  // namespace tessera::cli
