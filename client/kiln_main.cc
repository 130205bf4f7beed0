// kiln: the command-line client. Every command takes --server HOST:PORT.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "client/bench_command.h"
#include "client/cli_args.h"
#include "client/element_type.h"
#include "client/kiln_client.h"
#include "client/model_file.h"
#include "client/npy.h"
#include "client/onnx_test_command.h"
#include "client/report_format.h"

namespace kiln::client {
namespace {

constexpr char kUsage[] = R"(usage: kiln COMMAND [--server HOST:PORT] [--tls-ca CA.pem
                    [--tls-cert CERT.pem --tls-key KEY.pem]] [--token TOKEN] ...
  (the token also from $KILN_TOKEN)
  compile FILE [--name NAME] [--opt-level N] [--disable PASS]... [--require PASS]...
               [--max-fuse-depth N] [--print-ir-after PASS|all]...
               [--input-shape INPUT=1x3x224x224]... [--replace] [--upload] [--json]
                             --upload: send the model in chunks (UploadModel), as is done
                             anyway for models over 64 MB
                             --replace: serve it as the next version of a name that
                             serves another model (otherwise ALREADY_EXISTS)
               [--max-batch-size N [--preferred-batch-size N]... [--max-queue-delay-us US]]
                             dynamic batching (Triton's): concurrent requests run as one
               [--symbol-range SYMBOL=MIN:MAX]... [--eager-shape SYMBOL=N[,SYMBOL=N]...]...
               [--exact-shapes-only]
                             sizes a symbolic dim may take; shapes compiled at load; no
                             serving a new batch size from a larger one while it compiles
               [--kernel-bounds-checks]
                             kernels check every load and store against its buffer
                             (slower; an access outside fails the call, naming the kernel)
  infer NAME --input INPUT=FILE.npy ... [--output-dir DIR] [--profile] [--json]
  stats cache [--json]
  stats timing [NAME] [--json]
  models [--json]
  unload NAME
  info [--json]
  onnx-test CASE_DIR... [--model-tolerance] [--json]
                             ONNX test cases; ends "N passed, N failed, N unsupported"
  bench FILE|--model NAME [--batch B] [--concurrency C] [--iterations N] [--warmup W]
             [--exact] [--json]
             [--max-batch-size N [--preferred-batch-size N]... [--max-queue-delay-us US]]
                             compile (or take a loaded model), then C clients' latency
                             percentiles and throughput; --exact freezes symbolic dims
  kernels [--json]
  call-kernel KEY --input FILE.npy ... [--output FILE.npy] [--json]
  bench-kernel KEY [--number N] [--repeat R] [--min-repeat-ms MS] [--warmup W]
               [--input FILE.npy]... [--json]
KEY is a kernel's cache key or a unique prefix of at least 8 digits (see `kiln kernels`).
FILE is a Kiln graph (.pbtxt text or binary protobuf) or an ONNX model (.onnx).
)";

// Prints the failure as every kiln command does and returns the exit status.
int Fail(const absl::Status& status) { return PrintFailure("kiln", status); }

int Usage(const std::string& problem) {
  if (!problem.empty()) std::cerr << "kiln: " << problem << "\n";
  std::cerr << kUsage;
  return 2;
}

std::string SafeFileName(const std::string& name) {
  std::string out = name;
  for (char& c : out) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) c = '_';
  }
  return out;
}

// --symbol-range, --eager-shape and --exact-shapes-only into the compile options.
absl::Status ParseSymbolFlags(const CliArgs& args, kiln::v1::CompileOptions* options) {
  if (args.Has("exact-shapes-only")) options->set_exact_shapes_only(true);
  for (const std::string& spec : args.GetAll("symbol-range")) {
    // batch=1:32
    std::vector<std::string> parts = absl::StrSplit(spec, absl::ByAnyChar("=:"));
    int64_t min = 0, max = 0;
    if (parts.size() != 3 || parts[0].empty() || !absl::SimpleAtoi(parts[1], &min) ||
        !absl::SimpleAtoi(parts[2], &max)) {
      return absl::InvalidArgumentError("--symbol-range wants SYMBOL=MIN:MAX, e.g. batch=1:32");
    }
    kiln::v1::SymbolRange& range = (*options->mutable_symbol_ranges())[parts[0]];
    range.set_min(min);
    range.set_max(max);
  }
  for (const std::string& spec : args.GetAll("eager-shape")) {
    // batch=8,seq=128
    kiln::v1::SymbolSizes* shape = options->add_eager_shapes();
    for (absl::string_view binding : absl::StrSplit(spec, ',')) {
      std::vector<std::string> parts = absl::StrSplit(binding, '=');
      int64_t size = 0;
      if (parts.size() != 2 || parts[0].empty() || !absl::SimpleAtoi(parts[1], &size)) {
        return absl::InvalidArgumentError("--eager-shape wants SYMBOL=N[,SYMBOL=N...]");
      }
      (*shape->mutable_sizes())[parts[0]] = size;
    }
  }
  return absl::OkStatus();
}

