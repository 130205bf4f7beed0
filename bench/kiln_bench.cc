// kiln-bench: benchmarks one model IN PROCESS, the way kiln-server would run it
// but with no gRPC in between. The compile is cold — a memory-only kernel cache
// in a fresh process — and is reported apart from running, as
// onnxruntime_perf_test separates session creation; then warm-up and timed
// inferences give perf_analyzer-style latency percentiles and throughput.
//
//   kiln-bench MODEL [--batch B] [--threads T] [--iterations N] [--warmup W]
//              [--compile-threads C] [--top K] [--disable-passes P,Q] [--nchwc on|off|auto]
//              [--winograd 0|2|3|4] [--save-outputs DIR] [--json]
//   kiln-bench MODEL --dump-objects DIR
//
// MODEL is an ONNX model (.onnx) or a kiln.v1.Graph (.pbtxt text or binary).
// --batch rewrites the leading dim of every input (ONNX: as --input-shape
// overrides; Kiln graphs: in the graph's input declarations); without it the
// model's own shapes stand (ONNX symbolic dims become 1). Throughput counts the
// first input's leading dim as the batch. Inputs are pseudorandom float32
// (int64 inputs are zeros).
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bench/bench_util.h"
#include "client/cli_app.h"
#include "client/model_file.h"
#include "common/ms_since.h"
#include "compiler/codegen/codegen.h"
#include "compiler/driver/compile.h"
#include "compiler/frontend/kiln_graph_importer.h"
#include "compiler/frontend/onnx_importer.h"
#include "compiler/lower/loop_ir.h"
#include "compiler/ops/op_registry.h"
#include "compiler/passes/graph_at_rows.h"
#include "engine/model_manager.h"
#include "engine/row_chunks.h"
#include "runtime/host_peaks.h"
#include "runtime/roofline.h"
#include "runtime/thread_pool.h"

namespace kiln::bench {
namespace {

using Clock = std::chrono::steady_clock;

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out + "\"";
}

// The model as a verified graph; a nonzero `batch` becomes every input's leading dim.
absl::StatusOr<Graph> ImportModel(const std::string& path, int batch) {
  if (absl::EndsWith(path, ".onnx")) {
    absl::StatusOr<std::string> bytes = client::ReadFileBytes(path);
    if (!bytes.ok()) return bytes.status();
    OnnxImportOptions options;
    absl::StatusOr<Graph> graph = ImportOnnxModel(*bytes, OpRegistry::Default(), options);
    if (!graph.ok() || batch == 0) return graph;
    // The input names and ranks are known now: import again with the batch fixed.
    for (const Node* in : graph->inputs()) {
      std::vector<int64_t> shape = in->type.shape;
      if (!shape.empty()) shape[0] = batch;
      options.input_shapes[in->name] = shape;
    }
    return ImportOnnxModel(*bytes, OpRegistry::Default(), options);
  }
  absl::StatusOr<kiln::v1::Graph> proto = client::LoadGraphFile(path);
  if (!proto.ok()) return proto.status();
  if (batch != 0) {
    for (kiln::v1::ValueInfo& in : *proto->mutable_inputs()) {
      if (in.dims_size() > 0) in.set_dims(0, batch);
    }
  }
  return ImportKilnGraph(*proto, OpRegistry::Default());
}

absl::StatusOr<std::vector<runtime::Tensor>> MakeInputs(const Program& program) {
  std::vector<runtime::Tensor> inputs;
  uint32_t seed = 12345;
  for (int v : program.inputs) {
    absl::StatusOr<runtime::Tensor> t = runtime::Tensor::Allocate(program.values[v].type);
    if (!t.ok()) return t.status();
    if (t->type().dtype == DType::kFloat32) {
      FillPseudorandom(static_cast<float*>(t->data()), t->type().NumElements(), seed++);
    }
    inputs.push_back(*std::move(t));
  }
  return inputs;
}

// The kernels with the largest steady-state median, largest first.
std::vector<int> KernelsByMedian(const runtime::ModelTimingStats& stats) {
  std::vector<int> order(stats.kernels.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return stats.kernels[a].durations.p50_ns > stats.kernels[b].durations.p50_ns;
  });
  return order;
}

