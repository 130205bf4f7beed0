// `kiln tune MODEL`: measured tuning through the server (TuneModel). Prints
// each kernel's timings and the schedule recorded for this server's CPU;
// later compiles there follow the records.
#ifndef KILN_CLIENT_TUNE_COMMAND_H_
#define KILN_CLIENT_TUNE_COMMAND_H_

#include <string>

#include "client/cli_args.h"
#include "client/kiln_client.h"
#include "proto/kiln_service.pb.h"

namespace kiln::client {

// The exit status; the report goes to stdout, progress to a terminal's stderr.
int TuneCommand(KilnClient& client, const CliArgs& args);

// The FINISHED event as a table: one row per kernel structure.
std::string FormatTuneReport(const kiln::v1::TuneProgress& finished);

}  // namespace kiln::client

#endif  // KILN_CLIENT_TUNE_COMMAND_H_
