// Bounds-checked kernels through kiln-server: asked for by one compile
// (CompileOptions.kernel_bounds_checks) or by the server for all of them
// (--kernel-bounds-checks). The MLP's checked kernels give NumPy's outputs,
// are cached apart from unchecked ones, and say so in the cache's listing.
// (A fault's status is tested in tests/runtime/kernel_fault_test.cc: no
// graph can bring an out-of-range index to a kernel, the runtime and the
// kernels' own clamps see to that.)
#include <string>

#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/grpc_service.grpc.pb.h"
#include "proto/kiln_service.grpc.pb.h"
#include "tests/server/server_fixture.h"

namespace kiln {
namespace {

using ::kiln::testing::EndToEndTest;
using ::kiln::testing::MlpGraph;

// The cache's codegen options for each kernel of a compile, in its order.
std::vector<std::string> CodegenOptionsOf(kiln::v1::Compiler::Stub& compiler,
                                          const kiln::v1::CompileReport& report) {
  kiln::v1::GetCacheStatsResponse stats;
  grpc::ClientContext ctx;
  EXPECT_TRUE(compiler.GetCacheStats(&ctx, kiln::v1::GetCacheStatsRequest(), &stats).ok());
  std::vector<std::string> options;
  for (const kiln::v1::KernelReport& k : report.kernels()) {
    std::string found = "(not cached)";
    for (const kiln::v1::CacheEntry& e : stats.entry()) {
      if (e.key() == k.key()) found = e.codegen_options();
    }
    options.push_back(found);
  }
  return options;
}

kiln::v1::CompileModelRequest MlpCompile(const std::string& name, bool checks) {
  kiln::v1::CompileModelRequest request;
  *request.mutable_graph() = MlpGraph();
  request.set_model_name(name);
  request.mutable_options()->set_kernel_bounds_checks(checks);
  return request;
}

using BoundsChecksOptionTest = EndToEndTest;

TEST_F(BoundsChecksOptionTest, OneCompileAsksForCheckedKernelsCachedApart) {
  kiln::v1::CompileModelResponse plain, checked;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(compiler_->CompileModel(&ctx, MlpCompile("mlp_plain", false), &plain).ok());
  }
  {
    grpc::ClientContext ctx;
    grpc::Status s = compiler_->CompileModel(&ctx, MlpCompile("mlp_checked", true), &checked);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  ASSERT_EQ(checked.report().kernels_size(), plain.report().kernels_size());
  EXPECT_EQ(checked.report().cache_hits(), 0);
  for (int k = 0; k < checked.report().kernels_size(); ++k) {
    EXPECT_NE(checked.report().kernels(k).key(), plain.report().kernels(k).key());
  }
  EXPECT_THAT(CodegenOptionsOf(*compiler_, plain.report()), ::testing::Each("O3"));
  EXPECT_THAT(CodegenOptionsOf(*compiler_, checked.report()),
              ::testing::Each("O3 bounds-checked"));
  for (const char* model : {"mlp_plain", "mlp_checked"}) {
    SCOPED_TRACE(model);
    inference::ModelInferResponse response;
    grpc::Status s = Infer(MlpRequest(model), &response);
    ASSERT_TRUE(s.ok()) << s.error_message();
    ExpectOutputMatchesNumPy(response, 0);
  }
}

// kiln-server --kernel-bounds-checks.
class BoundsCheckedServerTest : public EndToEndTest {
 protected:
  static void SetUpTestSuite() {
    server::ServerOptions options = ServerOptions();
    options.kernel_bounds_checks = true;
    StartServer(options);
  }
};

TEST_F(BoundsCheckedServerTest, EveryCompileIsCheckedAndMatchesNumPy) {
  kiln::v1::CompileModelResponse compiled;
  grpc::ClientContext ctx;
  grpc::Status s = compiler_->CompileModel(&ctx, MlpCompile("mlp", false), &compiled);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_GT(compiled.report().kernels_size(), 0);
  EXPECT_THAT(CodegenOptionsOf(*compiler_, compiled.report()),
              ::testing::Each("O3 bounds-checked"));
  inference::ModelInferResponse response;
  s = Infer(MlpRequest("mlp"), &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ExpectOutputMatchesNumPy(response, 0);
}

}  // namespace
}  // namespace kiln
