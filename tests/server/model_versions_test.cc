// Model versions and model control modes in a --model-repository, against a
// kiln-server process:
// config.pbtxt's version_policy (latest N, all, specific; latest 1 without
// one), several versions served at once over gRPC and HTTP, "" meaning the
// highest, an unknown version NOT_FOUND, and RepositoryModelLoad picking up
// versions added and removed since. Version V of the test model computes
// y = x + V (data/make_versioned_fixture.py), so each answer names the
// version that ran.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "tests/server/triton_client_util.h"

namespace kiln {
namespace {

using ::kiln::testing::ChannelTo;
using ::kiln::testing::ServerProcess;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Json = nlohmann::json;
using Index = inference::RepositoryIndexResponse::ModelIndex;

constexpr char kData[] = "tests/server/data/";
// The request's x; the answer of version V is x + V, element by element.
const std::vector<float> kX = {0.5f, -1.0f, 2.0f, 3.25f, -4.0f, 10.0f};

std::vector<float> Plus(float version) {
  std::vector<float> y = kX;
  for (float& v : y) v += version;
  return y;
}

// DIR/`name`/`version`/model.onnx: the model y = x + `version`.
void WriteVersion(const std::string& repo, const std::string& name, int version) {
  const std::string model =
      testing::ReadFile(std::string(kData) + "add_version_" + std::to_string(version) + ".onnx");
  ASSERT_FALSE(model.empty());
  testing::WriteFile(repo + "/" + name + "/" + std::to_string(version) + "/model.onnx", model);
}

// A Triton config.pbtxt: `policy` with fields Kiln does not read around it,
// as real ones have.
void WriteConfig(const std::string& repo, const std::string& name, const std::string& policy) {
  testing::WriteFile(repo + "/" + name + "/config.pbtxt",
                     "name: \"" + name + "\"\nplatform: \"onnxruntime_onnx\"\n" + policy +
                         "\ninstance_group [ { count: 1 kind: KIND_CPU } ]\n");
}

class Versions {
 public:
  explicit Versions(const ServerProcess& server)
      : stub_(inference::GRPCInferenceService::NewStub(ChannelTo(server))) {}

  // ModelInfer of `name` at `version`; its output y when it succeeds.
  static inference::ModelInferRequest Request(const std::string& name, const std::string& version) {
    inference::ModelInferRequest request;
    request.set_model_name(name);
    request.set_model_version(version);
    auto* x = request.add_inputs();
    x->set_name("x");
    x->set_datatype("FP32");
    x->add_shape(2);
    x->add_shape(3);
    request.add_raw_input_contents(
        std::string(reinterpret_cast<const char*>(kX.data()), kX.size() * sizeof(float)));
    return request;
  }
  static std::vector<float> Output(const inference::ModelInferResponse& response) {
    if (response.raw_output_contents_size() != 1) return {};
    const std::string& raw = response.raw_output_contents(0);
    std::vector<float> y(raw.size() / sizeof(float));
    std::memcpy(y.data(), raw.data(), y.size() * sizeof(float));
    return y;
  }
  grpc::Status Infer(const std::string& name, const std::string& version, std::vector<float>* y) {
    const inference::ModelInferRequest request = Request(name, version);
    inference::ModelInferResponse response;
    grpc::ClientContext ctx;
    grpc::Status s = stub_->ModelInfer(&ctx, request, &response);
    if (s.ok()) *y = Output(response);
    return s;
  }
  // The answer `name` gives at `version`, or a failure naming the status.
  void ExpectServes(const std::string& name, const std::string& version, float offset) {
    std::vector<float> y;
    grpc::Status s = Infer(name, version, &y);
    ASSERT_TRUE(s.ok()) << name << " version '" << version << "': " << s.error_message();
    EXPECT_EQ(y, Plus(offset)) << name << " version '" << version << "'";
  }
  void ExpectNotFound(const std::string& name, const std::string& version) {
    std::vector<float> y;
    grpc::Status s = Infer(name, version, &y);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr("'" + name + "'"));
    EXPECT_THAT(s.error_message(), HasSubstr("version '" + version + "'"));
  }
  bool Ready(const std::string& name, const std::string& version) {
    inference::ModelReadyRequest request;
    request.set_name(name);
    request.set_version(version);
    inference::ModelReadyResponse response;
    grpc::ClientContext ctx;
    EXPECT_TRUE(stub_->ModelReady(&ctx, request, &response).ok());
    return response.ready();
  }
  std::vector<std::string> MetadataVersions(const std::string& name) {
    inference::ModelMetadataRequest request;
    request.set_name(name);
    inference::ModelMetadataResponse response;
    grpc::ClientContext ctx;
    EXPECT_TRUE(stub_->ModelMetadata(&ctx, request, &response).ok());
    return {response.versions().begin(), response.versions().end()};
  }
  // name -> version -> entry.
  std::map<std::string, std::map<std::string, Index>> RepositoryIndex() {
    inference::RepositoryIndexResponse response;
    grpc::ClientContext ctx;
    EXPECT_TRUE(stub_->RepositoryIndex(&ctx, inference::RepositoryIndexRequest(), &response).ok());
    std::map<std::string, std::map<std::string, Index>> out;
    for (const Index& m : response.models()) out[m.name()][m.version()] = m;
    return out;
  }
  inference::GRPCInferenceService::Stub& stub() { return *stub_; }

