// One cpp-httplib server listening on its own thread: what the KServe REST
// front end and the metrics page share (port choice, TLS, body limit, JSON
// errors for what the routes never see).
#ifndef KILN_SERVER_HTTP_HTTP_LISTENER_H_
#define KILN_SERVER_HTTP_HTTP_LISTENER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "httplib.h"

namespace kiln::server {

struct HttpListenerOptions {
  std::string address = "127.0.0.1";
  int port = 0;  // 0 picks a free port
  // PEM files as for gRPC (--tls-cert, --tls-key, --tls-client-ca); TLS on
  // when cert and key are set.
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;
  // Larger bodies are refused 413 before they are held (--max-message-mb).
  int64_t max_body_bytes = int64_t{256} << 20;
  // The flag that sets max_body_bytes, named in the 413's message.
  std::string max_body_flag = "--max-message-mb";
};

class HttpListener {
 public:
  // Binds, lets `add_routes` register its handlers, and starts serving.
  // Unavailable when the port cannot be bound; InvalidArgument for TLS files
  // that do not load.
  static absl::StatusOr<std::unique_ptr<HttpListener>> Start(
      const HttpListenerOptions& options, const std::function<void(httplib::Server&)>& add_routes);
  ~HttpListener();

  int port() const { return port_; }
  bool tls() const { return tls_; }
  // Stops accepting; requests under way finish first. Idempotent.
  void Stop();

 private:
  HttpListener() = default;

  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
  bool tls_ = false;
};

}  // namespace kiln::server

#endif  // KILN_SERVER_HTTP_HTTP_LISTENER_H_
