// kiln: the command-line client. Every command takes --server HOST:PORT.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
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
#include "client/cli_args.h"
#include "client/kiln_client.h"
#include "client/model_file.h"
#include "client/npy.h"
#include "client/onnx_conformance.h"
#include "client/report_format.h"

namespace kiln::client {
namespace {

constexpr char kUsage[] = R"(usage: kiln COMMAND [--server HOST:PORT] ...
  compile FILE [--name NAME] [--opt-level N] [--disable PASS]... [--require PASS]...
               [--max-fuse-depth N] [--print-ir-after PASS|all]...
               [--input-shape INPUT=1x3x224x224]... [--json]
  infer NAME --input INPUT=FILE.npy ... [--output-dir DIR] [--profile] [--json]
  stats cache [--json]
  stats timing [NAME] [--json]
  models [--json]
  unload NAME
  info [--json]
  onnx-test CASE_DIR... [--model-tolerance]
                             ONNX test cases; ends "N passed, N failed, N unsupported"
  bench FILE [--batch B] [--iterations N] [--warmup W] [--json]
                             compile, then latency percentiles through the server
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

// An ONNX file travels as bytes (the server parses it); anything else is a Kiln graph.
absl::Status LoadModelInto(const std::string& path, kiln::v1::CompileModelRequest* request) {
  if (absl::EndsWith(path, ".onnx")) {
    auto bytes = ReadFileBytes(path);
    if (!bytes.ok()) return bytes.status();
    request->set_onnx_model(*bytes);
    return absl::OkStatus();
  }
  auto graph = LoadGraphFile(path);
  if (!graph.ok()) return graph.status();
  *request->mutable_graph() = *std::move(graph);
  return absl::OkStatus();
}

int Compile(KilnClient& client, const CliArgs& args) {
  if (args.positional.size() != 2) return Usage("compile takes one FILE");
  const std::string& path = args.positional[1];
  kiln::v1::CompileModelRequest request;
  if (absl::Status loaded = LoadModelInto(path, &request); !loaded.ok()) return Fail(loaded);
  std::string name = args.Get("name");
  if (name.empty() && absl::EndsWith(path, ".onnx")) {
    // ONNX graphs are often unnamed: default to the file's stem.
    name = path.substr(path.find_last_of('/') + 1);
    name = name.substr(0, name.size() - 5);
  }
  request.set_model_name(name);
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
  auto response = client.CompileWithProgress(request, on_progress);
  if (tty && std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(300)) {
    std::cerr << "\r\033[K" << std::flush;
  }
  if (!response.ok()) return Fail(response.status());
  std::cout << (args.Has("json") ? ToJson(*response) + "\n" : FormatCompileReport(*response));
  return 0;
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
    const size_t item = a.datatype == "FP32" ? 4 : 8;
    if (a.data.size() / item <= 64) {
      std::vector<std::string> values;
      for (size_t k = 0; k < a.data.size() / item; ++k) {
        if (item == 4) {
          float f;
          std::memcpy(&f, a.data.data() + k * 4, 4);
          values.push_back(absl::StrCat(f));
        } else {
          int64_t v;
          std::memcpy(&v, a.data.data() + k * 8, 8);
          values.push_back(absl::StrCat(v));
        }
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

// kiln bench MODEL_FILE: compile (timed apart, as onnxruntime_perf_test
// separates session creation), then warm-up and timed inferences through the
// server with perf_analyzer-style latency percentiles.
int BenchCommand(KilnClient& client, const CliArgs& args) {
  if (args.positional.size() != 2) return Usage("bench takes one model FILE");
  const std::string& path = args.positional[1];
  int batch = 1, iterations = 100, warmup = 10;
  if (!absl::SimpleAtoi(args.Get("batch", "1"), &batch) ||
      !absl::SimpleAtoi(args.Get("iterations", "100"), &iterations) ||
      !absl::SimpleAtoi(args.Get("warmup", "10"), &warmup) || batch < 1 || iterations < 1) {
    return Usage("--batch, --iterations and --warmup take positive numbers");
  }
  kiln::v1::CompileModelRequest request;
  if (absl::Status loaded = LoadModelInto(path, &request); !loaded.ok()) return Fail(loaded);
  const std::string name = absl::StrCat("bench_b", batch);
  request.set_model_name(name);
  auto timed_compile = [&](double* ms) {
    const auto start = std::chrono::steady_clock::now();
    auto r = client.Compile(request);
    *ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count();
    return r;
  };
  double compile_ms = 0;
  auto compiled = timed_compile(&compile_ms);
  if (!compiled.ok()) return Fail(compiled.status());
  auto meta = client.ModelMetadata(name);
  if (!meta.ok()) return Fail(meta.status());
  if (batch != 1 && request.has_onnx_model()) {
    // The input names are known now: recompile with the batch as the first dim.
    for (const auto& in : meta->inputs()) {
      kiln::v1::IntList& dims = (*request.mutable_options()->mutable_input_shapes())[in.name()];
      for (int d = 0; d < in.shape_size(); ++d) {
        dims.add_values(d == 0 ? batch : std::max<int64_t>(in.shape(d), 1));  // -1: any; use 1
      }
    }
    auto again = timed_compile(&compile_ms);
    if (!again.ok()) return Fail(again.status());
    meta = client.ModelMetadata(name);
    if (!meta.ok()) return Fail(meta.status());
  }
  std::vector<std::pair<std::string, NpyArray>> inputs;
  uint32_t seed = 12345;
  for (const auto& in : meta->inputs()) {
    NpyArray a;
    a.datatype = in.datatype();
    int64_t n = 1;
    for (int d = 0; d < in.shape_size(); ++d) {
      // A symbolic dim (-1) is the batch when it leads, else 1.
      const int64_t size = in.shape(d) >= 0 ? in.shape(d) : (d == 0 ? batch : 1);
      a.shape.push_back(size);
      n *= size;
    }
    if (a.datatype == "FP32") {
      std::vector<float> v(n);
      for (float& f : v) {
        seed = seed * 1664525u + 1013904223u;
        f = static_cast<float>(seed >> 8) / static_cast<float>(1 << 24) - 0.5f;
      }
      a.data.assign(reinterpret_cast<const char*>(v.data()), v.size() * 4);
    } else {
      a.data.assign(n * (a.datatype == "INT64" ? 8 : 1), '\0');
    }
    inputs.push_back({in.name(), std::move(a)});
  }
  for (int i = 0; i < warmup; ++i) {
    auto r = client.Infer(name, inputs, false);
    if (!r.ok()) return Fail(r.status());
  }
  std::vector<double> ms;
  std::vector<double> server_ms;
  const auto bench_start = std::chrono::steady_clock::now();
  for (int i = 0; i < iterations; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    auto r = client.Infer(name, inputs, true);
    if (!r.ok()) return Fail(r.status());
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    server_ms.push_back(r->total_ns / 1e6);
  }
  const double wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - bench_start).count();
  std::sort(ms.begin(), ms.end());
  std::sort(server_ms.begin(), server_ms.end());
  auto pct = [](const std::vector<double>& v, double q) {
    return v[std::min(v.size() - 1, static_cast<size_t>(std::ceil(q * v.size())) - 1)];
  };
  const double throughput = iterations * batch / wall_s;
  if (args.Has("json")) {
    std::cout << absl::StrFormat(
        "{\"model\": \"%s\", \"batch\": %d, \"compile_ms\": %.3f, \"iterations\": %d, "
        "\"p50_ms\": %.4f, \"p90_ms\": %.4f, \"p95_ms\": %.4f, \"p99_ms\": %.4f, "
        "\"server_p50_ms\": %.4f, \"throughput_per_s\": %.1f}\n",
        path, batch, compile_ms, iterations, pct(ms, 0.5), pct(ms, 0.9), pct(ms, 0.95),
        pct(ms, 0.99), pct(server_ms, 0.5), throughput);
  } else {
    std::cout << absl::StrFormat(
        "%s batch %d: compile %.1f ms; %d inferences: p50 %.3f ms, p90 %.3f ms, p95 %.3f ms, "
        "p99 %.3f ms (kernels alone p50 %.3f ms); %.1f inferences/s\n",
        path, batch, compile_ms, iterations, pct(ms, 0.5), pct(ms, 0.9), pct(ms, 0.95),
        pct(ms, 0.99), pct(server_ms, 0.5), throughput);
  }
  (void)client.UnloadModel(name);
  return 0;
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
       "input", "output-dir", "output", "input-shape", "batch", "iterations", "number", "repeat", "warmup", "min-repeat-ms"},
      {"json", "profile", "help", "model-tolerance"});
  if (!args.ok()) return Usage(std::string(args.status().message()));
  if (args->Has("help") || args->positional.empty()) return Usage("");
  auto client = KilnClient::Create(args->Get("server", "localhost:50051"));
  if (!client.ok()) return Fail(client.status());
  const std::string& command = args->positional[0];
  if (command == "compile") return Compile(**client, *args);
  if (command == "infer") return Infer(**client, *args);
  if (command == "models") return Print((*client)->ListModels(), *args, FormatModels);
  if (command == "info") return Print((*client)->GetServerInfo(), *args, FormatServerInfo);
  if (command == "onnx-test") {
    if (args->positional.size() < 2) return Usage("onnx-test takes case directories");
    int passed = 0, failed = 0, unsupported = 0;
    for (size_t i = 1; i < args->positional.size(); ++i) {
      OnnxCaseResult r = RunOnnxCase(
          **client, args->positional[i],
          args->Has("model-tolerance") ? Tolerance::kModel : Tolerance::kOnnxRunner);
      std::cout << OutcomeName(r.outcome) << " " << args->positional[i];
      if (!r.detail.empty()) std::cout << "  (" << r.detail << ")";
      std::cout << "\n";
      (r.outcome == OnnxCaseResult::Outcome::kPass       ? passed
       : r.outcome == OnnxCaseResult::Outcome::kFail     ? failed
                                                         : unsupported)++;
    }
    std::cout << passed << " passed, " << failed << " failed, " << unsupported
              << " unsupported\n";
    return failed > 0 ? 1 : 0;
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