// Roofline columns (issue 23). Each kernel's FLOPs and argument bytes come from
// the compiler (KernelSpec::flops, ::bytes: the fused ops' declared costs; each
// argument once, a lower bound on traffic), its time is its steady-state
// median, and the limits are this host's measured FMA peak and STREAM-triad
// bandwidth at the --threads used (runtime/host_peaks.h). A kernel far below
// both limits is where a schedule has room; one near either is done.
runtime::Roofline KernelRoofline(const engine::KernelCompileReport& k, double p50_ns, int threads) {
  return runtime::ComputeRoofline(k.flops, k.bytes, p50_ns / 1e9, runtime::CachedHostPeaks(),
                                  threads);
}

// Where the time goes: the kernels with the largest steady-state median, with
// their share of the summed medians, their roofline and the schedule lowering chose.
void PrintTopKernels(const runtime::CompiledModel& model, const engine::CompileResult& compiled,
                     int top, int threads) {
  const runtime::ModelTimingStats stats = model.TimingStats();
  const std::vector<int> order = KernelsByMedian(stats);
  double sum_ms = 0, flops = 0;
  int64_t bytes = 0;
  for (size_t i = 0; i < stats.kernels.size(); ++i) {
    sum_ms += stats.kernels[i].durations.p50_ns / 1e6;
    flops += compiled.kernels[i].flops;
    bytes += compiled.kernels[i].bytes;
  }
  const runtime::HostPeaks& peaks = runtime::CachedHostPeaks();
  const runtime::Roofline all =
      runtime::ComputeRoofline(flops, bytes, sum_ms / 1e3, peaks, threads);
  std::cout << absl::StrFormat(
      "  host: %s (%s); at %d thread%s FMA peak %.1f GFLOPS, triad bandwidth %.1f GB/s "
      "(measured in %.0f ms)\n",
      peaks.cpu_name, peaks.isa, threads, threads == 1 ? "" : "s", all.peak_gflops, all.peak_gbps,
      peaks.measure_ms);
  std::cout << absl::StrFormat(
      "  top kernels by median (sum of medians %.3f ms; %.3f GFLOP, %.1f GFLOPS = %.1f%% of "
      "peak):\n",
      sum_ms, flops / 1e9, all.gflops, 100 * all.fma_fraction);
  std::cout << absl::StrFormat("    %9s %6s %8s %6s %8s %6s  %s\n", "ms", "share", "GFLOPS", "%FMA",
                               "GB/s", "%BW", "kernel  schedule");
  for (int r = 0; r < std::min<int>(top, static_cast<int>(order.size())); ++r) {
    const int k = order[r];
    const double p50 = stats.kernels[k].durations.p50_ns / 1e6;
    const runtime::Roofline roof =
        KernelRoofline(compiled.kernels[k], stats.kernels[k].durations.p50_ns, threads);
    std::cout << absl::StrFormat("    %9.4f %5.1f%% %8.1f %5.1f%% %8.2f %5.1f%%  %s  %s\n", p50,
                                 sum_ms > 0 ? 100 * p50 / sum_ms : 0.0, roof.gflops,
                                 100 * roof.fma_fraction, roof.gbps, 100 * roof.bandwidth_fraction,
                                 stats.kernels[k].name, compiled.kernels[k].schedule);
  }
}

