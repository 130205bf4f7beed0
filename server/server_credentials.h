// What kiln-server listens with: TLS from --tls-cert/--tls-key (mutual TLS
// with --tls-client-ca), else plain text.
#ifndef KILN_SERVER_SERVER_CREDENTIALS_H_
#define KILN_SERVER_SERVER_CREDENTIALS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/security/server_credentials.h"

namespace kiln::server {

struct TlsFiles {
  std::string cert;       // PEM certificate chain
  std::string key;        // PEM private key
  std::string client_ca;  // PEM CA for client certificates; empty: none asked for
};

// InvalidArgument naming the flag for an unreadable file, or a certificate
// without its key (or the other way round), or a client CA without TLS.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsFiles& files);

// Whether `address` only takes connections from this machine.
bool IsLoopback(const std::string& address);

}  // namespace kiln::server

#endif  // KILN_SERVER_SERVER_CREDENTIALS_H_