 private:
  std::unique_ptr<inference::GRPCInferenceService::Stub> stub_;
};

// latest 2 of versions 1, 2, 3: 2 and 3 serve, "" is 3, 1 is NOT_FOUND;
// then a reload after version 4 is added and 2 deleted serves 3 and 4.
TEST(ModelVersionsTest, LatestTwoServesTheTwoHighestAndReloadFollowsTheDirectory) {
  const std::string root = testing::TestTmpDir("model_versions_latest");
  const std::string repo = root + "/repo";
  for (int v : {1, 2, 3}) WriteVersion(repo, "add", v);
  WriteConfig(repo, "add", "version_policy: { latest: { num_versions: 2 } }");
  ServerProcess server(root + "/cache",
                       {"--model-repository=" + repo, "--model-control-mode=explicit",
                        "--load-model=*", "--http-port=0", "--metrics-port=0"});
  ASSERT_GT(server.port(), 0);
  Versions versions(server);

  versions.ExpectServes("add", "", 3);
  versions.ExpectServes("add", "3", 3);
  versions.ExpectServes("add", "2", 2);
  versions.ExpectNotFound("add", "1");
  versions.ExpectNotFound("add", "7");
  EXPECT_TRUE(versions.Ready("add", "2"));
  EXPECT_TRUE(versions.Ready("add", ""));
  EXPECT_FALSE(versions.Ready("add", "1"));
  EXPECT_THAT(versions.MetadataVersions("add"), ElementsAre("2", "3"));

  inference::ModelConfigRequest config_request;
  config_request.set_name("add");
  config_request.set_version("2");
  inference::ModelConfigResponse config;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(versions.stub().ModelConfig(&ctx, config_request, &config).ok());
  }
  EXPECT_EQ(config.config().version_policy().latest().num_versions(), 2u);

