// kiln-server flags, inference: how inference calls run (kernel threads, CPU
// binding, the polling thread). One file per group: --help lists each file's
// flags under its name.
#include <cstdint>
#include <string>

#include "absl/flags/flag.h"

ABSL_FLAG(int, threads, 0, "threads for kernels' parallel loops (0: one per core)");
ABSL_FLAG(std::string, inference_cpus, "",
          "CPUs the threads running inference are bound to, e.g. 1 or 0-3 (default: unbound; "
          "bound threads share those CPUs when calls arrive concurrently)");
ABSL_FLAG(bool, row_chunks, true,
          "run a batch of a model with a batch axis as slices of fewer rows, side by side on the "
          "threads, where engine/row_chunks.h's rule says the cache it saves pays for the weights "
          "each slice streams again; false: every batch runs whole");
ABSL_FLAG(int, infer_spin_us, 100,
          "> 0: ModelInfer calls arrive on one thread that keeps polling this many us after each "
          "call (lower latency, a busy core meanwhile); 0: gRPC's sync threads");
ABSL_FLAG(int, infer_inline_us, 1000,
          "with --infer_spin_us > 0: the polling thread answers a call itself when the model's "
          "last run took at most this long; longer ones and first-use compiles go to workers");
ABSL_FLAG(int, infer_workers, 4,
          "with --infer_spin_us > 0: threads running the calls the polling thread hands off");
