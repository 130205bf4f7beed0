// Every `kiln` command and flag, declared once: `kiln --help`, each
// `kiln COMMAND --help` and the parse all come from this declaration.
#ifndef KILN_CLIENT_KILN_CLI_H_
#define KILN_CLIENT_KILN_CLI_H_

#include <memory>

#include "CLI/CLI.hpp"

namespace kiln::client {

std::unique_ptr<CLI::App> NewKilnCli();

}  // namespace kiln::client

#endif  // KILN_CLIENT_KILN_CLI_H_