// --max-batch-size, --preferred-batch-size and --max-queue-delay-us into
// the compile options; the server judges the values.
absl::Status ParseBatchingFlags(const CliArgs& args, kiln::v1::CompileOptions* options) {
  const bool any = args.flags.count("max-batch-size") || args.flags.count("preferred-batch-size") ||
                   args.flags.count("max-queue-delay-us");
  if (!any) return absl::OkStatus();
  kiln::v1::DynamicBatching* batching = options->mutable_dynamic_batching();
  int64_t v = 0;
  if (args.flags.count("max-batch-size")) {
    if (!absl::SimpleAtoi(args.Get("max-batch-size"), &v)) {
      return absl::InvalidArgumentError("--max-batch-size takes a number");
    }
    batching->set_max_batch_size(v);
  }
  for (const std::string& p : args.GetAll("preferred-batch-size")) {
    if (!absl::SimpleAtoi(p, &v)) {
      return absl::InvalidArgumentError("--preferred-batch-size takes a number");
    }
    batching->add_preferred_batch_size(v);
  }
  if (args.flags.count("max-queue-delay-us")) {
    if (!absl::SimpleAtoi(args.Get("max-queue-delay-us"), &v)) {
      return absl::InvalidArgumentError("--max-queue-delay-us takes a number");
    }
    batching->set_max_queue_delay_microseconds(v);
  }
  return absl::OkStatus();
}

int Compile(KilnClient& client, const CliArgs& args) {
  if (args.positional.size() != 2) return Usage("compile takes one FILE");
  const std::string& path = args.positional[1];
  kiln::v1::CompileModelRequest request;
  if (absl::Status loaded = LoadModelInto(path, &request); !loaded.ok()) return Fail(loaded);
  std::string name = args.Get("name");
  if (name.empty() && absl::EndsWith(path, ".onnx")) {
    // ONNX graphs are often unnamed: default to the file's stem, with what a
    // model name may not hold replaced.
    name = path.substr(path.find_last_of('/') + 1);
    name = SafeFileName(name.substr(0, name.size() - 5));
    if (!name.empty() && (name[0] == '.' || name[0] == '-')) name[0] = '_';
  }
  request.set_model_name(name);
  request.set_replace(args.Has("replace"));
  kiln::v1::CompileOptions* options = request.mutable_options();
  if (!args.Get("opt-level").empty()) {
    int level;
    if (!absl::SimpleAtoi(args.Get("opt-level"), &level)) return Usage("--opt-level takes a number");
    options->set_opt_level(level);
  }
  if (!args.Get("max-fuse-depth").empty()) {
    int depth;
    if (!absl::SimpleAtoi(args.Get("max-fuse-depth"), &depth)) {
      return Usage("--max-fuse-depth takes a number");
    }
    options->set_max_fuse_depth(depth);
  }
  for (const std::string& p : args.GetAll("disable")) options->add_disabled_passes(p);
  for (const std::string& p : args.GetAll("require")) options->add_required_passes(p);
  for (const std::string& p : args.GetAll("print-ir-after")) options->add_print_ir_after(p);
  if (args.Has("kernel-bounds-checks")) options->set_kernel_bounds_checks(true);
  for (const std::string& spec : args.GetAll("input-shape")) {
    // NAME=1x3x224x224
    const size_t eq = spec.find('=');
    if (eq == std::string::npos) return Usage("--input-shape wants NAME=D1xD2x...");
    kiln::v1::IntList& dims = (*options->mutable_input_shapes())[spec.substr(0, eq)];
    for (absl::string_view d : absl::StrSplit(spec.substr(eq + 1), 'x')) {
      int64_t v;
      if (!absl::SimpleAtoi(d, &v)) return Usage("--input-shape wants NAME=D1xD2x...");
      dims.add_values(v);
    }
  }
  if (absl::Status batching = ParseBatchingFlags(args, options); !batching.ok()) {
    return Usage(std::string(batching.message()));
  }
  if (absl::Status symbols = ParseSymbolFlags(args, options); !symbols.ok()) {
    return Usage(std::string(symbols.message()));
  }
  // Progress goes to stderr when it is a terminal and the compile takes more
  // than a moment; scripts and pipes see only the report.
  const bool tty = ::isatty(STDERR_FILENO);
  const auto start = std::chrono::steady_clock::now();
  auto on_progress = [&](const kiln::v1::CompileProgress& p) {
    if (!tty || std::chrono::steady_clock::now() - start < std::chrono::milliseconds(300)) return;
    if (p.kind() == kiln::v1::CompileProgress::KERNEL_DONE) {
      std::cerr << "\r[" << p.kernels_done() << "/" << p.kernels_total() << "] " << p.name()
                << " (" << p.detail() << ")\033[K" << std::flush;
    } else {
      std::cerr << "\r" << p.name() << " " << p.detail() << "\033[K" << std::flush;
    }
  };
  // A model that would not fit one message goes up in chunks (UploadModel).
  constexpr int64_t kUploadAboveBytes = int64_t{64} << 20;
  const bool upload = args.Has("upload") ||
                      static_cast<int64_t>(request.ByteSizeLong()) > kUploadAboveBytes;
  auto response =
      upload ? client.Upload(std::move(request)) : client.CompileWithProgress(request, on_progress);
  if (tty && std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(300)) {
    std::cerr << "\r\033[K" << std::flush;
  }
  if (!response.ok()) return Fail(response.status());
  std::cout << (args.Has("json") ? ToJson(*response) + "\n" : FormatCompileReport(*response));
  return 0;
}

