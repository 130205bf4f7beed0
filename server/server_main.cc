// kiln-server: the gRPC front of Kiln.
#include <csignal>
#include <iostream>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "server/kiln_server.h"

ABSL_FLAG(std::string, address, "127.0.0.1", "address to bind");
ABSL_FLAG(int, port, 50051, "port to listen on (0 picks a free one)");
ABSL_FLAG(int, threads, 0, "threads for kernels' parallel loops (0: one per core)");
ABSL_FLAG(int, max_models, 64, "models held at once; more is RESOURCE_EXHAUSTED");
ABSL_FLAG(int, max_message_mb, 256, "largest gRPC message in MiB (models carry weights)");

namespace {
volatile std::sig_atomic_t stop_requested = 0;
void OnSignal(int) { stop_requested = 1; }
}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("kiln-server [--address A] [--port P] [--threads N]");
  absl::ParseCommandLine(argc, argv);
  kiln::server::ServerOptions options;
  options.address = absl::GetFlag(FLAGS_address);
  options.port = absl::GetFlag(FLAGS_port);
  options.threads = absl::GetFlag(FLAGS_threads);
  options.max_models = absl::GetFlag(FLAGS_max_models);
  options.max_message_mb = absl::GetFlag(FLAGS_max_message_mb);
  auto server = kiln::server::StartKilnServer(options);
  if (!server.ok()) {
    std::cerr << "kiln-server: " << server.status() << "\n";
    return 1;
  }
  std::cout << "kiln-server listening on " << options.address << ":" << (*server)->port()
            << std::endl;
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  std::thread waiter([&] { (*server)->Wait(); });
  while (!stop_requested) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  (*server)->Shutdown();
  waiter.join();
  return 0;
}
