#include "client/tune_command.h"

#include <unistd.h>

#include <iostream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "client/cli_app.h"
#include "client/json_output.h"
#include "client/model_file.h"
#include "client/model_inputs.h"

namespace kiln::client {
namespace {

int Fail(const absl::Status& status) { return PrintFailure("kiln", status); }
int Usage(const std::string& problem) { return PrintUsageError("kiln", problem); }

// --input-shape NAME=D1xD2x... into the model's compile options.
absl::Status ParseInputShapes(const CliArgs& args, kiln::v1::CompileModelRequest* request) {
  std::vector<std::string> shaped;
  for (const std::string& spec : args.GetAll("input-shape")) {
    const size_t eq = spec.find('=');
    if (eq == std::string::npos) {
      return absl::InvalidArgumentError("--input-shape wants NAME=D1xD2x...");
    }
    shaped.push_back(spec.substr(0, eq));
    kiln::v1::IntList& dims = (*request->mutable_options()->mutable_input_shapes())[shaped.back()];
    for (absl::string_view d : absl::StrSplit(spec.substr(eq + 1), 'x')) {
      int64_t v;
      if (!absl::SimpleAtoi(d, &v)) {
        return absl::InvalidArgumentError("--input-shape wants NAME=D1xD2x...");
      }
      dims.add_values(v);
    }
  }
  if (shaped.empty()) return absl::OkStatus();
  absl::StatusOr<std::vector<std::string>> inputs = ModelInputNames(*request);
  if (!inputs.ok()) return inputs.status();
  return CheckInputNames(shaped, *inputs, "--input-shape");
}

}  // namespace

std::string FormatTuneReport(const kiln::v1::TuneProgress& f) {
  std::string out =
      absl::StrFormat("tuned %d kernel structures in %.1f s on %s; %d records written\n",
                      f.kernels_size(), f.seconds(), f.cpu(), f.records_written());
  if (f.kernels_size() == 0) return out;
  absl::StrAppend(&out, absl::StrFormat("  %-32s %4s %5s %11s %11s %6s  %s\n", "kernel", "x",
                                        "plans", "default us", "tuned us", "gain", "record"));
  for (const kiln::v1::KernelTuning& k : f.kernels()) {
    absl::StrAppend(
        &out, absl::StrFormat("  %-32s %4d %5d %11.1f %11.1f %5.2fx  %s\n", k.name(), k.instances(),
                              k.candidates(), k.default_us(), k.best_us(),
                              k.best_us() > 0 ? k.default_us() / k.best_us() : 1.0,
                              k.recorded() ? k.best_override() : "(estimate kept)"));
  }
  return out;
}

int TuneCommand(KilnClient& client, const CliArgs& args) {
  if (args.positional.size() != 2) return Usage("tune takes one FILE");
  kiln::v1::TuneModelRequest request;
  if (absl::Status loaded = LoadModelInto(args.positional[1], request.mutable_model());
      !loaded.ok()) {
    return Fail(loaded);
  }
  if (absl::Status shapes = ParseInputShapes(args, request.mutable_model()); !shapes.ok()) {
    return Fail(shapes);
  }
  if (!args.Get("budget").empty()) {
    double budget = 0;
    if (!absl::SimpleAtod(args.Get("budget"), &budget)) return Usage("--budget takes seconds");
    request.set_budget_s_per_kernel(budget);
  }
  if (!args.Get("max-candidates").empty()) {
    int n = 0;
    if (!absl::SimpleAtoi(args.Get("max-candidates"), &n)) {
      return Usage("--max-candidates takes a number");
    }
    request.set_max_candidates(n);
  }
  if (!args.Get("min-gain").empty()) {
    double gain = 0;
    if (!absl::SimpleAtod(args.Get("min-gain"), &gain)) return Usage("--min-gain takes a number");
    request.set_min_gain(gain);
  }
  const bool tty = ::isatty(STDERR_FILENO);
  auto on_progress = [&](const kiln::v1::TuneProgress& p) {
    if (!tty) return;
    const kiln::v1::KernelTuning& k = p.kernel();
    std::cerr << absl::StrFormat("[%d/%d] %s: %d plans, %.1f -> %.1f us\n", p.kernels_done(),
                                 p.kernels_total(), k.name(), k.candidates(), k.default_us(),
                                 k.best_us());
  };
  absl::StatusOr<kiln::v1::TuneProgress> finished = client.Tune(request, on_progress);
  if (!finished.ok()) return Fail(finished.status());
  std::cout << (args.Has("json") ? JsonDocument(*finished) + "\n" : FormatTuneReport(*finished));
  return 0;
}

}  // namespace kiln::client