  // Each version counts its own requests: 2 ran once above, 3 twice.
  inference::ModelStatisticsRequest stats_request;
  stats_request.set_name("add");
  stats_request.set_version("2");
  inference::ModelStatisticsResponse stats;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(versions.stub().ModelStatistics(&ctx, stats_request, &stats).ok());
  }
  ASSERT_EQ(stats.model_stats_size(), 1);
  EXPECT_EQ(stats.model_stats(0).version(), "2");
  EXPECT_EQ(stats.model_stats(0).inference_stats().success().count(), 1u);
  stats_request.set_version("");
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(versions.stub().ModelStatistics(&ctx, stats_request, &stats).ok());
  }
  ASSERT_EQ(stats.model_stats_size(), 1);
  EXPECT_EQ(stats.model_stats(0).version(), "3");
  EXPECT_EQ(stats.model_stats(0).inference_stats().success().count(), 2u);
  // The Prometheus page: one series per version.
  httplib::Client metrics("127.0.0.1", server.metrics_port());
  httplib::Result page = metrics.Get("/metrics");
  ASSERT_TRUE(page);
  EXPECT_THAT(page->body,
              HasSubstr("kiln_inference_request_success_total{model=\"add\",version=\"2\"} 1\n"));
  EXPECT_THAT(page->body,
              HasSubstr("kiln_inference_request_success_total{model=\"add\",version=\"3\"} 2\n"));
  stats_request.set_version("1");
  {
    grpc::ClientContext ctx;
    EXPECT_EQ(versions.stub().ModelStatistics(&ctx, stats_request, &stats).error_code(),
              grpc::StatusCode::NOT_FOUND);
  }

  // ModelStreamInfer: each request at its version, an unknown one answered
  // in error_message.
  {
    grpc::ClientContext ctx;
    auto stream = versions.stub().ModelStreamInfer(&ctx);
    for (const char* v : {"2", "", "1"}) ASSERT_TRUE(stream->Write(Versions::Request("add", v)));
    ASSERT_TRUE(stream->WritesDone());
    std::map<std::string, inference::ModelStreamInferResponse> answers;
    inference::ModelStreamInferResponse answer;
    for (int i = 0; i < 3 && stream->Read(&answer); ++i) {
      answers[answer.infer_response().model_version()] = answer;
    }
    ASSERT_TRUE(stream->Finish().ok());
    EXPECT_EQ(Versions::Output(answers["2"].infer_response()), Plus(2));
    EXPECT_EQ(Versions::Output(answers["3"].infer_response()), Plus(3));
    EXPECT_THAT(answers["1"].error_message(), HasSubstr("version '1'"));
  }
  // Metadata and config of a version not served: NOT_FOUND too.
  {
    inference::ModelMetadataRequest request;
    request.set_name("add");
    request.set_version("1");
    inference::ModelMetadataResponse response;
    grpc::ClientContext ctx;
    EXPECT_EQ(versions.stub().ModelMetadata(&ctx, request, &response).error_code(),
              grpc::StatusCode::NOT_FOUND);
    config_request.set_version("1");
    grpc::ClientContext ctx2;
    EXPECT_EQ(versions.stub().ModelConfig(&ctx2, config_request, &config).error_code(),
              grpc::StatusCode::NOT_FOUND);
  }

  auto index = versions.RepositoryIndex();
  EXPECT_EQ(index["add"]["3"].state(), "READY");
  EXPECT_EQ(index["add"]["2"].state(), "READY");
  EXPECT_EQ(index["add"]["1"].state(), "UNAVAILABLE");
  EXPECT_THAT(index["add"]["1"].reason(), HasSubstr("version_policy (latest 2)"));

  // HTTP: the version routes answer for the version they name.
  httplib::Client http("127.0.0.1", server.http_port());
  http.set_read_timeout(60, 0);
  const std::string body =
      Json{{"inputs", {{{"name", "x"}, {"shape", {2, 3}}, {"datatype", "FP32"}, {"data", kX}}}}}
          .dump();
  for (const auto& [version, offset] : {std::pair<std::string, float>{"2", 2}, {"3", 3}}) {
    httplib::Result r =
        http.Post("/v2/models/add/versions/" + version + "/infer", body, "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const Json answer = Json::parse(r->body);
    EXPECT_EQ(answer["model_version"], version);
    EXPECT_EQ(answer["outputs"][0]["data"].get<std::vector<float>>(), Plus(offset));
  }
  httplib::Result latest = http.Post("/v2/models/add/infer", body, "application/json");
  ASSERT_TRUE(latest);
  EXPECT_EQ(Json::parse(latest->body)["outputs"][0]["data"].get<std::vector<float>>(), Plus(3));
  httplib::Result gone = http.Post("/v2/models/add/versions/1/infer", body, "application/json");
  ASSERT_TRUE(gone);
  EXPECT_EQ(gone->status, 404);
  EXPECT_THAT(Json::parse(gone->body)["error"].get<std::string>(), HasSubstr("version '1'"));
  EXPECT_EQ(http.Get("/v2/models/add/versions/2/ready")->status, 200);
  EXPECT_EQ(http.Get("/v2/models/add/versions/1/ready")->status, 404);
  httplib::Result http_config = http.Get("/v2/models/add/versions/3/config");
  ASSERT_TRUE(http_config);
  ASSERT_EQ(http_config->status, 200) << http_config->body;
  EXPECT_EQ(Json::parse(http_config->body)["version_policy"]["latest"]["num_versions"], 2);
  httplib::Result metadata = http.Get("/v2/models/add");
  ASSERT_TRUE(metadata);
  EXPECT_EQ(Json::parse(metadata->body)["versions"], Json({"2", "3"}));
  httplib::Result http_stats = http.Get("/v2/models/add/versions/2/stats");
  ASSERT_TRUE(http_stats);
  ASSERT_EQ(http_stats->status, 200) << http_stats->body;
  EXPECT_EQ(Json::parse(http_stats->body)["model_stats"][0]["version"], "2");
  EXPECT_EQ(http.Get("/v2/models/add/versions/1/stats")->status, 404);

  // Version 4 added, 2 deleted: a load serves 3 and 4 and unloads 2.
  WriteVersion(repo, "add", 4);
  ASSERT_EQ(std::system(("rm -rf " + repo + "/add/2").c_str()), 0);
  inference::RepositoryModelLoadRequest load;
  load.set_model_name("add");
  inference::RepositoryModelLoadResponse loaded;
  {
    grpc::ClientContext ctx;
    grpc::Status s = versions.stub().RepositoryModelLoad(&ctx, load, &loaded);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  versions.ExpectServes("add", "", 4);
  versions.ExpectServes("add", "4", 4);
  versions.ExpectServes("add", "3", 3);
  versions.ExpectNotFound("add", "2");
  EXPECT_THAT(versions.MetadataVersions("add"), ElementsAre("3", "4"));
  index = versions.RepositoryIndex();
  EXPECT_EQ(index["add"].count("2"), 0u);
  EXPECT_EQ(index["add"]["3"].state(), "READY");
  EXPECT_EQ(index["add"]["4"].state(), "READY");
  EXPECT_EQ(index["add"]["1"].state(), "UNAVAILABLE");

  // Unload takes every version.
  inference::RepositoryModelUnloadRequest unload;
  unload.set_model_name("add");
  inference::RepositoryModelUnloadResponse unloaded;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(versions.stub().RepositoryModelUnload(&ctx, unload, &unloaded).ok());
  }
  EXPECT_FALSE(versions.Ready("add", "3"));
  EXPECT_FALSE(versions.Ready("add", "4"));
  EXPECT_FALSE(versions.Ready("add", ""));
  index = versions.RepositoryIndex();
  for (const char* v : {"3", "4"}) {
    EXPECT_EQ(index["add"][v].state(), "UNAVAILABLE") << v;
    EXPECT_EQ(index["add"][v].reason(), "unloaded") << v;
  }
}

