#include "server/http/http_listener.h"

#include <exception>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "server/http/kserve_json.h"

namespace kiln::server {

absl::StatusOr<std::unique_ptr<HttpListener>> HttpListener::Start(
    const HttpListenerOptions& options, const std::function<void(httplib::Server&)>& add_routes) {
  std::unique_ptr<HttpListener> listener(new HttpListener());
  if (options.tls_cert.empty() != options.tls_key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  if (!options.tls_cert.empty()) {
    auto ssl = std::make_unique<httplib::SSLServer>(
        options.tls_cert.c_str(), options.tls_key.c_str(),
        options.tls_client_ca.empty() ? nullptr : options.tls_client_ca.c_str());
    if (!ssl->is_valid()) {
      return absl::InvalidArgumentError(
          "the HTTP listener cannot load --tls-cert/--tls-key (or --tls-client-ca)");
    }
    listener->server_ = std::move(ssl);
    listener->tls_ = true;
  } else {
    listener->server_ = std::make_unique<httplib::Server>();
  }
  httplib::Server& server = *listener->server_;
  server.set_payload_max_length(static_cast<size_t>(options.max_body_bytes));
  // Whatever a route did not answer itself (no route, a body too large, a
  // malformed request line) still answers KServe's {"error": ...}.
  const std::string too_large =
      absl::StrCat("the request body is larger than ", options.max_body_bytes, " bytes (",
                   options.max_body_flag, ")");
  server.set_error_handler(httplib::Server::HandlerWithResponse(
      [too_large](const httplib::Request& request, httplib::Response& response) {
        if (!response.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        std::string message;
        switch (response.status) {
          case 404:
            message = absl::StrCat("no route for ", request.method, " ", request.path);
            break;
          case 413:
            message = too_large;
            break;
          default:
            message = absl::StrCat("HTTP ", response.status);
        }
        response.set_content(RenderError(message), "application/json");
        return httplib::Server::HandlerResponse::Handled;
      }));
  server.set_exception_handler(
      [](const httplib::Request&, httplib::Response& response, std::exception_ptr) {
        response.status = 500;
        response.set_content(RenderError("internal error"), "application/json");
      });
  add_routes(server);
  // Any other request with a body: 404 without reading it. httplib reads (and
  // inflates, for a Content-Encoding) a body before looking for its route,
  // and --max-message-mb bounds only the bytes on the wire: a small gzip
  // body to no route at all could have taken gigabytes. The connection is
  // closed, as the unread body is still on it.
  const auto no_route = [](const httplib::Request& request, httplib::Response& response,
                           const httplib::ContentReader&) {
    response.status = 404;
    response.set_header("Connection", "close");
    response.set_content(
        RenderError(absl::StrCat("no route for ", request.method, " ", request.path)),
        "application/json");
  };
  server.Post(".*", no_route);
  server.Put(".*", no_route);
  server.Patch(".*", no_route);
  server.Delete(".*", no_route);
  if (options.port == 0) {
    listener->port_ = server.bind_to_any_port(options.address);
  } else if (server.bind_to_port(options.address, options.port)) {
    listener->port_ = options.port;
  }
  if (listener->port_ <= 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen for HTTP on ", options.address, ":",
                                               options.port, " (is the port in use?)"));
  }
  listener->thread_ = std::thread([&server] { server.listen_after_bind(); });
  return listener;
}

void HttpListener::Stop() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

HttpListener::~HttpListener() { Stop(); }

}  // namespace kiln::server