// NumPy has no bfloat16: a float32 .npy given for a BF16 input is rounded to
// it. Without the model's metadata the inputs go as they are, and the server
// names any datatype that does not fit.
void ConvertForBFloat16Inputs(KilnClient& client, const std::string& model,
                              std::vector<std::pair<std::string, NpyArray>>* inputs) {
  const bool any_fp32 = std::any_of(inputs->begin(), inputs->end(),
                                    [](const auto& in) { return in.second.datatype == "FP32"; });
  if (!any_fp32) return;
  auto meta = client.ModelMetadata(model);
  if (!meta.ok()) return;
  for (auto& [name, array] : *inputs) {
    for (const auto& in : meta->inputs()) {
      if (in.name() == name && in.datatype() == "BF16") array = Float32ToBFloat16(std::move(array));
    }
  }
}

int Infer(KilnClient& client, const CliArgs& args) {
  if (args.positional.size() != 2) return Usage("infer takes one model NAME");
  std::vector<std::pair<std::string, NpyArray>> inputs;
  for (const std::string& spec : args.GetAll("input")) {
    const size_t eq = spec.find('=');
    if (eq == std::string::npos) return Usage("--input wants INPUT=FILE.npy");
    auto array = ReadNpyFile(spec.substr(eq + 1));
    if (!array.ok()) return Fail(array.status());
    inputs.push_back({spec.substr(0, eq), *std::move(array)});
  }
  ConvertForBFloat16Inputs(client, args.positional[1], &inputs);
  auto result = client.Infer(args.positional[1], inputs, args.Has("profile"));
  if (!result.ok()) return Fail(result.status());
  std::vector<std::string> files(result->outputs.size());
  const std::string dir = args.Get("output-dir");
  if (!dir.empty()) {
    for (size_t i = 0; i < result->outputs.size(); ++i) {
      files[i] = absl::StrCat(dir, "/", SafeFileName(result->outputs[i].first), ".npy");
      absl::Status written = WriteNpyFile(files[i], result->outputs[i].second);
      if (!written.ok()) return Fail(written);
    }
  }
  if (!args.Has("json")) {
    std::cout << FormatInferResult(*result);
    for (const std::string& f : files) {
      if (!f.empty()) std::cout << "wrote " << f << "\n";
    }
    return 0;
  }
  std::vector<std::string> outs;
  for (size_t i = 0; i < result->outputs.size(); ++i) {
    const auto& [name, a] = result->outputs[i];
    std::string o = absl::StrCat("{\"name\": \"", name, "\", \"datatype\": \"", a.datatype,
                                 "\", \"shape\": [", absl::StrJoin(a.shape, ", "), "]");
    if (!files[i].empty()) absl::StrAppend(&o, ", \"file\": \"", files[i], "\"");
    const ElementType* type = FindElementType(a.datatype);
    if (type != nullptr && a.data.size() / type->size <= 64) {
      std::vector<std::string> values;
      for (size_t k = 0; k < a.data.size() / type->size; ++k) {
        values.push_back(FormatElement(*type, a.data, k));
      }
      absl::StrAppend(&o, ", \"values\": [", absl::StrJoin(values, ", "), "]");
    }
    outs.push_back(o + "}");
  }
  std::vector<std::string> kernels;
  for (const KernelTime& k : result->kernels) {
    kernels.push_back(absl::StrCat("{\"index\": ", k.index, ", \"name\": \"", k.name,
                                   "\", \"ns\": ", k.ns, "}"));
  }
  std::cout << "{\"outputs\": [" << absl::StrJoin(outs, ", ") << "], \"kernels\": ["
            << absl::StrJoin(kernels, ", ") << "], \"total_ns\": " << result->total_ns << "}\n";
  return 0;
}