// all, specific, Triton's default (latest 1), and a policy Triton refuses.
TEST(ModelVersionsTest, AllSpecificAndTheDefaultPolicy) {
  const std::string root = testing::TestTmpDir("model_versions_policies");
  const std::string repo = root + "/repo";
  for (const char* name : {"every", "chosen", "plain", "zero"}) {
    for (int v : {1, 2, 3}) WriteVersion(repo, name, v);
  }
  WriteConfig(repo, "every", "version_policy: { all: {} }");
  WriteConfig(repo, "chosen", "version_policy: { specific: { versions: [1, 3, 9] } }");
  WriteConfig(repo, "zero", "version_policy: { latest: { num_versions: 0 } }");
  ServerProcess server(root + "/cache", {"--model-repository=" + repo,
                                         "--model-control-mode=explicit", "--load-model=*"});
  ASSERT_GT(server.port(), 0);
  Versions versions(server);

  for (int v : {1, 2, 3}) versions.ExpectServes("every", std::to_string(v), v);
  versions.ExpectServes("every", "", 3);
  EXPECT_THAT(versions.MetadataVersions("every"), ElementsAre("1", "2", "3"));

  versions.ExpectServes("chosen", "1", 1);
  versions.ExpectServes("chosen", "3", 3);
  versions.ExpectServes("chosen", "", 3);
  versions.ExpectNotFound("chosen", "2");

  versions.ExpectServes("plain", "", 3);
  versions.ExpectNotFound("plain", "2");
  versions.ExpectNotFound("plain", "1");

  EXPECT_FALSE(versions.Ready("zero", ""));
  auto index = versions.RepositoryIndex();
  EXPECT_EQ(index["chosen"]["2"].state(), "UNAVAILABLE");
  EXPECT_THAT(index["chosen"]["2"].reason(), HasSubstr("specific 1, 3, 9"));
  EXPECT_EQ(index["chosen"]["9"].state(), "UNAVAILABLE");
  EXPECT_THAT(index["chosen"]["9"].reason(), HasSubstr("no model file"));
  for (const char* v : {"1", "2", "3"}) {
    EXPECT_EQ(index["zero"][v].state(), "UNAVAILABLE") << v;
    EXPECT_THAT(index["zero"][v].reason(), HasSubstr("num_versions")) << v;
  }
}

