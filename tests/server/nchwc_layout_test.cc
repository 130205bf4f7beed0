// CompileOptions.nchwc_layout through a real server: an inception-like model
// (four convs, a concat of whole 16-channel blocks) compiled with the layout
// pass off, on and left to its default (which leaves so small a graph in
// NCHW), each kernel list saying whether its convs run blocked, and every
// output NumPy's
// (tests/compiler/lower/data/make_concat_fixtures.py); and the same model
// under each CompileOptions.winograd_tile.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "tests/server/server_fixture.h"

namespace kiln::testing {
namespace {

const char kCase[] = "tests/compiler/lower/data/concat_b1_blocked";

NpyFloat32 ReadCase(const std::string& suffix) {
  absl::StatusOr<NpyFloat32> npy = ReadNpyFloat32(kCase + suffix + ".npy");
  EXPECT_TRUE(npy.ok()) << npy.status();
  return npy.ok() ? *std::move(npy) : NpyFloat32{};
}

kiln::v1::CompileModelRequest LayoutRequest(const std::string& name, kiln::v1::NchwcLayout layout) {
  std::ifstream in(std::string(kCase) + ".onnx", std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  kiln::v1::CompileModelRequest request;
  request.set_model_name(name);
  request.set_onnx_model(bytes.str());
  request.mutable_options()->set_nchwc_layout(layout);
  return request;
}

class NchwcLayoutTest : public EndToEndTest {
 protected:
  // Runs model `name` on the case's x and compares both outputs with NumPy's.
  void ExpectNumPyOutputs(const std::string& name) {
    const NpyFloat32 x = ReadCase("_x");
    const NpyFloat32 want[2] = {ReadCase("_y"), ReadCase("_z")};
    inference::ModelInferRequest request;
    request.set_model_name(name);
    AddInput(request, "x", "FP32", x.shape);
    request.add_raw_input_contents(x.bytes());
    inference::ModelInferResponse response;
    grpc::Status status = Infer(request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    ASSERT_EQ(response.raw_output_contents_size(), 2);
    for (int o = 0; o < 2; ++o) {
      std::vector<float> got = Floats(response.raw_output_contents(o));
      ASSERT_EQ(got.size(), want[o].values.size()) << "output " << o;
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_NEAR(got[i], want[o].values[i], 1e-4 * std::max(1.0f, std::fabs(want[o].values[i])))
            << "output " << o << " at " << i;
      }
    }
  }
};

TEST_F(NchwcLayoutTest, EachSettingCompilesItsLayoutAndMatchesNumPy) {
  struct Setting {
    const char* name;
    kiln::v1::NchwcLayout layout;
    bool blocked;
  };
  for (const Setting& s : {Setting{"nchw", kiln::v1::NCHWC_LAYOUT_OFF, false},
                           Setting{"nchwc", kiln::v1::NCHWC_LAYOUT_ON, true},
                           // The pass's own rule: three transforms are too many for four convs.
                           Setting{"default", kiln::v1::NCHWC_LAYOUT_AUTO, false}}) {
    SCOPED_TRACE(s.name);
    kiln::v1::CompileModelResponse compiled;
    grpc::ClientContext ctx;
    grpc::Status status = compiler_->CompileModel(&ctx, LayoutRequest(s.name, s.layout), &compiled);
    ASSERT_TRUE(status.ok()) << status.error_message();
    int blocked_convs = 0, plain_convs = 0;
    for (const kiln::v1::KernelReport& k : compiled.report().kernels()) {
      // Direct, or by Winograd (WinogradConv takes the 3x3 ones).
      blocked_convs += std::count(k.ops().begin(), k.ops().end(), "conv2d_nchwc") +
                       std::count(k.ops().begin(), k.ops().end(), "conv2d_nchwc_winograd_f2") +
                       std::count(k.ops().begin(), k.ops().end(), "conv2d_nchwc_winograd_f4");
      plain_convs += std::count(k.ops().begin(), k.ops().end(), "conv2d");
    }
    EXPECT_EQ(blocked_convs, s.blocked ? 4 : 0);
    EXPECT_EQ(plain_convs, s.blocked ? 0 : 4);

    ExpectNumPyOutputs(s.name);
  }
}

// CompileOptions.winograd_tile: its one 3x3 stride-1 conv by F(2x2, 3x3),
// F(3x3, 3x3), F(4x4, 3x3) or directly, each matching NumPy.
TEST_F(NchwcLayoutTest, WinogradTileChoosesTheConvAlgorithm) {
  for (int tile : {0, 2, 3, 4}) {
    SCOPED_TRACE(tile);
    const std::string name = "winograd" + std::to_string(tile);
    kiln::v1::CompileModelRequest compile = LayoutRequest(name, kiln::v1::NCHWC_LAYOUT_ON);
    compile.mutable_options()->set_winograd_tile(tile);
    kiln::v1::CompileModelResponse compiled;
    grpc::ClientContext ctx;
    grpc::Status status = compiler_->CompileModel(&ctx, compile, &compiled);
    ASSERT_TRUE(status.ok()) << status.error_message();
    for (int m : {2, 3, 4}) {
      const std::string op = "conv2d_nchwc_winograd_f" + std::to_string(m);
      int count = 0;
      for (const kiln::v1::KernelReport& k : compiled.report().kernels()) {
        count += std::count(k.ops().begin(), k.ops().end(), op);
      }
      EXPECT_EQ(count, tile == m ? 1 : 0) << op;
    }

    ExpectNumPyOutputs(name);
  }
  // Any other algorithm can never compile.
  kiln::v1::CompileModelRequest bad = LayoutRequest("winograd5", kiln::v1::NCHWC_LAYOUT_ON);
  bad.mutable_options()->set_winograd_tile(5);
  grpc::Status status = CompileRequest(bad);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("winograd_tile 5"), std::string::npos)
      << status.error_message();
  ExpectServerStillLive();
}

// A layout this server's proto does not name can never compile.
TEST_F(NchwcLayoutTest, UnknownLayoutIsInvalidArgument) {
  grpc::Status status =
      CompileRequest(LayoutRequest("unknown", static_cast<kiln::v1::NchwcLayout>(7)));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("nchwc_layout 7"), std::string::npos)
      << status.error_message();
  ExpectServerStillLive();
}

}  // namespace
}  // namespace kiln::testing
