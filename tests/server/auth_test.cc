// TLS, mutual TLS and bearer tokens, against servers started here with
// certificates this test makes with openssl (a CA, the server's, a client's,
// and a client certificate from another CA).
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/descriptor.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/server/server_fixture.h"

namespace kiln {
namespace {

using ::kiln::testing::AddInput;
using ::kiln::testing::Fixture;
using ::kiln::testing::MlpGraph;
using ::kiln::testing::NpyFloat32;
using ::testing::HasSubstr;

constexpr char kInferToken[] = "infer-token-0123456789";
constexpr char kAdminToken[] = "admin-token-0123456789";
constexpr char kExpiredToken[] = "expired-token-0123456789";

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Makes the PEM files under `dir`: ca, server (localhost, 127.0.0.1),
// client (signed by ca) and stranger (signed by another CA), each .pem and
// .key.
bool MakeCertificates(const std::string& dir) {
  const std::string script = R"(
set -e
cd ")" + dir + R"("
key() { openssl ecparam -name prime256v1 -genkey -noout -out "$1.key"; }
ca() { key "$1"; openssl req -x509 -new -key "$1.key" -out "$1.pem" -days 2 -subj "/CN=$1"; }
signed() {  # name, ca, extensions
  key "$1"
  openssl req -new -key "$1.key" -out "$1.csr" -subj "/CN=$1"
  printf '%s\n' "$3" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" -CAcreateserial \
    -out "$1.pem" -days 2 -extfile "$1.ext"
}
ca ca
ca other_ca
signed server ca "subjectAltName=DNS:localhost,IP:127.0.0.1"
signed client ca "extendedKeyUsage=clientAuth"
signed stranger other_ca "extendedKeyUsage=clientAuth"
)";
  const std::string path = dir + "/make.sh";
  std::ofstream(path) << script;
  return std::system(("bash " + path + " >" + dir + "/make.log 2>&1").c_str()) == 0;
}

class AuthTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const char* tmp = std::getenv("TEST_TMPDIR");
    dir_ = new std::string(std::string(tmp != nullptr ? tmp : "/tmp") + "/kiln_auth_test");
    std::system(("rm -rf " + *dir_ + " && mkdir -p " + *dir_).c_str());
    ASSERT_TRUE(MakeCertificates(*dir_)) << ReadText(*dir_ + "/make.log");
    std::ofstream(*dir_ + "/tokens")
        << "# test tokens\n"
        << kInferToken << " infer\n"
        << kAdminToken << " admin\n"
        << kExpiredToken << " infer,admin expires=1000000000\n";

    server::ServerOptions tokens_over_tls;
    tokens_over_tls.address = "127.0.0.1";
    tokens_over_tls.port = 0;
    tokens_over_tls.threads = 1;
    tokens_over_tls.tls_cert = *dir_ + "/server.pem";
    tokens_over_tls.tls_key = *dir_ + "/server.key";
    tokens_over_tls.auth_tokens = *dir_ + "/tokens";
    auto a = server::StartKilnServer(tokens_over_tls);
    ASSERT_TRUE(a.ok()) << a.status();
    tls_server_ = a->release();

