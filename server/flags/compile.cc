// kiln-server flags, compile: how models compile (threads, priority, the
// repository loaded at start, checked kernels). One file per group: --help
// lists each file's flags under its name.
#include <cstdint>
#include <string>
#include <vector>

#include "absl/flags/flag.h"

ABSL_FLAG(int, compile_threads, 2, "kernels of one model compiled at once");
ABSL_FLAG(int, compile_nice, 10,
          "compiles run this much nicer (lower priority) than inference, 0..19");
ABSL_FLAG(std::string, model_repository, "",
          "directory of NAME/VERSION/model.onnx (Triton's layout) loaded at start");
ABSL_FLAG(std::string, model_control_mode, "none",
          "Triton's model control for --model-repository: none (every model loads at start; "
          "RepositoryModelLoad/Unload refused), explicit (the --load-model ones load at start; "
          "the RPCs load and unload), poll (every model loads at start, then the repository is "
          "rescanned every --repository-poll-secs and followed; the RPCs refused)");
ABSL_FLAG(std::vector<std::string>, load_model, {},
          "with --model-control-mode=explicit: a repository model to load at start (repeatable "
          "or comma-separated; * for every model)");
ABSL_FLAG(int, repository_poll_secs, 15,
          "with --model-control-mode=poll: seconds between rescans of the repository");
ABSL_FLAG(bool, kernel_bounds_checks, false,
          "every compile's kernels check each load and store against its buffer; an access "
          "outside is not made and the call fails INTERNAL naming the kernel (slower: for "
          "hunting memory errors in generated code)");
