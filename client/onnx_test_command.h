// `kiln onnx-test CASE_DIR... [--model-tolerance] [--json]`: ONNX's backend
// cases (or exported models in their layout) through a server, one line per
// case and a tally; every unsupported case gets a reason category
// (operator, dtype, opset, value-dependent shape, attribute, training,
// zero-size tensor, sequence or optional, test data),
// tallied in the text output and given per case with --json.
#ifndef KILN_CLIENT_ONNX_TEST_COMMAND_H_
#define KILN_CLIENT_ONNX_TEST_COMMAND_H_

#include <string>

#include "absl/strings/string_view.h"
#include "client/cli_args.h"
#include "client/kiln_client.h"

namespace kiln::client {

// The category of an unsupported case, from the server's reason.
std::string UnsupportedCategory(absl::string_view reason);

// Runs the command; the process exit code (1 when any case failed).
int OnnxTestCommand(KilnClient& client, const CliArgs& args);

}  // namespace kiln::client

#endif  // KILN_CLIENT_ONNX_TEST_COMMAND_H_