template <typename T, typename F>
int Print(const absl::StatusOr<T>& response, const CliArgs& args, F format);

int BenchCommand(KilnClient& client, const CliArgs& args) {
  BenchOptions options;
  options.model = args.Get("model");
  if (options.model.empty() != (args.positional.size() == 2) || args.positional.size() > 2) {
    return Usage("bench takes one model FILE, or --model NAME of a loaded one");
  }
  if (options.model.empty()) options.path = args.positional[1];
  options.exact = args.Has("exact");
  options.json = args.Has("json");
  auto batch = args.GetInt("batch", 1, 1);
  auto concurrency = args.GetInt("concurrency", 1, 1);
  auto iterations = args.GetInt("iterations", 100, 1);
  auto warmup = args.GetInt("warmup", 10, 0);
  if (!batch.ok() || !concurrency.ok() || !iterations.ok() || !warmup.ok()) {
    return Usage("--batch, --concurrency and --iterations take positive numbers, --warmup >= 0");
  }
  options.batch = *batch;
  options.concurrency = *concurrency;
  options.iterations = *iterations;
  options.warmup = *warmup;
  if (absl::Status batching = ParseBatchingFlags(args, &options.compile); !batching.ok()) {
    return Usage(std::string(batching.message()));
  }
  if (absl::Status symbols = ParseSymbolFlags(args, &options.compile); !symbols.ok()) {
    return Usage(std::string(symbols.message()));
  }
  absl::Status ran = RunBench(client, options, std::cout);
  return ran.ok() ? 0 : Fail(ran);
}

absl::StatusOr<std::vector<kiln::v1::TensorValue>> ReadTensorValues(const CliArgs& args) {
  std::vector<kiln::v1::TensorValue> values;
  for (const std::string& path : args.GetAll("input")) {
    auto array = ReadNpyFile(path);
    if (!array.ok()) return array.status();
    kiln::v1::TensorValue v;
    v.set_datatype(array->datatype);
    for (int64_t d : array->shape) v.add_shape(d);
    v.set_raw(array->data);
    values.push_back(std::move(v));
  }
  return values;
}

int CallKernelCommand(KilnClient& client, const CliArgs& args) {
  if (args.positional.size() != 2) return Usage("call-kernel takes one KEY");
  kiln::v1::CallKernelRequest request;
  request.set_key(args.positional[1]);
  auto inputs = ReadTensorValues(args);
  if (!inputs.ok()) return Fail(inputs.status());
  for (auto& v : *inputs) *request.add_inputs() = std::move(v);
  auto response = client.CallKernel(request);
  if (!response.ok()) return Fail(response.status());
  NpyArray out{response->output().datatype(),
               {response->output().shape().begin(), response->output().shape().end()},
               response->output().raw()};
  if (!args.Get("output").empty()) {
    absl::Status written = WriteNpyFile(args.Get("output"), out);
    if (!written.ok()) return Fail(written);
  }
  if (args.Has("json")) {
    std::cout << ToJson(*response) << "\n";
    return 0;
  }
  InferResult shown;
  shown.outputs.push_back({"output", out});
  std::cout << FormatInferResult(shown) << "run " << response->run_ns() / 1e3 << " us\n";
  return 0;
}

