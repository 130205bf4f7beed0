// Runs ONNX's own backend test cases (a directory with model.onnx and
// test_data_set_N/{input_K,output_K}.pb) through a Kiln server and compares
// with ONNX's runner tolerances (rtol 1e-3, atol 1e-7).
#ifndef KILN_CLIENT_ONNX_CONFORMANCE_H_
#define KILN_CLIENT_ONNX_CONFORMANCE_H_

#include <string>

#include "client/kiln_client.h"

namespace kiln::client {

struct OnnxCaseResult {
  enum class Outcome { kPass, kFail, kUnsupported };
  Outcome outcome = Outcome::kFail;
  // FAIL: the worst element or the error; UNSUPPORTED: the server's reason.
  std::string detail;
};

enum class Tolerance {
  kOnnxRunner,  // |got - want| <= 1e-7 + 1e-3 |want|, per element (ONNX's runner)
  kModel,       // |got - want| <= 1e-4 * max(1, max |want|), for whole models, or the
                // absolute tolerance the case declares in a file `tolerance`
};

OnnxCaseResult RunOnnxCase(KilnClient& client, const std::string& case_dir,
                           Tolerance tolerance = Tolerance::kOnnxRunner);

const char* OutcomeName(OnnxCaseResult::Outcome outcome);

}  // namespace kiln::client

#endif  // KILN_CLIENT_ONNX_CONFORMANCE_H_
