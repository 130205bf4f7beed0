// kiln-server flags, security: TLS, mutual TLS and bearer tokens. One file per
// group: --help lists each file's flags under its name.
#include <cstdint>
#include <string>

#include "absl/flags/flag.h"

ABSL_FLAG(std::string, tls_cert, "", "PEM certificate chain: TLS on (with --tls-key)");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls-cert");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA that client certificates must be signed by (mutual TLS)");
ABSL_FLAG(std::string, auth_tokens, "",
          "file of 'TOKEN SCOPE[,SCOPE] [expires=UNIX_SECONDS]' lines (scopes infer, admin); "
          "calls then need 'authorization: Bearer TOKEN'");
