// kiln-server flags, limits: what one client may ask of the server; past a
// limit the call is RESOURCE_EXHAUSTED naming the flag. One file per group:
// --help lists each file's flags under its name.
#include <cstdint>
#include <string>

#include "absl/flags/flag.h"
#include "server/usable_memory.h"

ABSL_FLAG(int, max_models, 64, "models held at once; more is RESOURCE_EXHAUSTED");
ABSL_FLAG(int64_t, max_loaded_mb, kiln::server::DefaultMaxLoadedBytes() >> 20,
          "MiB loaded models may hold at once: weights, planned intermediates, the largest "
          "kernel's temporaries and code of each model and shape variant. A compile that does not fit first unloads the least "
          "recently used shape variants no call is using (never a model), else is "
          "RESOURCE_EXHAUSTED; a model with one tensor larger than this never loads. Default: "
          "75% of the memory this process may use (physical, or the cgroup's limit), the rest "
          "left for each call's tensors, the kernel cache and the system");
ABSL_FLAG(int, max_shape_variants, 8,
          "shapes of one model with symbolic dims kept compiled (least recently used go first)");
ABSL_FLAG(int64_t, max_upload_mb, 2048,
          "largest model UploadModel takes, in MiB (in chunks; one message stays under "
          "--max-message-mb)");
ABSL_FLAG(int64_t, max_graph_nodes, 200000,
          "nodes (with constants and inputs) a model may have; more is RESOURCE_EXHAUSTED");
ABSL_FLAG(int, max_concurrent_compiles, 2,
          "CompileModel calls running at once; up to 64 more wait their turn (or deadline)");
