// kiln-server flags, network: where the server listens and what one connection
// may carry (the HTTP and metrics ports are in http_metrics.cc). One file per
// group: --help lists each file's flags under its name.
#include <cstdint>
#include <string>

#include "absl/flags/flag.h"

ABSL_FLAG(std::string, address, "127.0.0.1", "address to bind");
ABSL_FLAG(int, port, 50051, "port to listen on (0 picks a free one)");
ABSL_FLAG(int, max_message_mb, 256, "largest gRPC message in MiB (models carry weights)");
ABSL_FLAG(double, max_connection_idle_s, 300,
          "connections with no call this long are closed (0: never)");
ABSL_FLAG(double, max_connection_age_s, 0,
          "connections are closed (GOAWAY, calls under way finish) about this long after they "
          "open, so clients balancing on their own (a headless Service) re-resolve and reach "
          "replicas added since (0: never)");
ABSL_FLAG(int, max_concurrent_streams, 100, "calls in flight on one connection");
ABSL_FLAG(int, max_connections, 0,
          "open gRPC connections at most; one more is closed at once and its client retries "
          "(plaintext only; 0: no cap)");
ABSL_FLAG(double, shutdown_grace_s, 10,
          "on SIGTERM/SIGINT, calls under way get this long to finish; then they are "
          "cancelled, and the process exits at most 2 s later whatever still runs");
