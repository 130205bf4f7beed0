// kiln: the command-line client. Every command takes --server HOST:PORT.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>
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
#include "client/cli_app.h"
#include "client/cli_args.h"
#include "client/did_you_mean.h"
#include "client/doctor_command.h"
#include "client/element_type.h"
#include "client/json_output.h"
#include "client/kiln_cli.h"
#include "client/kiln_client.h"
#include "client/model_file.h"
#include "client/model_inputs.h"
#include "client/npy.h"
#include "client/onnx_test_command.h"
#include "client/report_format.h"
#include "client/tune_command.h"
#include "common/status_macros.h"

namespace kiln::client {
namespace {

// Prints the failure as every kiln command does and returns the exit status.
int Fail(const absl::Status& status) { return PrintFailure("kiln", status); }

// A command line the parser accepted but the command cannot use.
int Usage(const std::string& problem) { return PrintUsageError("kiln", problem); }

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
  if (const std::string nchwc = args.Get("nchwc"); !nchwc.empty()) {
    if (nchwc == "on") {
      options->set_nchwc_layout(kiln::v1::NCHWC_LAYOUT_ON);
    } else if (nchwc == "off") {
      options->set_nchwc_layout(kiln::v1::NCHWC_LAYOUT_OFF);
    } else if (nchwc != "auto") {
      return Usage("--nchwc wants on, off or auto");
    }
  }
  if (const std::string winograd = args.Get("winograd"); !winograd.empty()) {
    if (winograd != "0" && winograd != "2" && winograd != "3" && winograd != "4") {
      return Usage("--winograd wants 0, 2, 3 or 4");
    }
    options->set_winograd_tile(winograd[0] - '0');
  }
  std::vector<std::string> shaped;
  for (const std::string& spec : args.GetAll("input-shape")) {
    // NAME=1x3x224x224
    const size_t eq = spec.find('=');
    if (eq == std::string::npos) return Usage("--input-shape wants NAME=D1xD2x...");
    shaped.push_back(spec.substr(0, eq));
    kiln::v1::IntList& dims = (*options->mutable_input_shapes())[spec.substr(0, eq)];
    for (absl::string_view d : absl::StrSplit(spec.substr(eq + 1), 'x')) {
      int64_t v;
      if (!absl::SimpleAtoi(d, &v)) return Usage("--input-shape wants NAME=D1xD2x...");
      dims.add_values(v);
    }
  }
  if (!shaped.empty()) {
    // The server applies only the shapes of inputs it finds: a misspelt name
    // would pass unnoticed.
    auto inputs = ModelInputNames(request);
    if (!inputs.ok()) return Fail(inputs.status());
    if (absl::Status named = CheckInputNames(shaped, *inputs, "--input-shape"); !named.ok()) {
      return Fail(named);
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
  std::cout << (args.Has("json") ? JsonDocument(*response) + "\n"
                                  : FormatCompileReport(*response));
  return 0;
}

// Checks the inputs' names against the model's (a misspelt one gets a "did
// you mean"), and converts a float32 .npy given for a BF16 input (NumPy has
// no bfloat16). Without the model's metadata the inputs go as they are, and
// the server names what does not fit.
absl::Status PrepareInputs(KilnClient& client, const std::string& model,
                           std::vector<std::pair<std::string, NpyArray>>* inputs) {
  auto meta = client.ModelMetadata(model);
  if (!meta.ok()) return absl::OkStatus();
  std::vector<std::string> known, named;
  for (const auto& in : meta->inputs()) known.push_back(in.name());
  for (const auto& in : *inputs) named.push_back(in.first);
  KILN_RETURN_IF_ERROR(CheckInputNames(named, known, "--input"));
  for (auto& [name, array] : *inputs) {
    for (const auto& in : meta->inputs()) {
      if (in.name() == name && in.datatype() == "BF16" && array.datatype == "FP32") {
        array = Float32ToBFloat16(std::move(array));
      }
    }
  }
  return absl::OkStatus();
}

// `kiln infer --json`: every output's values, or the first `max_values`
// (-1: all) with "values_truncated".
std::string InferJson(const std::string& model, const InferResult& result,
                      const std::vector<std::string>& files, int max_values) {
  std::vector<std::string> outs;
  for (size_t i = 0; i < result.outputs.size(); ++i) {
    const auto& [name, a] = result.outputs[i];
    std::string o = absl::StrCat("{\"name\": ", JsonQuote(name), ", \"datatype\": ",
                                 JsonQuote(a.datatype), ", \"shape\": [",
                                 absl::StrJoin(a.shape, ", "), "]");
    if (!files[i].empty()) absl::StrAppend(&o, ", \"file\": ", JsonQuote(files[i]));
    const ElementType* type = FindElementType(a.datatype);
    if (type != nullptr) {
      const size_t n = a.data.size() / type->size;
      const size_t shown = max_values < 0 ? n : std::min<size_t>(n, max_values);
      std::vector<std::string> values;
      for (size_t k = 0; k < shown; ++k) values.push_back(JsonElement(*type, a.data, k));
      absl::StrAppend(&o, ", \"element_count\": ", n, ", \"values\": [",
                      absl::StrJoin(values, ", "), "], \"values_truncated\": ",
                      shown < n ? "true" : "false");
    }
    outs.push_back(o + "}");
  }
  std::vector<std::string> kernels;
  for (const KernelTime& k : result.kernels) {
    kernels.push_back(absl::StrCat("{\"index\": ", k.index, ", \"name\": ", JsonQuote(k.name),
                                   ", \"ns\": ", k.ns, "}"));
  }
  return WithSchemaVersion(absl::StrCat(
      "{\"model\": ", JsonQuote(model), ", \"outputs\": [\n    ", absl::StrJoin(outs, ",\n    "),
      "],\n  \"kernels\": [", absl::StrJoin(kernels, ", "), "], \"total_ns\": ", result.total_ns,
      "}"));
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
  auto max_values = args.GetInt("max-values", -1, 0);
  if (!max_values.ok()) return Usage(std::string(max_values.status().message()));
  if (absl::Status ready = PrepareInputs(client, args.positional[1], &inputs); !ready.ok()) {
    return Fail(ready);
  }
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
  std::cout << InferJson(args.positional[1], *result, files, *max_values) << "\n";
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
    std::cout << JsonDocument(*response) << "\n";
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
  std::cout << (args.Has("json") ? JsonDocument(*response) + "\n" : format(*response));
  return 0;
}

int Main(int argc, char** argv) {
  std::unique_ptr<CLI::App> cli = NewKilnCli();
  if (argc < 2) {
    std::cerr << cli->help();
    return 2;
  }
  CliArgs parsed;
  if (std::optional<int> done = ParseCommandLine(*cli, argc, argv, &parsed)) return *done;
  const CliArgs* args = &parsed;
  if (args->positional.empty()) return Usage("no COMMAND given (see kiln --help)");
  ClientOptions connection;
  connection.tls_ca = args->Get("tls-ca");
  connection.tls_cert = args->Get("tls-cert");
  connection.tls_key = args->Get("tls-key");
  connection.token = args->Get("token");
  if (connection.token.empty() && std::getenv("KILN_TOKEN") != nullptr) {
    connection.token = std::getenv("KILN_TOKEN");
  }
  const std::string target = args->Get("server", "localhost:50051");
  auto client = KilnClient::Create(target, connection);
  if (!client.ok()) return Fail(client.status());
  const std::string& command = args->positional[0];
  if (command == "compile") return Compile(**client, *args);
  if (command == "infer") return Infer(**client, *args);
  if (command == "models") return Print((*client)->ListModels(), *args, FormatModels);
  if (command == "info") return Print((*client)->GetServerInfo(), *args, FormatServerInfo);
  if (command == "doctor") return DoctorCommand(**client, target, args->Has("json"), std::cout);
  if (command == "onnx-test") {
    if (args->positional.size() < 2) return Usage("onnx-test takes case directories");
    return OnnxTestCommand(**client, *args);
  }
  if (command == "bench") return BenchCommand(**client, *args);
  if (command == "tune") return TuneCommand(**client, *args);
  if (command == "kernels") return Print((*client)->ListKernels(), *args, FormatKernels);
  if (command == "call-kernel") return CallKernelCommand(**client, *args);
  if (command == "bench-kernel") return BenchKernelCommand(**client, *args);
  if (command == "unload") {
    if (args->positional.size() != 2) return Usage("unload takes one model NAME");
    absl::Status s = (*client)->UnloadModel(args->positional[1]);
    if (!s.ok()) return Fail(s);
    if (args->Has("json")) {
      std::cout << WithSchemaVersion(absl::StrCat("{\"unloaded\": ", JsonQuote(args->positional[1]),
                                                  "}"))
                << "\n";
    } else {
      std::cout << "unloaded " << args->positional[1] << "\n";
    }
    return 0;
  }
  if (command == "stats") {
    const std::string what = args->positional.size() >= 2 ? args->positional[1] : "";
    if (what == "cache" && args->positional.size() == 2) {
      return Print((*client)->GetCacheStats(), *args, FormatCacheStats);
    }
    if (what == "timing" && args->positional.size() <= 3) {
      const std::string model = args->positional.size() > 2 ? args->positional[2] : "";
      return Print((*client)->GetTimingStats(model), *args, FormatTimingStats);
    }
    return Usage(absl::StrCat("stats takes 'cache' or 'timing [NAME]', not '", what, "'",
                              DidYouMean(what, {"cache", "timing"})));
  }
  return Usage(absl::StrCat("unknown command '", command, "'"));
}

}  // namespace
}  // namespace kiln::client

int main(int argc, char** argv) {
  // Debian's Abseil is built without NDEBUG: skip the deadlock-detection
  // graph every gRPC lock would feed (as kiln-server does).
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  return kiln::client::Main(argc, argv);
}