    server::ServerOptions mutual = tokens_over_tls;
    mutual.auth_tokens.clear();
    mutual.tls_client_ca = *dir_ + "/ca.pem";
    auto b = server::StartKilnServer(mutual);
    ASSERT_TRUE(b.ok()) << b.status();
    mtls_server_ = b->release();
  }
  static void TearDownTestSuite() {
    for (server::KilnServer* s : {tls_server_, mtls_server_}) {
      if (s == nullptr) continue;
      s->Shutdown();
      delete s;
    }
  }

  // A TLS channel trusting the test CA, with a client certificate when
  // `client` names one ("client", "stranger").
  static std::shared_ptr<grpc::Channel> TlsChannel(int port, const std::string& client = "") {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = ReadText(*dir_ + "/ca.pem");
    if (!client.empty()) {
      ssl.pem_cert_chain = ReadText(*dir_ + "/" + client + ".pem");
      ssl.pem_private_key = ReadText(*dir_ + "/" + client + ".key");
    }
    return grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::SslCredentials(ssl));
  }

  // A call of `method` ("/package.Service/Method") with an empty request.
  static grpc::Status CallEmpty(const std::shared_ptr<grpc::Channel>& channel,
                                const std::string& method, const std::string& token) {
    grpc::GenericStub stub(channel);
    grpc::Slice empty(std::string{});
    grpc::ByteBuffer request(&empty, 1), response;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    if (!token.empty()) ctx.AddMetadata("authorization", std::string("Bearer ") + token);
    grpc::CompletionQueue cq;
    auto call = stub.PrepareUnaryCall(&ctx, method, request, &cq);
    call->StartCall();
    grpc::Status status;
    call->Finish(&response, &status, reinterpret_cast<void*>(1));
    void* tag = nullptr;
    bool ok = false;
    cq.Next(&tag, &ok);
    cq.Shutdown();
    while (cq.Next(&tag, &ok)) {
    }
    return status;
  }

  static grpc::Status ServerLive(const std::shared_ptr<grpc::Channel>& channel) {
    auto stub = inference::GRPCInferenceService::NewStub(channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    inference::ServerLiveResponse live;
    return stub->ServerLive(&ctx, inference::ServerLiveRequest(), &live);
  }

  inline static std::string* dir_ = nullptr;
  inline static server::KilnServer* tls_server_ = nullptr;
  inline static server::KilnServer* mtls_server_ = nullptr;
};

// Every RPC of both services but the health checks needs a token: read from
// the services' descriptors, so an RPC added later is covered too.
TEST_F(AuthTest, EveryRpcButHealthChecksRefusesACallWithoutAToken) {
  auto channel = TlsChannel(tls_server_->port());
  int checked = 0;
  for (const char* service : {"inference.GRPCInferenceService", "kiln.v1.Compiler"}) {
    const google::protobuf::ServiceDescriptor* d =
        google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(service);
    ASSERT_NE(d, nullptr) << service;
    for (int m = 0; m < d->method_count(); ++m) {
      const std::string method = "/" + std::string(service) + "/" + d->method(m)->name();
      SCOPED_TRACE(method);
      if (d->method(m)->client_streaming() && d->method(m)->server_streaming()) {
        // ModelStreamInfer: the stream ends refused, whatever it carried.
        ASSERT_EQ(d->method(m)->name(), "ModelStreamInfer");
        auto stub = inference::GRPCInferenceService::NewStub(channel);
        grpc::ClientContext ctx;
        auto stream = stub->ModelStreamInfer(&ctx);
        stream->Write(inference::ModelInferRequest());
        stream->WritesDone();
        inference::ModelStreamInferResponse answer;
        EXPECT_FALSE(stream->Read(&answer));
        EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
        ++checked;
        continue;
      }
      if (d->method(m)->server_streaming()) {
        auto stub = kiln::v1::Compiler::NewStub(channel);
        grpc::ClientContext ctx;
        auto reader = stub->CompileModelStream(&ctx, kiln::v1::CompileModelRequest());
        kiln::v1::CompileProgress progress;
        while (reader->Read(&progress)) {
        }
        EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
        ++checked;
        continue;
      }
      const bool health = d->method(m)->name() == "ServerLive" ||
                          d->method(m)->name() == "ServerReady";
      grpc::Status s = CallEmpty(channel, method, "");
      if (health) {
        EXPECT_TRUE(s.ok()) << s.error_message();
      } else {
        EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
        ++checked;
      }
    }
  }
  EXPECT_GE(checked, 20);
}

