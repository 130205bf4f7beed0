// Triton's model repository extension over HTTP/REST against a kiln-server
// process (POST /v2/repository/index, .../models/{name}/load|unload): states
// through an unload/load cycle, seen over gRPC too (one service behind both
// front ends), the reloaded model's answers against NumPy, and the token
// scopes (load and unload need admin: 403 with an infer token).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "tests/server/triton_client_util.h"

namespace kiln {
namespace {

using ::kiln::testing::ChannelTo;
using ::kiln::testing::MlpDynamicX;
using ::kiln::testing::MlpDynamicY;
using ::kiln::testing::NpyFloat32;
using ::kiln::testing::ServerProcess;
using ::testing::HasSubstr;
using Json = nlohmann::json;

Json Parse(const std::string& body) {
  Json j = Json::parse(body, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << body;
  return j;
}

// Sends `request` as is to 127.0.0.1:`port`; the whole answer (the
// connection is closed by the request's Connection: close).
std::string RawExchange(int port, const std::string& request) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string answer;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
      ::send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(request.size())) {
    char buffer[4096];
    ssize_t n;
    while ((n = ::recv(fd, buffer, sizeof buffer, 0)) > 0) answer.append(buffer, n);
  }
  ::close(fd);
  return answer;
}

class HttpRepositoryTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string root = testing::TestTmpDir("http_repository_test");
    const std::string repo = testing::WriteRepository(root, {"cycle_mlp"});
    server_ = new ServerProcess(root + "/cache",
                                {"--model-repository=" + repo, "--model-control-mode=explicit",
                                 "--load-model=*", "--http-port=0"});
    ASSERT_GT(server_->port(), 0);
    ASSERT_GT(server_->http_port(), 0);
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }

  static httplib::Client Client() {
    httplib::Client client("127.0.0.1", server_->http_port());
    client.set_read_timeout(120, 0);
    return client;
  }

  // POST /v2/repository/index with `body`: name -> entry.
  static std::map<std::string, Json> Index(const std::string& body = "") {
    httplib::Result r = Client().Post("/v2/repository/index", body, "application/json");
    EXPECT_TRUE(r);
    if (!r) return {};
    EXPECT_EQ(r->status, 200) << r->body;
    const Json j = Parse(r->body);
    EXPECT_TRUE(j.is_array()) << r->body;
    std::map<std::string, Json> out;
    for (const Json& m : j) out[m["name"].get<std::string>()] = m;
    return out;
  }

  static int Status(httplib::Result r) { return r ? r->status : 0; }

  inline static ServerProcess* server_ = nullptr;
};

