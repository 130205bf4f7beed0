// Binding the threads that run inference to a set of CPUs (kiln-server's
// --inference_cpus, as Triton's --host-policy cpu-cores).
//
// Why: gRPC's sync server hands each call to whichever of its threads is
// free, and the scheduler may run that thread on any core, possibly away
// from the L2 that holds the model's weights. Measured on this 2-core machine (MLP, 1
// thread, client round trip p50): one run of three rounds each gave 118-135
// us unbound against 98-103 bound to CPU 1, but later runs were within the
// noise (102.5 against 102.7; 108-159 against 100-143), so it is an option,
// not a default. Bound threads also queue on their CPUs when calls arrive
// concurrently.
#ifndef KILN_SERVER_CPU_AFFINITY_H_
#define KILN_SERVER_CPU_AFFINITY_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kiln::server {

// "1", "0,2", "0-3,6": the CPUs, ascending and without repeats. Empty text is
// an empty list (no binding). INVALID_ARGUMENT for anything else, or for a
// CPU this process may not run on (its sched_getaffinity mask).
absl::StatusOr<std::vector<int>> ParseCpuList(absl::string_view text);

// Binds the calling thread to `cpus` the first time it is called with that
// list on this thread (later calls are a thread-local comparison, and a
// failure is returned once, not retried). No-op for an empty list.
absl::Status BindThisThreadToCpus(const std::vector<int>& cpus);

// BindThisThreadToCpus for an RPC handler: a failure is written to stderr
// (once per thread) and the call goes on unbound.
void BindHandlerThreadOrWarn(const std::vector<int>& cpus, const char* rpc);

}  // namespace kiln::server

#endif  // KILN_SERVER_CPU_AFFINITY_H_
