// kiln-server flags, compile: how models compile (threads, priority, the
// repository loaded at start, checked kernels). One file per group: --help
// lists each file's flags under its name.
#include <cstdint>
#include <string>

#include "absl/flags/flag.h"

ABSL_FLAG(int, compile_threads, 2, "kernels of one model compiled at once");
ABSL_FLAG(int, compile_nice, 10,
          "compiles run this much nicer (lower priority) than inference, 0..19");
ABSL_FLAG(std::string, model_repository, "",
          "directory of NAME/VERSION/model.onnx (Triton's layout) loaded at start");
ABSL_FLAG(bool, kernel_bounds_checks, false,
          "every compile's kernels check each load and store against its buffer; an access "
          "outside is not made and the call fails INTERNAL naming the kernel (slower: for "
          "hunting memory errors in generated code)");
