// kiln-server flags, HTTP and metrics: KServe v2 over HTTP/REST and the
// Prometheus page, each off unless given a port. One file per group: --help
// lists each file's flags under its name.
#include <cstdint>
#include <string>

#include "absl/flags/flag.h"

ABSL_FLAG(int, http_port, -1,
          "KServe v2 over HTTP/REST on this port (Triton's default is 8000; 0 picks a free "
          "one; -1: off), with the same TLS, tokens and --max-message-mb as gRPC");
ABSL_FLAG(int, metrics_port, -1,
          "Prometheus metrics at GET /metrics on this port (Triton's default is 8002; 0 picks "
          "a free one; -1: off)");
