#include "client/kiln_cli.h"

#include <string>

#include "client/cli_app.h"

namespace kiln::client {
namespace {

// How to reach the server; every command that talks to one takes these.
void AddConnectionFlags(CLI::App* app) {
  const std::string group = "Connection";
  AddValue(app, "server", "HOST:PORT", "The kiln-server to talk to (default localhost:50051)")
      ->group(group);
  AddValue(app, "tls-ca", "CA.pem", "Use TLS, trusting this CA")->group(group);
  AddValue(app, "tls-cert", "CERT.pem", "Client certificate (mutual TLS, with --tls-key)")
      ->group(group);
  AddValue(app, "tls-key", "KEY.pem", "Client private key (mutual TLS)")->group(group);
  AddValue(app, "token", "TOKEN", "Bearer token (default $KILN_TOKEN)")->group(group);
}

void AddJson(CLI::App* app) {
  AddSwitch(app, "json", "Print the full result as JSON (see README, kiln --json output)");
}

// Dynamic batching (Triton's): concurrent requests run as one.
void AddBatchingFlags(CLI::App* app) {
  const std::string group = "Dynamic batching";
  AddValue(app, "max-batch-size", "N", "Largest batch the server forms")->group(group);
  AddRepeated(app, "preferred-batch-size", "N", "A batch size the server runs at once")
      ->group(group);
  AddValue(app, "max-queue-delay-us", "US", "Longest a request waits for a batch")->group(group);
}

// Sizes a symbolic dim may take and the shapes compiled at load.
void AddSymbolFlags(CLI::App* app) {
  const std::string group = "Symbolic shapes";
  AddRepeated(app, "symbol-range", "SYMBOL=MIN:MAX", "Sizes a symbolic dim may take")->group(group);
  AddRepeated(app, "eager-shape", "SYMBOL=N[,SYMBOL=N...]", "A shape compiled at load")
      ->group(group);
  AddSwitch(app, "exact-shapes-only",
            "Never serve a new size from a larger compiled one while it compiles")
      ->group(group);
}

CLI::App* AddCommand(CLI::App* app, const std::string& name, const std::string& summary,
                     const std::string& example) {
  CLI::App* command = app->add_subcommand(name, summary);
  SetExample(command, example);
  AddConnectionFlags(command);
  return command;
}

}  // namespace

std::unique_ptr<CLI::App> NewKilnCli() {
  std::unique_ptr<CLI::App> app = NewCliApp("kiln", "kiln: the Kiln inference server's client.");
  app->footer(
      "Run 'kiln COMMAND --help' for a command's flags and an example.\n"
      "FILE is a Kiln graph (.pbtxt text or binary protobuf) or an ONNX model (.onnx).\n"
      "Flags may be spelt with dashes or underscores (--input-shape, --input_shape).");
  AddConnectionFlags(app.get());

  CLI::App* compile = AddCommand(app.get(), "compile", "Compile a model and serve it",
                                 "kiln compile resnet18.onnx --input-shape input=1x3x224x224");
  AddPositionals(compile, "FILE", "The model: .onnx, or a Kiln graph (.pbtxt or binary)", 1, 1);
  AddValue(compile, "name", "NAME", "Model name (default: an ONNX file's stem, or the graph's)");
  AddValue(compile, "opt-level", "N", "Optimisation level");
  AddRepeated(compile, "disable", "PASS", "Skip this pass");
  AddRepeated(compile, "require", "PASS", "Fail unless this pass runs");
  AddValue(compile, "max-fuse-depth", "N", "Longest chain of ops fused into one kernel");
  AddRepeated(compile, "print-ir-after", "PASS|all", "Print the IR after this pass");
  AddRepeated(compile, "input-shape", "INPUT=D1xD2x...",
              "Fix an input's shape (the input must exist)");
  AddSwitch(compile, "replace",
            "Serve it as the next version of a name that serves another model "
            "(otherwise ALREADY_EXISTS)");
  AddSwitch(compile, "upload",
            "Send the model in chunks (UploadModel), as is done anyway over 64 MB");
  AddSwitch(compile, "kernel-bounds-checks",
            "Kernels check every load and store (slower; an access outside fails the call)");
  AddValue(compile, "nchwc", "on|off|auto",
           "Convs in blocked channels (NCHW16c); default auto: where it measures faster");
  AddValue(compile, "winograd", "0|2|3|4",
           "Winograd for 3x3 convs where it pays: F(2x2, 3x3) (2, the default), F(3x3, 3x3) "
           "or F(4x4, 3x3) (3, 4: faster, round ~3x and ~10x more) or none (0)");
  AddBatchingFlags(compile);
  AddSymbolFlags(compile);
  AddJson(compile);

  CLI::App* infer = AddCommand(app.get(), "infer", "Run a loaded model on .npy inputs",
                               "kiln infer mlp --input x=examples/x.npy --json");
  AddPositionals(infer, "NAME", "The loaded model", 1, 1);
  AddRepeated(infer, "input", "INPUT=FILE.npy", "An input's value (the input must exist)");
  AddValue(infer, "output-dir", "DIR", "Also write each output to DIR/OUTPUT.npy");
  AddSwitch(infer, "profile", "Report each kernel's time");
  AddValue(infer, "max-values", "N", "With --json, at most N values per output (default all)");
  AddJson(infer);

  CLI::App* stats = AddCommand(app.get(), "stats", "Kernel cache or timing statistics",
                               "kiln stats timing mlp --json");
  AddPositionals(stats, "WHAT",
                 "'cache' (the kernel cache) or 'timing [NAME]' (every model's, or NAME's)", 1, 2);
  AddJson(stats);

  CLI::App* models =
      AddCommand(app.get(), "models", "List the models being served", "kiln models --json");
  AddJson(models);

  CLI::App* unload = AddCommand(app.get(), "unload", "Stop serving a model", "kiln unload mlp");
  AddPositionals(unload, "NAME", "The loaded model", 1, 1);
  AddJson(unload);

  CLI::App* info =
      AddCommand(app.get(), "info", "The server's version, LLVM, CPU, features and operators",
                 "kiln info --json");
  AddJson(info);

  CLI::App* doctor = AddCommand(
      app.get(), "doctor",
      "Check the server: reachable, versions, CPU, kernel cache health, client/server agreement",
      "kiln doctor --server localhost:50051");
  AddJson(doctor);

  CLI::App* onnx_test = AddCommand(
      app.get(), "onnx-test", "Run ONNX test cases; ends \"N passed, N failed, N unsupported\"",
      "kiln onnx-test onnx_cases/node/test_add --json");
  AddPositionals(onnx_test, "CASE_DIR", "ONNX test case directories (model.onnx, test_data_set_*)",
                 1, -1);
  AddSwitch(onnx_test, "model-tolerance",
            "Compare as for whole models: |got - want| <= 1e-4 * max(1, max |want|)");
  AddJson(onnx_test);

  CLI::App* bench = AddCommand(
      app.get(), "bench",
      "Compile (or take a loaded model), then C clients' latency percentiles and throughput",
      "kiln bench resnet18.onnx --batch 8 --concurrency 4 --iterations 50 --json");
  AddPositionals(bench, "FILE", "The model file (or --model NAME of a loaded one)", 0, 1);
  AddValue(bench, "model", "NAME", "Benchmark this loaded model instead of a FILE");
  AddValue(bench, "batch", "B", "Rows per request (default 1)");
  AddValue(bench, "concurrency", "C", "Requests in flight (default 1)");
  AddValue(bench, "iterations", "N", "Timed requests per client (default 100)");
  AddValue(bench, "warmup", "W", "Untimed requests per client first (default 10)");
  AddSwitch(bench, "exact", "Compile with symbolic dims frozen at the benchmark's shapes");
  AddBatchingFlags(bench);
  AddSymbolFlags(bench);
  AddJson(bench);

  CLI::App* tune = AddCommand(
      app.get(), "tune", "Time each kernel's schedules and record the fastest for this CPU",
      "kiln tune resnet18.onnx --budget 20");
  AddPositionals(tune, "FILE", "The model: .onnx, or a Kiln graph (.pbtxt or binary)", 1, 1);
  AddValue(tune, "budget", "SECONDS", "Tuning time per kernel (default 10)");
  AddValue(tune, "max-candidates", "N", "Schedules timed per kernel besides the default (12)");
  AddValue(tune, "min-gain", "X", "Least speedup recorded (default 1.03; 0: always the fastest)");
  AddRepeated(tune, "input-shape", "INPUT=D1xD2x...", "Fix a symbolic input's shape");
  AddJson(tune);

  CLI::App* kernels = AddCommand(app.get(), "kernels", "List the compiled kernels and their keys",
                                 "kiln kernels --json");
  AddJson(kernels);

  CLI::App* call_kernel =
      AddCommand(app.get(), "call-kernel", "Run one kernel on .npy inputs",
                 "kiln call-kernel 1234567890abcdef --input a.npy --input b.npy --output c.npy");
  AddPositionals(call_kernel, "KEY",
                 "A kernel's cache key, or a unique prefix of at least 8 digits", 1, 1);
  AddRepeated(call_kernel, "input", "FILE.npy", "The kernel's next argument");
  AddValue(call_kernel, "output", "FILE.npy", "Write the output here");
  AddJson(call_kernel);

  CLI::App* bench_kernel = AddCommand(app.get(), "bench-kernel", "Time one kernel",
                                      "kiln bench-kernel 1234567890abcdef --repeat 20");
  AddPositionals(bench_kernel, "KEY",
                 "A kernel's cache key, or a unique prefix of at least 8 digits", 1, 1);
  AddValue(bench_kernel, "number", "N", "Calls per measurement (default 1)");
  AddValue(bench_kernel, "repeat", "R", "Measurements (default 10)");
  AddValue(bench_kernel, "min-repeat-ms", "MS", "Raise N until a measurement takes this long");
  AddValue(bench_kernel, "warmup", "W", "Untimed calls first (default 1)");
  AddRepeated(bench_kernel, "input", "FILE.npy", "An argument (default: pseudorandom)");
  AddJson(bench_kernel);
  return app;
}

}  // namespace kiln::client