TEST_F(HttpRepositoryTest, UnloadAndLoadCycleAModelSeenOverBothFrontEnds) {
  std::map<std::string, Json> index = Index();
  ASSERT_EQ(index.count("cycle_mlp"), 1u);
  EXPECT_EQ(index["cycle_mlp"]["state"], "READY");
  EXPECT_EQ(index["cycle_mlp"]["version"], "1");
  EXPECT_EQ(index["mlp"]["state"], "READY");
  EXPECT_EQ(index["broken"]["state"], "UNAVAILABLE");
  EXPECT_FALSE(index["broken"]["reason"].get<std::string>().empty());
  EXPECT_EQ(Index(R"({"ready": true})").count("broken"), 0u);
  EXPECT_EQ(Status(Client().Get("/v2/health/ready")), 200);

  EXPECT_EQ(Status(Client().Post("/v2/repository/models/cycle_mlp/unload", "", "")), 200);
  EXPECT_NE(Status(Client().Get("/v2/models/cycle_mlp/ready")), 200);
  index = Index();
  EXPECT_EQ(index["cycle_mlp"]["state"], "UNAVAILABLE");
  EXPECT_EQ(index["cycle_mlp"]["reason"], "unloaded");
  // The gRPC service is the same one: it saw the unload.
  auto inference = inference::GRPCInferenceService::NewStub(ChannelTo(*server_));
  inference::RepositoryIndexResponse grpc_index;
  grpc::ClientContext context;
  ASSERT_TRUE(
      inference->RepositoryIndex(&context, inference::RepositoryIndexRequest(), &grpc_index).ok());
  bool seen = false;
  for (const auto& m : grpc_index.models()) {
    if (m.name() != "cycle_mlp") continue;
    seen = true;
    EXPECT_EQ(m.state(), "UNAVAILABLE");
    EXPECT_EQ(m.reason(), "unloaded");
  }
  EXPECT_TRUE(seen);

  EXPECT_EQ(Status(Client().Post("/v2/repository/models/cycle_mlp/load", "", "")), 200);
  EXPECT_EQ(Status(Client().Get("/v2/models/cycle_mlp/ready")), 200);
  EXPECT_EQ(Index()["cycle_mlp"]["state"], "READY");
  // Rows 2..4 of NumPy's input give NumPy's output (a symbolic batch).
  const NpyFloat32 x = MlpDynamicX();
  const NpyFloat32 y = MlpDynamicY();
  Json rows = Json::array();
  for (int64_t i = 2 * 16; i < 5 * 16; ++i) rows.push_back(x.values[i]);
  Json request = {
      {"inputs", {{{"name", "x"}, {"shape", {3, 16}}, {"datatype", "FP32"}, {"data", rows}}}}};
  httplib::Result r =
      Client().Post("/v2/models/cycle_mlp/infer", request.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const Json out = Parse(r->body)["outputs"][0];
  EXPECT_EQ(out["shape"], Json({3, 5}));
  ASSERT_EQ(out["data"].size(), 15u);
  for (size_t i = 0; i < 15; ++i) {
    EXPECT_NEAR(out["data"][i].get<double>(), y.values[2 * 5 + i], 1e-5) << i;
  }
}

TEST_F(HttpRepositoryTest, APostWithoutAnyBodyAsCurlSendsItIsAnswered) {
  // `curl -X POST URL`: no Content-Length, no body.
  const std::string answer = RawExchange(server_->http_port(),
                                         "POST /v2/repository/index HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                         "Connection: close\r\n\r\n");
  EXPECT_EQ(answer.rfind("HTTP/1.1 200", 0), 0u) << answer;
  EXPECT_THAT(answer, HasSubstr("\"name\":\"mlp\""));
}

TEST_F(HttpRepositoryTest, LoadAndUnloadParametersGoToTheService) {
  // As Triton's HTTP client sends them: unload_dependents is taken (Kiln has
  // no ensembles), a config override is not (UNIMPLEMENTED, 501).
  httplib::Result unload =
      Client().Post("/v2/repository/models/mlp/unload",
                    R"({"parameters": {"unload_dependents": false}})", "application/json");
  ASSERT_TRUE(unload);
  EXPECT_EQ(unload->status, 200) << unload->body;
  httplib::Result config =
      Client().Post("/v2/repository/models/mlp/load",
                    R"({"parameters": {"config": "{\"max_batch_size\": 8}"}})", "application/json");
  ASSERT_TRUE(config);
  EXPECT_EQ(config->status, 501) << config->body;
  EXPECT_THAT(Parse(config->body)["error"].get<std::string>(), HasSubstr("config"));
  httplib::Result bad = Client().Post("/v2/repository/models/mlp/load",
                                      R"({"parameters": {"x": 1.5}})", "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400) << bad->body;
  httplib::Result load = Client().Post("/v2/repository/models/mlp/load", "{}", "application/json");
  ASSERT_TRUE(load);
  EXPECT_EQ(load->status, 200) << load->body;
  EXPECT_EQ(Status(Client().Get("/v2/models/mlp/ready")), 200);
}

TEST_F(HttpRepositoryTest, ANameTheRepositoryLacksIs404AndABadIndexBodyIs400) {
  httplib::Result r = Client().Post("/v2/repository/models/nope/load", "", "");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_THAT(Parse(r->body)["error"].get<std::string>(), HasSubstr("nope"));
  httplib::Result bad = Client().Post("/v2/repository/index", "[1,2]", "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_TRUE(Parse(bad->body).contains("error"));
}

TEST(HttpRepositoryAuthTest, LoadAndUnloadNeedAnAdminToken) {
  const std::string root = testing::TestTmpDir("http_repository_auth_test");
  const std::string repo = testing::WriteRepository(root, {});
  std::ofstream(root + "/tokens") << "infer-token-0123456789 infer\n"
                                  << "admin-token-0123456789 admin\n";
  ServerProcess server(root + "/cache",
                       {"--model-repository=" + repo, "--model-control-mode=explicit",
                        "--load-model=*", "--http-port=0", "--auth-tokens=" + root + "/tokens"});
  ASSERT_GT(server.http_port(), 0);
  httplib::Client client("127.0.0.1", server.http_port());
  client.set_read_timeout(120, 0);
  const httplib::Headers infer = {{"Authorization", "Bearer infer-token-0123456789"}};
  const httplib::Headers admin = {{"Authorization", "Bearer admin-token-0123456789"}};
  httplib::Result none = client.Post("/v2/repository/models/mlp/unload", "", "");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 401);
  httplib::Result denied = client.Post("/v2/repository/models/mlp/unload", infer, "", "");
  ASSERT_TRUE(denied);
  EXPECT_EQ(denied->status, 403);
  EXPECT_TRUE(Parse(denied->body).contains("error"));
  httplib::Result index = client.Post("/v2/repository/index", infer, "", "");
  ASSERT_TRUE(index);
  EXPECT_EQ(index->status, 200);  // the index needs only infer, as over gRPC
  httplib::Result unloaded = client.Post("/v2/repository/models/mlp/unload", admin, "", "");
  ASSERT_TRUE(unloaded);
  EXPECT_EQ(unloaded->status, 200) << unloaded->body;
  httplib::Result loaded = client.Post("/v2/repository/models/mlp/load", admin, "", "");
  ASSERT_TRUE(loaded);
  EXPECT_EQ(loaded->status, 200) << loaded->body;
  httplib::Result ready = client.Get("/v2/models/mlp/ready", infer);
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 200);
}

}  // namespace
}  // namespace kiln