// --model-control-mode (Triton's): none loads every model and refuses the
// repository RPCs; explicit loads only the --load-model ones (the flag
// repeats) and then loads and unloads by request.
TEST(ModelControlTest, NoneLoadsEverythingAndRefusesTheRpcsExplicitLoadsWhatItIsTold) {
  const std::string root = testing::TestTmpDir("model_control_modes");
  const std::string repo = root + "/repo";
  WriteVersion(repo, "a", 1);
  WriteVersion(repo, "b", 2);
  WriteVersion(repo, "c", 3);
  inference::RepositoryModelLoadRequest load;
  inference::RepositoryModelUnloadRequest unload;
  {
    ServerProcess server(root + "/cache_none", {"--model-repository=" + repo});
    ASSERT_GT(server.port(), 0);
    Versions versions(server);
    versions.ExpectServes("a", "", 1);
    versions.ExpectServes("b", "", 2);
    versions.ExpectServes("c", "", 3);
    load.set_model_name("a");
    inference::RepositoryModelLoadResponse loaded;
    grpc::ClientContext load_ctx;
    grpc::Status s = versions.stub().RepositoryModelLoad(&load_ctx, load, &loaded);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr("--model-control-mode=explicit"));
    unload.set_model_name("a");
    inference::RepositoryModelUnloadResponse unloaded;
    grpc::ClientContext unload_ctx;
    s = versions.stub().RepositoryModelUnload(&unload_ctx, unload, &unloaded);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
    versions.ExpectServes("a", "", 1);  // still loaded
  }
  ServerProcess server(root + "/cache_explicit",
                       {"--model-repository=" + repo, "--model-control-mode=explicit",
                        "--load-model=a", "--load-model=c"});
  ASSERT_GT(server.port(), 0);
  Versions versions(server);
  versions.ExpectServes("a", "", 1);
  versions.ExpectServes("c", "", 3);
  std::vector<float> y;
  EXPECT_EQ(versions.Infer("b", "", &y).error_code(), grpc::StatusCode::NOT_FOUND);
  load.set_model_name("b");
  inference::RepositoryModelLoadResponse loaded;
  grpc::ClientContext load_ctx;
  ASSERT_TRUE(versions.stub().RepositoryModelLoad(&load_ctx, load, &loaded).ok());
  versions.ExpectServes("b", "", 2);
  inference::RepositoryModelUnloadResponse unloaded;
  grpc::ClientContext unload_ctx;
  ASSERT_TRUE(versions.stub().RepositoryModelUnload(&unload_ctx, unload, &unloaded).ok());
  EXPECT_EQ(versions.Infer("a", "", &y).error_code(), grpc::StatusCode::NOT_FOUND);
}

// Whether `check` holds within 30 s, asked every 200 ms.
bool Eventually(const std::function<bool()>& check) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < end) {
    if (check()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return false;
}

// Poll mode follows the repository by itself: a model added is loaded, a new
// version of one is served (latest 1), a model removed is unloaded; the
// repository RPCs are refused.
TEST(ModelControlTest, PollModeFollowsTheRepository) {
  const std::string root = testing::TestTmpDir("model_control_poll");
  const std::string repo = root + "/repo";
  WriteVersion(repo, "a", 1);
  ServerProcess server(root + "/cache", {"--model-repository=" + repo, "--model-control-mode=poll",
                                         "--repository-poll-secs=1"});
  ASSERT_GT(server.port(), 0);
  Versions versions(server);
  versions.ExpectServes("a", "", 1);
  inference::RepositoryModelLoadRequest load;
  load.set_model_name("a");
  inference::RepositoryModelLoadResponse loaded;
  grpc::ClientContext load_ctx;
  grpc::Status refused = versions.stub().RepositoryModelLoad(&load_ctx, load, &loaded);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(refused.error_message(), HasSubstr("poll"));

  std::vector<float> y;
  WriteVersion(repo, "b", 2);
  EXPECT_TRUE(Eventually([&] { return versions.Infer("b", "", &y).ok(); }));
  EXPECT_EQ(y, Plus(2));
  WriteVersion(repo, "a", 3);
  EXPECT_TRUE(Eventually([&] { return versions.Infer("a", "", &y).ok() && y == Plus(3); }));
  versions.ExpectNotFound("a", "1");  // latest 1: version 1 went
  std::filesystem::remove_all(repo + "/b");
  EXPECT_TRUE(Eventually(
      [&] { return versions.Infer("b", "", &y).error_code() == grpc::StatusCode::NOT_FOUND; }));
  versions.ExpectServes("a", "", 3);
}

}  // namespace
}  // namespace kiln
