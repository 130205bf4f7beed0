// Bytes -> inference.ModelInferRequest -> the decoding ModelInfer does, against
// two small fixed models:
//   static:   x float32[2,3], ids int64[4], mask bool[2,2]; output y (= x)
//   symbolic: x float32[batch,3] and `shape` int64[2], an input that decides
//             shapes (its values are compiled in, the variant program takes x only)
// For the symbolic model, RequestVariantKey runs first; its key is checked as
// ShapeVariants::Check would before the inputs are decoded at those shapes.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "compiler/frontend/model_signature.h"
#include "compiler/program.h"
#include "proto/grpc_service.pb.h"
#include "runtime/executor.h"
#include "runtime/tensor.h"
#include "server/infer_request.h"

namespace {

using kiln::DType;
using kiln::Program;
using kiln::ValueSpec;

void AddInput(Program& program, const std::string& name, DType dtype,
              std::vector<int64_t> shape) {
  ValueSpec value;
  value.kind = ValueSpec::Kind::kInput;
  value.name = name;
  value.type = {dtype, std::move(shape)};
  program.inputs.push_back(static_cast<int>(program.values.size()));
  program.values.push_back(std::move(value));
}

Program StaticProgram() {
  Program program;
  program.name = "static";
  AddInput(program, "x", DType::kFloat32, {2, 3});
  AddInput(program, "ids", DType::kInt64, {4});
  AddInput(program, "mask", DType::kBool, {2, 2});
  program.outputs = {0};
  program.output_names = {"y"};
  return program;
}

Program VariantProgram() {
  Program program;
  program.name = "symbolic";
  AddInput(program, "x", DType::kFloat32, {1, 3});  // replaced by the request's shape
  program.outputs = {0};
  program.output_names = {"y"};
  return program;
}

kiln::ModelSignature SymbolicSignature() {
  kiln::TensorSignature x;
  x.name = "x";
  x.dims = {kiln::TensorSignature::kSymbolicDim, 3};
  x.symbols = {"batch", ""};
  kiln::TensorSignature shape;
  shape.name = "shape";
  shape.dtype = DType::kInt64;
  shape.dims = {2};
  shape.symbols = {""};
  shape.decides_shapes = true;
  return {{x, shape}, {}};
}

// The server's checks between RequestVariantKey and decoding (ShapeVariants::Check),
// for this signature: x is [batch >= 1, 3], `shape` has its 2 values.
bool VariantKeyAccepted(const std::vector<std::vector<int64_t>>& key) {
  if (key.size() != 3 || key[1] != std::vector<int64_t>{2} || key[2].size() != 2) return false;
  const std::vector<int64_t>& x = key[0];
  return x.size() == 2 && x[0] >= 1 && x[1] == 3 && kiln::CheckedNumElements(x).ok();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Program* const static_program = new Program(StaticProgram());
  static const Program* const variant_program = new Program(VariantProgram());
  static const kiln::ModelSignature* const signature =
      new kiln::ModelSignature(SymbolicSignature());

  inference::ModelInferRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;

  if (kiln::server::DecodeInputs(*static_program, request).ok()) {
    absl::StatusOr<kiln::runtime::Tensor> y =
        kiln::runtime::Tensor::Allocate({DType::kFloat32, {2, 3}});
    if (y.ok()) {
      kiln::runtime::RunResult result;
      result.outputs.push_back(*std::move(y));
      result.kernel_times.push_back({"fused_identity_0", 1000});
      inference::ModelInferResponse response;
      (void)kiln::server::EncodeOutputs(*static_program, request, std::move(result), &response);
    }
  }

  absl::StatusOr<std::vector<std::vector<int64_t>>> key =
      kiln::server::RequestVariantKey(*signature, request);
  if (!key.ok() || !VariantKeyAccepted(*key)) return 0;
  const std::vector<std::vector<int64_t>> shapes = {(*key)[0]};
  const std::set<std::string> consumed = {"shape"};
  (void)kiln::server::DecodeInputs(*variant_program, request, &shapes, &consumed);
  return 0;
}
