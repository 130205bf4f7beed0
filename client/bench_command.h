// `kiln bench`: compile a model, then drive it through the server as
// perf_analyzer does (C concurrent clients, batch B per request) and report
// latency percentiles, throughput and the batches the server formed.
#ifndef KILN_CLIENT_BENCH_COMMAND_H_
#define KILN_CLIENT_BENCH_COMMAND_H_

#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "client/kiln_client.h"
#include "proto/kiln_service.pb.h"

namespace kiln::client {

struct BenchOptions {
  std::string path;  // the model file; empty with `model`
  // A model already loaded, benchmarked as it is (not compiled, not unloaded).
  std::string model;
  // Compile the file frozen at the benchmark's shapes (its symbolic dims
  // fixed): the exact-shape model a symbolic one is compared against.
  bool exact = false;
  int batch = 1;
  int concurrency = 1;
  int iterations = 100;  // per client
  int warmup = 10;       // per client
  bool json = false;
  // Dynamic batching and other options the model is compiled with.
  kiln::v1::CompileOptions compile;
};

absl::Status RunBench(KilnClient& client, const BenchOptions& options, std::ostream& out);

}  // namespace kiln::client

#endif  // KILN_CLIENT_BENCH_COMMAND_H_