TEST_F(AuthTest, UnknownExpiredAndMalformedTokensAreUnauthenticated) {
  auto channel = TlsChannel(tls_server_->port());
  for (const std::string& token : {std::string("not-a-token-0123456789"),
                                   std::string(kExpiredToken), std::string(kInferToken) + "x"}) {
    grpc::Status s = CallEmpty(channel, "/kiln.v1.Compiler/ListModels", token);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
    EXPECT_THAT(s.error_message(), ::testing::Not(HasSubstr(token)));
  }
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", std::string("Basic ") + kInferToken);
  auto stub = kiln::v1::Compiler::NewStub(channel);
  kiln::v1::ListModelsResponse models;
  EXPECT_EQ(stub->ListModels(&ctx, kiln::v1::ListModelsRequest(), &models).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
}

// infer may infer but not compile; admin may do both. The model served is
// the MLP, checked against NumPy.
TEST_F(AuthTest, ScopesDecideWhatATokenMayDo) {
  auto channel = TlsChannel(tls_server_->port());
  auto compiler = kiln::v1::Compiler::NewStub(channel);
  kiln::v1::CompileModelRequest compile;
  *compile.mutable_graph() = MlpGraph();
  kiln::v1::CompileModelResponse compiled;
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", std::string("Bearer ") + kInferToken);
    grpc::Status s = compiler->CompileModel(&ctx, compile, &compiled);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr("admin"));
  }
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", std::string("Bearer ") + kAdminToken);
    grpc::Status s = compiler->CompileModel(&ctx, compile, &compiled);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  const NpyFloat32 x = Fixture("x"), y = Fixture("y");
  inference::ModelInferRequest request;
  request.set_model_name("mlp");
  AddInput(request, "x", "FP32", x.shape);
  request.add_raw_input_contents(x.bytes());
  auto inference = inference::GRPCInferenceService::NewStub(channel);
  for (const char* token : {kInferToken, kAdminToken}) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", std::string("Bearer ") + token);
    inference::ModelInferResponse response;
    grpc::Status s = inference->ModelInfer(&ctx, request, &response);
    ASSERT_TRUE(s.ok()) << s.error_message();
    std::vector<float> got = kiln::testing::Floats(response.raw_output_contents(0));
    ASSERT_EQ(got.size(), y.values.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], y.values[i], 1e-5);
  }
}

TEST_F(AuthTest, APlainTextClientCannotTalkToATlsServer) {
  auto plain = grpc::CreateChannel("127.0.0.1:" + std::to_string(tls_server_->port()),
                                   grpc::InsecureChannelCredentials());
  EXPECT_EQ(ServerLive(plain).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_TRUE(ServerLive(TlsChannel(tls_server_->port())).ok());
}

TEST_F(AuthTest, MutualTlsNeedsAClientCertificateFromTheTrustedCa) {
  const int port = mtls_server_->port();
  EXPECT_NE(ServerLive(TlsChannel(port)).error_code(), grpc::StatusCode::OK);
  EXPECT_NE(ServerLive(TlsChannel(port, "stranger")).error_code(), grpc::StatusCode::OK);
  grpc::Status trusted = ServerLive(TlsChannel(port, "client"));
  EXPECT_TRUE(trusted.ok()) << trusted.error_message();
}

TEST(AuthOptionsTest, BadTlsOrTokenFilesStopTheServerFromStarting) {
  server::ServerOptions options;
  options.port = 0;
  options.tls_cert = "/no/such/cert.pem";
  options.tls_key = "/no/such/key.pem";
  absl::Status s = server::StartKilnServer(options).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("--tls-cert"));
  options.tls_key.clear();
  EXPECT_EQ(server::StartKilnServer(options).status().code(), absl::StatusCode::kInvalidArgument);
  options = server::ServerOptions();
  options.port = 0;
  options.auth_tokens = "/no/such/tokens";
  s = server::StartKilnServer(options).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("--auth-tokens"));
}

}  // namespace
}  // namespace kiln
