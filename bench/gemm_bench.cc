// gemm-bench: float32 GEMM GFLOPS of Kiln, OpenBLAS and oneDNN side by side,
// in one process.
//
//   gemm-bench [--threads 1,2] [--shapes square,inference | --shapes MxKxN,...]
//              [--repeats R] [--min-repeat-ms MS] [--stat median|min] [--json]
//
// C[M,N] = A[M,K] B[K,N] with B constant, as in a dense layer. Kiln's GEMM is a
// one-node model (MatMul of an input A and a constant B, built here as an IR
// graph), compiled in-process through the runtime with a memory-only cache and
// run through CompiledModel::Run; only the kernels' own time (RunResult's
// total_ns) counts, not input checks or the output copy. OpenBLAS is
// cblas_sgemm (openblas_set_num_threads), oneDNN is dnnl_sgemm (its CPU
// runtime is OpenMP: omp_set_num_threads). Both get B row-major, unpacked.
//
// Timing: per library, one warm-up call and `number` chosen so a repeat takes
// about --min-repeat-ms; then R rounds, each one repeat of every library in
// turn, with a pause after a library whose idle workers spin, so they do not
// steal the next one's cores. The figure is the median repeat's mean per call,
// or with --stat min the fastest repeat's: on a host shared with other work,
// the least disturbed run of each library.
// Kiln's output is checked against OpenBLAS's: max |C - C_ref| / max |C_ref|.
//
// Debian's OpenBLAS 0.3.21 does not know this CPU and falls back to slow
// kernels unless OPENBLAS_CORETYPE=SkylakeX is set before it loads: bench/gemm.sh
// sets it, and the header line says which core OpenBLAS chose.
#include <optional>
#include <memory>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/bench_util.h"
#include "client/cli_app.h"
#include "common/ms_since.h"
#include "cblas.h"
#include "compiler/ir/graph.h"
#include "compiler/ops/op_registry.h"
#include "oneapi/dnnl/dnnl.h"
#include "engine/model_manager.h"
#include "runtime/thread_pool.h"