int BenchKernelCommand(KilnClient& client, const CliArgs& args) {
  if (args.positional.size() != 2) return Usage("bench-kernel takes one KEY");
  kiln::v1::BenchmarkKernelRequest request;
  request.set_key(args.positional[1]);
  int number = 1, repeat = 10, warmup = 1;
  double min_ms = 0;
  if (!absl::SimpleAtoi(args.Get("number", "1"), &number) ||
      !absl::SimpleAtoi(args.Get("repeat", "10"), &repeat) ||
      !absl::SimpleAtoi(args.Get("warmup", "1"), &warmup) ||
      !absl::SimpleAtod(args.Get("min-repeat-ms", "0"), &min_ms)) {
    return Usage("--number, --repeat, --warmup and --min-repeat-ms take numbers");
  }
  request.set_number(number);
  request.set_repeat(repeat);
  request.set_warmup(warmup);
  request.set_min_repeat_ms(min_ms);
  auto inputs = ReadTensorValues(args);
  if (!inputs.ok()) return Fail(inputs.status());
  for (auto& v : *inputs) *request.add_inputs() = std::move(v);
  return Print(client.BenchmarkKernel(request), args, FormatBenchmark);
}

template <typename T, typename F>
int Print(const absl::StatusOr<T>& response, const CliArgs& args, F format) {
  if (!response.ok()) return Fail(response.status());
  std::cout << (args.Has("json") ? ToJson(*response) + "\n" : format(*response));
  return 0;
}

int Main(int argc, char** argv) {
  std::vector<std::string> words(argv + 1, argv + argc);
  auto args = ParseCliArgs(
      words,
      {"server", "name", "opt-level", "disable", "require", "max-fuse-depth", "print-ir-after",
       "input", "output-dir", "output", "input-shape", "batch", "concurrency", "iterations",
       "max-batch-size", "preferred-batch-size", "max-queue-delay-us", "symbol-range",
       "eager-shape", "model", "number", "repeat", "warmup", "min-repeat-ms", "tls-ca",
       "tls-cert", "tls-key", "token"},
      {"json", "profile", "help", "model-tolerance", "exact", "exact-shapes-only", "replace",
       "upload", "kernel-bounds-checks"});
  if (!args.ok()) return Usage(std::string(args.status().message()));
  if (args->Has("help") || args->positional.empty()) return Usage("");
  ClientOptions connection;
  connection.tls_ca = args->Get("tls-ca");
  connection.tls_cert = args->Get("tls-cert");
  connection.tls_key = args->Get("tls-key");
  connection.token = args->Get("token");
  if (connection.token.empty() && std::getenv("KILN_TOKEN") != nullptr) {
    connection.token = std::getenv("KILN_TOKEN");
  }
  auto client = KilnClient::Create(args->Get("server", "localhost:50051"), connection);
  if (!client.ok()) return Fail(client.status());
  const std::string& command = args->positional[0];
  if (command == "compile") return Compile(**client, *args);
  if (command == "infer") return Infer(**client, *args);
  if (command == "models") return Print((*client)->ListModels(), *args, FormatModels);
  if (command == "info") return Print((*client)->GetServerInfo(), *args, FormatServerInfo);
  if (command == "onnx-test") {
    if (args->positional.size() < 2) return Usage("onnx-test takes case directories");
    return OnnxTestCommand(**client, *args);
  }
  if (command == "bench") return BenchCommand(**client, *args);
  if (command == "kernels") return Print((*client)->ListKernels(), *args, FormatKernels);
  if (command == "call-kernel") return CallKernelCommand(**client, *args);
  if (command == "bench-kernel") return BenchKernelCommand(**client, *args);
  if (command == "unload") {
    if (args->positional.size() != 2) return Usage("unload takes one model NAME");
    absl::Status s = (*client)->UnloadModel(args->positional[1]);
    if (!s.ok()) return Fail(s);
    std::cout << "unloaded " << args->positional[1] << "\n";
    return 0;
  }
  if (command == "stats" && args->positional.size() >= 2) {
    if (args->positional[1] == "cache") {
      return Print((*client)->GetCacheStats(), *args, FormatCacheStats);
    }
    if (args->positional[1] == "timing") {
      const std::string model = args->positional.size() > 2 ? args->positional[2] : "";
      return Print((*client)->GetTimingStats(model), *args, FormatTimingStats);
    }
  }
  return Usage(absl::StrCat("unknown command '", absl::StrJoin(args->positional, " "), "'"));
}

}  // namespace
}  // namespace kiln::client

int main(int argc, char** argv) {
  // Debian's Abseil is built without NDEBUG: skip the deadlock-detection
  // graph every gRPC lock would feed (as kiln-server does).
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  return kiln::client::Main(argc, argv);
}