// --json's "host" and "top_kernels" fields (with a leading comma), as the text table.
std::string TopKernelsJson(const runtime::CompiledModel& model,
                           const engine::CompileResult& compiled, int top, int threads) {
  const runtime::ModelTimingStats stats = model.TimingStats();
  const std::vector<int> order = KernelsByMedian(stats);
  const runtime::HostPeaks& peaks = runtime::CachedHostPeaks();
  std::string out = absl::StrFormat(
      ", \"host\": {\"cpu\": %s, \"isa\": %s, \"threads\": %d, \"peak_gflops\": %.3f, "
      "\"peak_gbps\": %.3f, \"fma_gflops_one_thread\": %.3f, \"fma_gflops_all_threads\": %.3f, "
      "\"stream_gbps_one_thread\": %.3f, \"stream_gbps_all_threads\": %.3f}, \"top_kernels\": [",
      JsonString(peaks.cpu_name), JsonString(peaks.isa), threads, peaks.FmaGflops(threads),
      peaks.StreamGbps(threads), peaks.fma_gflops_one_thread, peaks.fma_gflops_all_threads,
      peaks.stream_gbps_one_thread, peaks.stream_gbps_all_threads);
  for (int r = 0; r < std::min<int>(top, static_cast<int>(order.size())); ++r) {
    const int k = order[r];
    const double p50_ns = stats.kernels[k].durations.p50_ns;
    const runtime::Roofline roof = KernelRoofline(compiled.kernels[k], p50_ns, threads);
    absl::StrAppend(
        &out, r == 0 ? "" : ", ",
        absl::StrFormat("{\"name\": %s, \"schedule\": %s, \"p50_ms\": %.6f, \"flops\": %.0f, "
                        "\"bytes\": %d, \"gflops\": %.3f, \"gbps\": %.3f, \"fma_fraction\": %.4f, "
                        "\"bandwidth_fraction\": %.4f}",
                        JsonString(stats.kernels[k].name), JsonString(compiled.kernels[k].schedule),
                        p50_ns / 1e6, compiled.kernels[k].flops, compiled.kernels[k].bytes,
                        roof.gflops, roof.gbps, roof.fma_fraction, roof.bandwidth_fraction));
  }
  return out + "]";
}

int Fail(const absl::Status& status) { return client::PrintFailure("kiln-bench", status); }

// What profiling a kernel needs to see: the loop nest lowering made and the
// LLVM IR the host gets, as TVM's get_source() shows.
int DumpKernel(const std::vector<KernelSpec>& kernels, const std::string& name) {
  for (const KernelSpec& k : kernels) {
    if (k.name != name) continue;
    std::cout << "// " << k.schedule << "\n" << lower::LoopFunctionToString(k.function) << "\n";
    absl::StatusOr<std::string> ir =
        codegen::EmitOptimizedIR(k.function, codegen::CodegenOptions{});
    if (!ir.ok()) return Fail(ir.status());
    std::cout << *ir;
    return 0;
  }
  return Fail(absl::NotFoundError(absl::StrCat("no kernel named '", name, "'")));
}

// Every kernel's object code and optimised IR as files named by position and
// kernel name, so two builds' outputs compare with `diff -r` (a refactor that
// promises unchanged kernels proves it this way).
int DumpObjects(const std::vector<KernelSpec>& kernels, const std::string& dir) {
  // Made when missing: the streams below would otherwise fail silently.
  std::error_code made;
  std::filesystem::create_directories(dir, made);
  if (made) {
    return Fail(absl::InvalidArgumentError(
        absl::StrFormat("--dump-objects %s: %s", dir, made.message())));
  }
  for (size_t i = 0; i < kernels.size(); ++i) {
    const KernelSpec& k = kernels[i];
    const std::string stem = absl::StrFormat("%s/%03d_%s", dir, i, k.name);
    absl::StatusOr<std::string> object =
        codegen::CompileToObject(k.function, codegen::CodegenOptions{});
    if (!object.ok()) return Fail(object.status());
    absl::StatusOr<std::string> ir =
        codegen::EmitOptimizedIR(k.function, codegen::CodegenOptions{});
    if (!ir.ok()) return Fail(ir.status());
    std::ofstream object_file(stem + ".o", std::ios::binary);
    std::ofstream ir_file(stem + ".ll");
    if (!(object_file << *object) || !(ir_file << *ir)) {
      return Fail(absl::InternalError(absl::StrFormat("cannot write %s.{o,ll}", stem)));
    }
  }
  std::cout << kernels.size() << " kernels written to " << dir << "\n";
  return 0;
}