namespace kiln::bench {
namespace {

struct Shape {
  int64_t m, k, n;
};

const std::vector<Shape> kSquare = {
    {256, 256, 256}, {512, 512, 512}, {1024, 1024, 1024}, {2048, 2048, 2048}};
// Issue 5's inference shapes: a GEMV-like dense layer, a transformer FFN, a small MLP batch.
const std::vector<Shape> kInference = {{1, 768, 768}, {64, 768, 3072}, {128, 512, 512}};

using Clock = std::chrono::steady_clock;

// What one library achieved on one shape.
struct Timing {
  double ms = 0;  // per call, median (or fastest) repeat
  double gflops = 0;
};

// One library under measurement. `call` returns the seconds it wants counted
// (its own wall time, or only its kernels'); `idle_ms` is how long its worker
// threads may go on spinning after a call, paused for before another library runs.
struct Contender {
  std::function<double()> call;
  int idle_ms = 0;
  int number = 1;  // calls per repeat
  std::vector<double> per_call;
};

// Times the contenders the way TVM's time_evaluator times one function, but
// with their repeats interleaved (A B C A B C ...), so that a slow spell of the
// machine — this is a VM — falls on all of them alike.
std::vector<Timing> Measure(std::vector<Contender>& contenders, const Shape& s, int repeats,
                            double min_repeat_ms, int threads, bool fastest) {
  auto settle = [&](const Contender& c) {
    if (threads > 1 && c.idle_ms > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(c.idle_ms));
    }
  };
  for (Contender& c : contenders) {
    c.call();  // warm-up: JIT, thread start, first touch
    const double once_s = std::max(c.call(), 1e-7);
    c.number = std::max(1, static_cast<int>(std::ceil(min_repeat_ms / 1e3 / once_s)));
    c.per_call.clear();
    settle(c);
  }
  for (int r = 0; r < repeats; ++r) {
    for (Contender& c : contenders) {
      double total = 0;
      for (int i = 0; i < c.number; ++i) total += c.call();
      c.per_call.push_back(total / c.number);
      settle(c);
    }
  }
  std::vector<Timing> timings;
  for (Contender& c : contenders) {
    std::sort(c.per_call.begin(), c.per_call.end());
    Timing t;
    const double sec = fastest ? c.per_call[0] : c.per_call[(c.per_call.size() - 1) / 2];
    t.ms = sec * 1e3;
    t.gflops = 2.0 * s.m * s.n * s.k / sec / 1e9;
    timings.push_back(t);
  }
  return timings;
}

double SecondsOf(const std::function<void()>& f) {
  const Clock::time_point t0 = Clock::now();
  f();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// max |got - want| / max |want|.
double MaxRelError(const float* got, const float* want, int64_t n) {
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < n; ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

// C = A B as a Kiln graph: input "a" [M,K], constant "b" [K,N], one matmul.
Graph GemmGraph(const Shape& s, const std::vector<float>& b) {
  Graph g;
  g.name = absl::StrCat("gemm_", s.m, "x", s.k, "x", s.n);
  Node* a = g.AddInput("a", TensorType{DType::kFloat32, {s.m, s.k}});
  auto data = std::make_shared<ConstantData>();
  data->type = TensorType{DType::kFloat32, {s.k, s.n}};
  data->bytes.assign(reinterpret_cast<const char*>(b.data()), b.size() * sizeof(float));
  Node* bn = g.AddConstant("b", std::move(data));
  Node* c = g.AddOp("c", OpRegistry::Default().Find("matmul"), {a, bn}, NoAttrs{});
  g.AddOutput(c);
  return g;
}

absl::StatusOr<std::vector<Shape>> ParseShapes(const std::string& spec) {
  std::vector<Shape> shapes;
  for (absl::string_view word : absl::StrSplit(spec, ',', absl::SkipEmpty())) {
    if (word == "square") {
      shapes.insert(shapes.end(), kSquare.begin(), kSquare.end());
      continue;
    }
    if (word == "inference") {
      shapes.insert(shapes.end(), kInference.begin(), kInference.end());
      continue;
    }
    std::vector<absl::string_view> dims = absl::StrSplit(word, 'x');
    Shape s;
    if (dims.size() != 3 || !absl::SimpleAtoi(dims[0], &s.m) || !absl::SimpleAtoi(dims[1], &s.k) ||
        !absl::SimpleAtoi(dims[2], &s.n) || s.m < 1 || s.k < 1 || s.n < 1) {
      return absl::InvalidArgumentError(absl::StrCat("bad shape '", word, "' (want MxKxN)"));
    }
    shapes.push_back(s);
  }
  return shapes;
}

absl::StatusOr<std::vector<int>> ParseInts(const std::string& spec) {
  std::vector<int> out;
  for (absl::string_view word : absl::StrSplit(spec, ',', absl::SkipEmpty())) {
    int v;
    if (!absl::SimpleAtoi(word, &v) || v < 1) {
      return absl::InvalidArgumentError(absl::StrCat("bad thread count '", word, "'"));
    }
    out.push_back(v);
  }
  return out;
}

int Main(int argc, char** argv) {
  std::unique_ptr<CLI::App> cli =
      client::NewCliApp("gemm-bench", "gemm-bench: GEMM GFLOPS of Kiln, OpenBLAS and oneDNN.");
  client::AddValue(cli.get(), "threads", "T[,T...]", "Thread counts to run (default 1,2)");
  client::AddValue(cli.get(), "shapes", "square|inference|MxKxN[,...]",
                   "Shapes (default square,inference)");
  client::AddValue(cli.get(), "repeats", "R", "Measurements, the best reported (default 5)");
  client::AddValue(cli.get(), "stat", "median|min",
                   "Which repeat is reported (default median; min on a busy host)");
  client::AddValue(cli.get(), "min-repeat-ms", "MS", "Least time per measurement (default 50)");
  client::AddSwitch(cli.get(), "json", "Print one JSON object per line");
  client::SetExample(cli.get(), "gemm-bench --threads 1 --shapes 64x768x3072 --json");
  client::CliArgs parsed;
  if (std::optional<int> done = client::ParseCommandLine(*cli, argc, argv, &parsed)) return *done;
  const client::CliArgs* args = &parsed;
  absl::StatusOr<std::vector<int>> threads = ParseInts(args->Get("threads", "1,2"));
  absl::StatusOr<std::vector<Shape>> shapes = ParseShapes(args->Get("shapes", "square,inference"));
  absl::StatusOr<int> repeats = args->GetInt("repeats", 5, 1);
  absl::StatusOr<int> min_repeat_ms = args->GetInt("min-repeat-ms", 50, 0);
  for (const absl::Status& st :
       {threads.status(), shapes.status(), repeats.status(), min_repeat_ms.status()}) {
    if (!st.ok()) {
      return client::PrintUsageError("gemm-bench", std::string(st.message()));
    }
  }
  const bool json = args->Has("json");
  const std::string stat = args->Get("stat", "median");
  if (stat != "median" && stat != "min") {
    return client::PrintUsageError("gemm-bench", "--stat must be median or min");
  }

  engine::ModelManagerOptions options;
  options.cache.dir.clear();
  absl::StatusOr<std::unique_ptr<engine::ModelManager>> manager =
      engine::ModelManager::Create(options);
  if (!manager.ok()) {
    std::cerr << "gemm-bench: " << manager.status() << "\n";
    return 1;
  }
  const dnnl_version_t* dv = dnnl_version();
  const std::string corename = openblas_get_corename();
  if (!json) {
    std::cout << absl::StrFormat(
        "float32 GEMM C[M,N] = A[M,K] B[K,N], B constant; GFLOPS = 2MNK / time, %s of %d "
        "repeats\nOpenBLAS core %s%s; oneDNN %d.%d.%d (OpenMP); Kiln: kernels' own time\n",
        stat, *repeats, corename,
        corename == "SkylakeX" ? "" : " (slow: run with OPENBLAS_CORETYPE=SkylakeX, see gemm.sh)",
        dv->major, dv->minor, dv->patch);
    std::cout << absl::StrFormat("%6s %6s %6s %4s %10s %10s %10s %8s %8s %11s %11s %10s\n", "M",
                                 "K", "N", "thr", "kiln", "openblas", "onednn", "k/blas", "k/dnnl",
                                 "err kiln", "err dnnl", "compile ms");
  }
  std::vector<std::string> records;
  for (const Shape& s : *shapes) {
    std::vector<float> a(s.m * s.k), b(s.k * s.n), c_blas(s.m * s.n), c_dnnl(s.m * s.n);
    FillPseudorandom(a.data(), a.size(), 1);
    FillPseudorandom(b.data(), b.size(), 2);

    // Kiln: compile once per shape (the kernel does not depend on the thread count).
    const Clock::time_point compile_start = Clock::now();
    absl::StatusOr<engine::CompileResult> compiled =
        (*manager)->Compile("gemm", GemmGraph(s, b), CompileOptions{});
    if (!compiled.ok()) {
      std::cerr << "gemm-bench: kiln compile: " << compiled.status() << "\n";
      return 1;
    }
    const double compile_ms = MsSince(compile_start);
    std::shared_ptr<runtime::CompiledModel> model = (*manager)->Find("gemm");
    std::string schedule;
    for (const engine::KernelCompileReport& k : compiled->kernels) {
      absl::StrAppend(&schedule, schedule.empty() ? "" : "; ",
                      k.schedule.empty() ? k.name : k.schedule);
    }
    absl::StatusOr<runtime::Tensor> input = runtime::Tensor::FromBytes(
        TensorType{DType::kFloat32, {s.m, s.k}},
        absl::string_view(reinterpret_cast<const char*>(a.data()), a.size() * sizeof(float)));
    if (!input.ok()) {
      std::cerr << "gemm-bench: " << input.status() << "\n";
      return 1;
    }
    std::vector<float> c_kiln;
    absl::Status run_status;
    auto kiln_call = [&]() -> double {
      absl::StatusOr<runtime::RunResult> r = model->Run({&*input});
      if (!r.ok()) {
        run_status = r.status();
        return 1e-3;
      }
      if (c_kiln.empty()) {
        const float* p = static_cast<const float*>(r->outputs[0].data());
        c_kiln.assign(p, p + s.m * s.n);
      }
      return r->total_ns / 1e9;
    };
    auto blas_call = [&]() -> double {
      return SecondsOf([&] {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s.m, s.n, s.k, 1.0f, a.data(), s.k,
                    b.data(), s.n, 0.0f, c_blas.data(), s.n);
      });
    };
    auto dnnl_call = [&]() -> double {
      return SecondsOf([&] {
        dnnl_sgemm('N', 'N', s.m, s.n, s.k, 1.0f, a.data(), s.k, b.data(), s.n, 0.0f, c_dnnl.data(),
                   s.n);
      });
    };

    for (int t : *threads) {
      runtime::SetParallelThreads(t);
      openblas_set_num_threads(t);
      omp_set_num_threads(t);
      // Kiln's pool sleeps on a condition variable; OpenBLAS's workers spin for
      // about 2^28 cycles after a call, GNU OpenMP's for some milliseconds.
      std::vector<Contender> contenders = {{kiln_call, 0}, {blas_call, 150}, {dnnl_call, 50}};
      const std::vector<Timing> timings = Measure(contenders, s, *repeats, *min_repeat_ms, t,
                                                  /*fastest=*/stat == "min");
      if (!run_status.ok()) {
        std::cerr << "gemm-bench: kiln run: " << run_status << "\n";
        return 1;
      }
      const Timing& kiln = timings[0];
      const Timing& blas = timings[1];
      const Timing& dnnl = timings[2];
      const int64_t n_out = s.m * s.n;
      const double err_kiln = MaxRelError(c_kiln.data(), c_blas.data(), n_out);
      const double err_dnnl = MaxRelError(c_dnnl.data(), c_blas.data(), n_out);
      if (json) {
        records.push_back(absl::StrFormat(
            "{\"tool\": \"gemm\", \"schema_version\": 1, "
            "\"m\": %d, \"k\": %d, \"n\": %d, \"threads\": %d, \"kiln_gflops\": %.3f, "
            "\"openblas_gflops\": %.3f, \"onednn_gflops\": %.3f, \"kiln_ms\": %.4f, "
            "\"openblas_ms\": %.4f, \"onednn_ms\": %.4f, \"kiln_max_rel_err\": %.3g, "
            "\"onednn_max_rel_err\": %.3g, \"kiln_compile_ms\": %.1f, \"kiln_schedule\": \"%s\", "
            "\"stat\": \"%s\"}",
            s.m, s.k, s.n, t, kiln.gflops, blas.gflops, dnnl.gflops, kiln.ms, blas.ms, dnnl.ms,
            err_kiln, err_dnnl, compile_ms, schedule, stat));
      } else {
        std::cout << absl::StrFormat(
            "%6d %6d %6d %4d %10.1f %10.1f %10.1f %8.2f %8.2f %11.2e %11.2e %10.1f\n", s.m, s.k,
            s.n, t, kiln.gflops, blas.gflops, dnnl.gflops, kiln.gflops / blas.gflops,
            kiln.gflops / dnnl.gflops, err_kiln, err_dnnl, compile_ms);
        std::cout.flush();
      }
    }
    (void)(*manager)->Unload("gemm");
  }
  if (json) std::cout << "[" << absl::StrJoin(records, ",\n ") << "]\n";
  return 0;
}

}  // namespace
}  // namespace kiln::bench

int main(int argc, char** argv) { return kiln::bench::Main(argc, argv); }
