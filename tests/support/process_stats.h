#pragma once
// What /proc says of a process, for the benchmarks and tests that measure what the control plane
// costs: CPU time, threads, resident memory, and PostgreSQL's processes.

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <vector>

namespace tessera::testing {

// CPU time (user + system) of a process, in seconds; 0 when it is gone.
double CpuSeconds(pid_t pid);
// Its threads; 0 when it is gone.
int ThreadsOf(pid_t pid);
// Its parent; -1 when it is gone.
pid_t ParentOf(pid_t pid);
// Its resident memory; 0 when it is gone.
int64_t RssBytes(pid_t pid);
// The PostgreSQL server's processes: the postmaster and its children.
std::vector<pid_t> DatabaseProcesses(pid_t postmaster);
// The CPU seconds of each of them.
std::map<pid_t, double> DatabaseCpu(pid_t postmaster);

}  // namespace tessera::testing