int Main(int argc, char** argv) {
  std::unique_ptr<CLI::App> cli = client::NewCliApp(
      "kiln-bench", "kiln-bench: one model compiled cold and run in this process (no gRPC).");
  client::AddPositionals(cli.get(), "MODEL", "An ONNX model (.onnx) or a Kiln graph (.pbtxt)", 1,
                         1);
  client::AddValue(cli.get(), "batch", "B", "Every input's leading dim (default: the model's)");
  client::AddValue(cli.get(), "threads", "T", "Threads running kernels (default: every core)");
  client::AddValue(cli.get(), "iterations", "N", "Timed runs (default 100)");
  client::AddValue(cli.get(), "warmup", "W", "Untimed runs first (default 10)");
  client::AddValue(cli.get(), "compile-threads", "C", "Threads compiling kernels (default 2)");
  client::AddValue(cli.get(), "top", "K",
                   "Also list the K kernels with the largest median time, with GFLOPS, GB/s and "
                   "their fractions of this host's measured FMA peak and triad bandwidth");
  client::AddValue(cli.get(), "dump-kernel", "NAME",
                   "Print that kernel's loop nest and optimised LLVM IR");
  client::AddValue(cli.get(), "dump-objects", "DIR",
                   "Write every kernel's object code and optimised IR to DIR (NNN_NAME.o, "
                   "NNN_NAME.ll): diffing two builds' DIRs shows whether generated code changed");
  client::AddValue(cli.get(), "tuning-dir", "DIR",
                   "Follow the tuning records in DIR (a server's --cache-dir after kiln tune); "
                   "kernels still compile here");
  client::AddValue(cli.get(), "disable-passes", "P,Q",
                   "Compile without these graph passes (by name, comma-separated): a before/after "
                   "measurement of one pass on the same build");
  client::AddValue(cli.get(), "row-chunks", "R",
                   "Run a batch as slices of R rows (R dividing it), 'off' for whole, or 'auto' "
                   "(default): as the server does, by the rule in engine/row_chunks.h");
  client::AddSwitch(cli.get(), "json", "Print the result as one JSON object");
  client::AddValue(cli.get(), "save-outputs", "DIR",
                   "Write the first run's outputs to DIR/output<i>.bin (raw bytes)");
  client::AddValue(cli.get(), "nchwc", "on|off|auto",
                   "ConvertLayoutNchwc: conv chains in blocked channels (NCHW16c); default: the "
                   "compiler's");
  client::AddValue(cli.get(), "winograd", "0|2|3|4",
                   "WinogradConv's algorithm for 3x3 convs: F(2x2, 3x3) (2, the default), "
                   "F(3x3, 3x3) or F(4x4, 3x3) (3, 4: faster, round ~3x and ~10x more) or none "
                   "(0)");
  client::SetExample(cli.get(), "kiln-bench resnet18.onnx --batch 8 --threads 2 --top 5");
  client::CliArgs parsed;
  if (std::optional<int> done = client::ParseCommandLine(*cli, argc, argv, &parsed)) return *done;
  const client::CliArgs* args = &parsed;
  if (args->positional.size() != 1) return client::PrintUsageError("kiln-bench", "takes one MODEL");
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  absl::StatusOr<int> batch_flag = args->GetInt("batch", 0, 1);
  absl::StatusOr<int> threads = args->GetInt("threads", cores, 1);
  absl::StatusOr<int> iterations = args->GetInt("iterations", 100, 1);
  absl::StatusOr<int> warmup = args->GetInt("warmup", 10, 0);
  absl::StatusOr<int> compile_threads = args->GetInt("compile-threads", 2, 1);
  absl::StatusOr<int> top = args->GetInt("top", 0, 0);
  for (const auto* v : {&batch_flag, &threads, &iterations, &warmup, &compile_threads, &top}) {
    if (!v->ok()) {
      return client::PrintUsageError("kiln-bench", std::string(v->status().message()));
    }
  }
  const std::string& path = args->positional[0];
  runtime::SetParallelThreads(*threads);
  CompileOptions compile_options;
  if (const std::string nchwc = args->Get("nchwc"); !nchwc.empty()) {
    if (nchwc != "on" && nchwc != "off" && nchwc != "auto") {
      return client::PrintUsageError("kiln-bench", "--nchwc wants on, off or auto");
    }
    compile_options.nchwc_layout = nchwc == "on"    ? NchwcLayout::kOn
                                   : nchwc == "off" ? NchwcLayout::kOff
                                                    : NchwcLayout::kAuto;
  }
  if (const std::string winograd = args->Get("winograd"); !winograd.empty()) {
    if (winograd != "0" && winograd != "2" && winograd != "3" && winograd != "4") {
      return client::PrintUsageError("kiln-bench", "--winograd wants 0, 2, 3 or 4");
    }
    compile_options.winograd_tile = winograd[0] - '0';
  }
  if (const std::string disabled = args->Get("disable-passes"); !disabled.empty()) {
    compile_options.disabled_passes = absl::StrSplit(disabled, ',');
  }

  // A fresh manager with a memory-only cache: every kernel is compiled here.
  engine::ModelManagerOptions options;
  options.compile_threads = *compile_threads;
  options.cache.dir.clear();
  options.cache.tuning_dir = args->Get("tuning-dir");
  // The slices are this tool's to choose (--row-chunks), by the rule the
  // manager would follow: each model it compiles here compiles whole.
  options.row_chunks.rows = engine::RowChunkSetting::kOff;
  const Clock::time_point jit_start = Clock::now();
  absl::StatusOr<std::unique_ptr<engine::ModelManager>> manager =
      engine::ModelManager::Create(options);
  if (!manager.ok()) return Fail(manager.status());
  const double jit_ms = MsSince(jit_start);

  const Clock::time_point import_start = Clock::now();
  absl::StatusOr<Graph> graph = ImportModel(path, *batch_flag);
  if (!graph.ok()) return Fail(graph.status());
  const double import_ms = MsSince(import_start);
  const std::string dump_kernel = args->Get("dump-kernel"),
                    dump_objects = args->Get("dump-objects");
  if (!dump_kernel.empty() || !dump_objects.empty()) {
    // The compiler's own output, as the engine would hand it to codegen.
    absl::StatusOr<LoweredProgram> lowered = CompileGraph(*std::move(graph), compile_options);
    if (!lowered.ok()) return Fail(lowered.status());
    return dump_kernel.empty() ? DumpObjects(lowered->kernels, dump_objects)
                               : DumpKernel(lowered->kernels, dump_kernel);
  }
  engine::RowChunkSetting row_chunks;
  if (const std::string r = args->Get("row-chunks"); r == "off") {
    row_chunks.rows = engine::RowChunkSetting::kOff;
  } else if (!r.empty() && r != "auto") {
    if (!absl::SimpleAtoi(r, &row_chunks.rows) || row_chunks.rows < 1) {
      return client::PrintUsageError("kiln-bench", "--row-chunks takes a row count, auto or off");
    }
  }
  // A slice's model compiles as the server's variant for its rows would;
  // so do a whole-batch tail's head (the slices) and tail. Their graphs are
  // the whole batch's at their rows (GraphAtRows), which an export with its
  // batch baked in cannot be imported at.
  const int64_t batch_rows = graph->inputs().empty() || graph->inputs()[0]->type.shape.empty()
                                 ? 1
                                 : graph->inputs()[0]->type.shape[0];
  std::optional<engine::CompileResult> slice_compile, head_compile, tail_compile;
  engine::TailCompiler tail;
  tail.graph_for = [&](int64_t rows) { return GraphAtRows(*graph, batch_rows, rows); };
  tail.compile =
      [&](Graph part,
          const std::string& what) -> absl::StatusOr<std::shared_ptr<runtime::CompiledModel>> {
    const std::string name = absl::StrCat("bench-", what);
    absl::StatusOr<engine::CompileResult> r =
        (*manager)->Compile(name, std::move(part), compile_options);
    if (!r.ok()) return r.status();
    (what == "tail" ? tail_compile : head_compile) = *std::move(r);
    return (*manager)->Find(name);
  };
  engine::RowChunkReport chunk_report;
  absl::StatusOr<std::shared_ptr<runtime::CompiledModel>> chunked = engine::RowChunkedModel(
      *graph, batch_rows, row_chunks,
      [&](int64_t rows) -> absl::StatusOr<std::shared_ptr<runtime::CompiledModel>> {
        absl::StatusOr<Graph> slice = GraphAtRows(*graph, batch_rows, rows);
        if (!slice.ok()) return slice.status();
        const std::string name = absl::StrCat("bench-rows-", rows);
        absl::StatusOr<engine::CompileResult> r =
            (*manager)->Compile(name, *std::move(slice), compile_options);
        if (!r.ok()) return r.status();
        slice_compile = *std::move(r);
        return (*manager)->Find(name);
      },
      &chunk_report, &tail);
  if (!chunked.ok()) return Fail(chunked.status());
  std::shared_ptr<runtime::CompiledModel> model = *chunked;
  absl::StatusOr<engine::CompileResult> compiled =
      model != nullptr ? absl::StatusOr<engine::CompileResult>(*slice_compile)
                       : (*manager)->Compile("bench", *std::move(graph), compile_options);
  if (!compiled.ok()) return Fail(compiled.status());
  if (model == nullptr) model = (*manager)->Find("bench");
  // With a whole-batch tail the slices run its head's kernels.
  const bool has_tail = model->row_chunks() > 1 && head_compile.has_value() &&
                        tail_compile.has_value() &&
                        model->program().kernels.size() ==
                            head_compile->kernels.size() + tail_compile->kernels.size();
  if (has_tail) compiled = *head_compile;
  // A slice's kernels run once per slice: their work per call is that many times theirs.
  for (auto& k : compiled->kernels) {
    k.flops *= static_cast<double>(model->row_chunks());
    k.bytes *= model->row_chunks();
  }
  // The tail's kernels follow the slices', as in the program.
  if (has_tail) {
    for (engine::KernelCompileReport k : tail_compile->kernels) {
      k.name = runtime::kTailKernelPrefix + k.name;
      compiled->kernels.push_back(std::move(k));
    }
    compiled->total_ms += tail_compile->total_ms;
    compiled->codegen_ms += tail_compile->codegen_ms;
  }
  const Program& program = model->program();
  int64_t kernel_arg_bytes = 0;
  for (const KernelCall& k : program.kernels) {
    for (int v : k.args) kernel_arg_bytes += program.values[v].type.ByteSize();
  }
  double flops = 0;  // per call, by the ops' declared costs (KernelSpec::flops)
  for (const engine::KernelCompileReport& k : compiled->kernels) flops += k.flops;

  absl::StatusOr<std::vector<runtime::Tensor>> inputs = MakeInputs(program);
  if (!inputs.ok()) return Fail(inputs.status());
  std::vector<const runtime::Tensor*> pointers;
  for (const runtime::Tensor& t : *inputs) pointers.push_back(&t);
  int batch = 1;
  if (!program.inputs.empty() && !program.values[program.inputs[0]].type.shape.empty()) {
    batch = static_cast<int>(program.values[program.inputs[0]].type.shape[0]);
  }
  std::string input_names, input_shapes, output_shapes;
  for (int v : program.inputs) {
    absl::StrAppend(&input_names, input_names.empty() ? "" : " ", program.values[v].name);
    absl::StrAppend(&input_shapes, input_shapes.empty() ? "" : " ",
                    program.values[v].type.ToString());
  }
  for (int v : program.outputs) {
    absl::StrAppend(&output_shapes, output_shapes.empty() ? "" : " ",
                    program.values[v].type.ToString());
  }

  const Clock::time_point first_start = Clock::now();
  {
    absl::StatusOr<runtime::RunResult> r = model->Run(pointers);
    if (!r.ok()) return Fail(r.status());
    if (const std::string dir = args->Get("save-outputs"); !dir.empty()) {
      // Raw bytes, for comparing layouts or runtimes outside (the inputs
      // are FillPseudorandom's, seeds 12345, 12346, ...).
      std::filesystem::create_directories(dir);
      for (size_t i = 0; i < r->outputs.size(); ++i) {
        const runtime::Tensor& t = r->outputs[i];
        std::ofstream(absl::StrCat(dir, "/output", i, ".bin"), std::ios::binary)
            .write(static_cast<const char*>(t.data()), t.type().ByteSize());
      }
    }
  }
  const double first_ms = MsSince(first_start);
  for (int i = 1; i < *warmup; ++i) {
    absl::StatusOr<runtime::RunResult> r = model->Run(pointers);
    if (!r.ok()) return Fail(r.status());
  }
  std::vector<double> ms, kernel_ms;
  ms.reserve(*iterations);
  kernel_ms.reserve(*iterations);
  const Clock::time_point bench_start = Clock::now();
  for (int i = 0; i < *iterations; ++i) {
    const Clock::time_point t0 = Clock::now();
    absl::StatusOr<runtime::RunResult> r = model->Run(pointers);
    if (!r.ok()) return Fail(r.status());
    ms.push_back(MsSince(t0));
    kernel_ms.push_back(r->total_ns / 1e6);
  }
  const double wall_s = MsSince(bench_start) / 1e3;
  const LatencySummary s = Summarize(ms);
  const LatencySummary k = Summarize(kernel_ms);
  const double throughput = *iterations * static_cast<double>(batch) / wall_s;
  const double compile_ms = import_ms + compiled->total_ms;

  if (args->Has("json")) {
    std::cout << absl::StrFormat(
        "{\"tool\": \"kiln\", \"schema_version\": 1, "
        "\"model\": %s, \"input_names\": %s, \"inputs\": %s, \"outputs\": %s, "
        "\"batch\": %d, "
        "\"threads\": %d, "
        "\"iterations\": %d, \"warmup\": %d, \"compile_ms\": %.3f, \"import_ms\": %.3f, "
        "\"passes_ms\": %.3f, \"lower_ms\": %.3f, \"codegen_ms\": %.3f, \"jit_init_ms\": %.3f, "
        "\"kernels\": %d, \"kernel_arg_bytes\": %d, \"intermediate_bytes\": %d, "
        "\"first_run_ms\": %.4f, \"p50_ms\": %.4f, \"p90_ms\": %.4f, \"p95_ms\": %.4f, "
        "\"p99_ms\": %.4f, \"mean_ms\": %.4f, \"min_ms\": %.4f, \"max_ms\": %.4f, "
        "\"kernels_p50_ms\": %.4f, \"throughput_per_s\": %.2f, \"tuned_kernels\": %d, "
        "\"row_chunks\": %d, \"flops\": %.0f%s}\n",
        JsonString(path), JsonString(input_names), JsonString(input_shapes),
        JsonString(output_shapes), batch, *threads, *iterations, *warmup, compile_ms, import_ms,
        compiled->record.passes_ms, compiled->record.lower_ms, compiled->codegen_ms, jit_ms,
        static_cast<int>(program.kernels.size()), kernel_arg_bytes, compiled->intermediate_bytes,
        first_ms, s.p50, s.p90, s.p95, s.p99, s.mean, s.min, s.max, k.p50, throughput,
        compiled->tuned_kernels, static_cast<int>(model->row_chunks()), flops,
        *top > 0 ? TopKernelsJson(*model, *compiled, *top, *threads) : "");
    return 0;
  }
  std::cout << absl::StrFormat("kiln-bench %s  inputs %s  outputs %s  threads %d\n", path,
                               input_shapes, output_shapes, *threads);
  std::cout << absl::StrFormat(
      "  cold compile: %.1f ms (import %.1f, passes %.1f, lowering %.1f, codegen+JIT %.1f on %d "
      "compile threads; %d kernels); JIT engine start %.1f ms\n",
      compile_ms, import_ms, compiled->record.passes_ms, compiled->record.lower_ms,
      compiled->codegen_ms, *compile_threads, static_cast<int>(program.kernels.size()), jit_ms);
  if (compiled->tuned_kernels > 0) {
    std::cout << absl::StrFormat("  %d kernels follow tuning records\n", compiled->tuned_kernels);
  }
  if (model->row_chunks() > 1) {
    std::cout << absl::StrFormat("  the batch runs as %d slices of %d rows%s\n",
                                 model->row_chunks(), batch / model->row_chunks(),
                                 has_tail ? absl::StrCat(", then a whole-batch tail of ",
                                                         tail_compile->kernels.size(), " kernels")
                                          : "");
  } else if (!chunk_report.why_whole.empty()) {
    std::cout << "  the batch runs whole: " << chunk_report.why_whole << "\n";
  }
  if (!chunk_report.why_no_tail.empty()) std::cout << "  " << chunk_report.why_no_tail << "\n";
  std::cout << absl::StrFormat("  first run: %.3f ms\n", first_ms);
  std::cout << absl::StrFormat(
      "  %d inferences after %d warm-up:\n"
      "    latency  p50 %.3f ms  p90 %.3f ms  p95 %.3f ms  p99 %.3f ms  (mean %.3f, min %.3f, "
      "max %.3f)\n"
      "    kernels alone  p50 %.3f ms  p99 %.3f ms\n"
      "    throughput  %.1f inferences/s\n",
      *iterations, *warmup, s.p50, s.p90, s.p95, s.p99, s.mean, s.min, s.max, k.p50, k.p99,
      throughput);
  if (*top > 0) PrintTopKernels(*model, *compiled, *top, *threads);
  return 0;
}

}  // namespace
}  // namespace kiln::bench

int main(int argc, char** argv) { return kiln::bench::Main(argc, argv); }
