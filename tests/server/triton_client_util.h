// What the tests of the Triton-compatible RPCs share: a model repository
// written into the test's temporary directory, a kiln-server process serving
// it, and requests built the way Triton's Python client builds them
// (InferInput.set_data_from_numpy: FP32 raw contents, one per input, in the
// order of `inputs`).
#ifndef KILN_TESTS_SERVER_TRITON_CLIENT_UTIL_H_
#define KILN_TESTS_SERVER_TRITON_CLIENT_UTIL_H_

#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "google/protobuf/text_format.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/grpc_service.grpc.pb.h"
#include "proto/kiln_service.grpc.pb.h"
#include "tests/server/server_fixture.h"
#include "tests/server/server_process.h"
#include "tests/test_util/npy_fixture.h"

namespace kiln::testing {

inline std::string TestTmpDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/" + name;
  std::system(("rm -rf " + dir + " && mkdir -p " + dir).c_str());
  return dir;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

inline void WriteFile(const std::string& path, const std::string& bytes) {
  std::system(("mkdir -p " + path.substr(0, path.rfind('/'))).c_str());
  std::ofstream(path, std::ios::binary) << bytes;
}

// A repository under `root`/repo: mlp (the MLP graph, x float32[4,16]),
// and `onnx_models` each a copy of the ONNX MLP with a symbolic batch
// (x float32[batch,16] -> y float32[batch,5]), broken (an ONNX model with an
// operator Kiln lacks, RandomUniformLike: its compile fails). Returns the repository's path.
inline std::string WriteRepository(const std::string& root,
                                   const std::vector<std::string>& onnx_models) {
  const std::string repo = root + "/repo";
  std::string text;
  EXPECT_TRUE(google::protobuf::TextFormat::PrintToString(MlpGraph(), &text));
  WriteFile(repo + "/mlp/1/model.pbtxt", text);
  const std::string mlp_dynamic = ReadFile(std::string(kOnnxData) + "mlp_dynamic.onnx");
  EXPECT_FALSE(mlp_dynamic.empty());
  for (const std::string& name : onnx_models)
    WriteFile(repo + "/" + name + "/1/model.onnx", mlp_dynamic);
  WriteFile(repo + "/broken/1/model.onnx",
            ReadFile(std::string(kOnnxData) + "unsupported_op.onnx"));
  return repo;
}

inline std::shared_ptr<grpc::Channel> ChannelTo(const ServerProcess& server) {
  return grpc::CreateChannel("127.0.0.1:" + std::to_string(server.port()),
                             grpc::InsecureChannelCredentials());
}

// Compiles the ONNX MLP with a symbolic batch as `name` on `channel`, with
// dynamic batching up to `max_batch` rows, preferring `preferred`, and a
// queue delay no test waits out (batches form by size).
inline void CompileBatchingMlp(const std::shared_ptr<grpc::Channel>& channel,
                               const std::string& name, int max_batch, int preferred) {
  auto compiler = kiln::v1::Compiler::NewStub(channel);
  kiln::v1::CompileModelRequest compile;
  compile.set_model_name(name);
  compile.set_onnx_model(ReadFile(std::string(kOnnxData) + "mlp_dynamic.onnx"));
  kiln::v1::DynamicBatching* batching = compile.mutable_options()->mutable_dynamic_batching();
  batching->set_max_batch_size(max_batch);
  batching->add_preferred_batch_size(preferred);
  batching->set_max_queue_delay_microseconds(10'000'000);
  grpc::ClientContext ctx;
  kiln::v1::CompileModelResponse compiled;
  grpc::Status s = compiler->CompileModel(&ctx, compile, &compiled);
  ASSERT_TRUE(s.ok()) << s.error_message();
}

// The ONNX MLP's NumPy input (7 rows) and output.
inline NpyFloat32 MlpDynamicX() {
  absl::StatusOr<NpyFloat32> x = ReadNpyFloat32(std::string(kOnnxData) + "mlp_dynamic_x.npy");
  EXPECT_TRUE(x.ok()) << x.status();
  return x.ok() ? *std::move(x) : NpyFloat32{};
}
inline NpyFloat32 MlpDynamicY() {
  absl::StatusOr<NpyFloat32> y = ReadNpyFloat32(std::string(kOnnxData) + "mlp_dynamic_y.npy");
  EXPECT_TRUE(y.ok()) << y.status();
  return y.ok() ? *std::move(y) : NpyFloat32{};
}

// A request for `rows` rows of the ONNX MLP's input from row `first`.
inline inference::ModelInferRequest MlpRowsRequest(const std::string& model, int64_t first,
                                                   int64_t rows, const std::string& id = "") {
  const NpyFloat32 x = MlpDynamicX();
  inference::ModelInferRequest r;
  r.set_model_name(model);
  r.set_id(id);
  AddInput(r, "x", "FP32", {rows, 16});
  r.add_raw_input_contents(x.bytes().substr(first * 16 * sizeof(float), rows * 16 * sizeof(float)));
  return r;
}

// Expects `response` to hold NumPy's output for rows [first, first + rows).
inline void ExpectMlpRows(const inference::ModelInferResponse& response, int64_t first,
                          int64_t rows) {
  const NpyFloat32 y = MlpDynamicY();
  ASSERT_EQ(response.raw_output_contents_size(), 1);
  std::vector<float> got = Floats(response.raw_output_contents(0));
  ASSERT_EQ(got.size(), static_cast<size_t>(rows * 5));
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], y.values[first * 5 + i], 1e-5) << i;
  }
}

}  // namespace kiln::testing

#endif  // KILN_TESTS_SERVER_TRITON_CLIENT_UTIL_H_
