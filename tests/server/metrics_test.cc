// kiln-server --metrics-port against a real process: the page parsed by a
// strict parser of the exposition format (prometheus_parser.py, run with
// Debian's python3), and its counters moved by exactly the calls made here,
// over both front ends.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "proto/grpc_service.grpc.pb.h"
#include "proto/kiln_service.grpc.pb.h"
#include "tests/server/server_fixture.h"
#include "tests/server/server_process.h"
#include "tests/test_util/redis_server.h"

namespace kiln {
namespace {

using ::kiln::testing::Fixture;
using ::kiln::testing::MlpGraph;
using ::kiln::testing::NpyFloat32;
using ::kiln::testing::RedisServer;
using ::kiln::testing::ServerProcess;
using ::testing::HasSubstr;
using Json = nlohmann::json;

constexpr char kParser[] = "tests/server/prometheus_parser.py";

std::string TempDir() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/kiln_metrics_testXXXXXX";
  return ::mkdtemp(dir.data());
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Runs the parser on `page`: its exit status, stdout and stderr.
struct Parsed {
  int status = -1;
  std::string out;
  std::string err;
};
Parsed RunParser(const std::string& dir, const std::string& page) {
  std::ofstream(dir + "/page.txt", std::ios::binary) << page;
  const std::string command = "/usr/bin/python3 " + std::string(kParser) + " <" + dir +
                              "/page.txt >" + dir + "/parsed.json 2>" + dir + "/parser.err";
  Parsed p;
  p.status = std::system(command.c_str());
  p.out = ReadText(dir + "/parsed.json");
  p.err = ReadText(dir + "/parser.err");
  return p;
}

class MetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempDir();
    server_ = std::make_unique<ServerProcess>(
        dir_ + "/cache", std::vector<std::string>{"--http-port=0", "--metrics-port=0"});
    ASSERT_GT(server_->port(), 0);
    ASSERT_GT(server_->http_port(), 0);
    ASSERT_GT(server_->metrics_port(), 0);
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->port()),
                                   grpc::InsecureChannelCredentials());
  }
  void TearDown() override {
    server_.reset();
    std::system(("rm -rf " + dir_).c_str());
  }

  void Compile(const std::string& name) {
    auto compiler = kiln::v1::Compiler::NewStub(channel_);
    kiln::v1::CompileModelRequest request;
    *request.mutable_graph() = MlpGraph();
    request.set_model_name(name);
    kiln::v1::CompileModelResponse response;
    grpc::ClientContext context;
    grpc::Status s = compiler->CompileModel(&context, request, &response);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }

  // The page, checked by the parser; its series.
  std::map<std::string, double> Scrape() {
    httplib::Client client("127.0.0.1", server_->metrics_port());
    httplib::Result r = client.Get("/metrics");
    EXPECT_TRUE(r);
    if (!r) return {};
    EXPECT_EQ(r->status, 200);
    EXPECT_THAT(r->get_header_value("Content-Type"), HasSubstr("text/plain; version=0.0.4"));
    Parsed p = RunParser(dir_, r->body);
    EXPECT_EQ(p.status, 0) << p.err << "\n" << r->body;
    Json j = Json::parse(p.out, nullptr, false);
    EXPECT_TRUE(j.is_object()) << p.out;
    std::map<std::string, double> series;
    if (!j.is_object()) return series;
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (it.value().is_number()) series[it.key()] = it.value().get<double>();
    }
    page_ = r->body;
    return series;
  }

  int HttpInfer(const std::string& model, bool good) {
    const NpyFloat32 x = Fixture("x");
    Json request = {
        {"inputs",
         {{{"name", "x"},
           {"shape", {4, good ? 16 : 8}},
           {"datatype", "FP32"},
           {"data", std::vector<float>(x.values.begin(), x.values.begin() + (good ? 64 : 32))}}}}};
    httplib::Client client("127.0.0.1", server_->http_port());
    httplib::Result r =
        client.Post(("/v2/models/" + model + "/infer").c_str(), request.dump(), "application/json");
    return r ? r->status : 0;
  }

  bool GrpcInfer(const std::string& model) {
    auto inference = inference::GRPCInferenceService::NewStub(channel_);
    const NpyFloat32 x = Fixture("x");
    inference::ModelInferRequest request;
    request.set_model_name(model);
    ::kiln::testing::AddInput(request, "x", "FP32", x.shape);
    request.add_raw_input_contents(x.bytes());
    inference::ModelInferResponse response;
    grpc::ClientContext context;
    return inference->ModelInfer(&context, request, &response).ok();
  }

  std::string dir_;
  std::unique_ptr<ServerProcess> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::string page_;
};

double Get(const std::map<std::string, double>& series, const std::string& key) {
  auto it = series.find(key);
  EXPECT_NE(it, series.end()) << "no series " << key;
  return it == series.end() ? -1 : it->second;
}

// Every series of `family` (name before '{') whose labels contain `part`.
std::map<std::string, double> Matching(const std::map<std::string, double>& series,
                                       const std::string& family, const std::string& part) {
  std::map<std::string, double> out;
  for (const auto& [key, value] : series) {
    if (key.rfind(family + "{", 0) == 0 && key.find(part) != std::string::npos) {
      out[key] = value;
    }
  }
  return out;
}

TEST_F(MetricsTest, ThePageParsesAndItsCountersMoveByTheCallsMade) {
  Compile("mlp");
  const std::map<std::string, double> before = Scrape();
  ASSERT_FALSE(before.empty()) << page_;
  // The MLP's four kernels were compiled into a fresh cache: misses.
  EXPECT_GE(Get(before, "kiln_compiles_total{}"), 4);
  EXPECT_GE(Get(before, "kiln_kernel_cache_misses_total{}"), 4);
  EXPECT_GT(Get(before, "kiln_compile_seconds_total{}"), 0);
  EXPECT_EQ(Get(before, "kiln_models_loaded{}"), 1);
  EXPECT_FALSE(Matching(before, "kiln_compile_pass_seconds", "pass=").empty()) << page_;
  EXPECT_GT(Get(before, "kiln_kernel_cache_entries{tier=\"memory\"}"), 0);
  EXPECT_GT(Get(before, "kiln_kernel_cache_bytes{tier=\"memory\"}"), 0);

  // 3 good and 2 bad over HTTP, 1 good over gRPC; a second model from the
  // same graph: its kernels are memory hits.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(HttpInfer("mlp", true), 200);
  for (int i = 0; i < 2; ++i) EXPECT_EQ(HttpInfer("mlp", false), 400);
  EXPECT_TRUE(GrpcInfer("mlp"));
  Compile("mlp2");
  const std::map<std::string, double> after = Scrape();
  ASSERT_FALSE(after.empty()) << page_;

  const std::string mlp = "{model=\"mlp\",version=\"1\"}";
  auto delta = [&](const std::string& key) {
    return Get(after, key) - (before.count(key) ? before.at(key) : 0.0);
  };
  EXPECT_EQ(delta("kiln_inference_request_success_total" + mlp), 4);
  EXPECT_EQ(delta("kiln_inference_request_failure_total" + mlp), 2);
  // A model without a batch axis runs one "row" a request, as Triton counts.
  EXPECT_EQ(delta("kiln_inference_count_total" + mlp), 4);
  EXPECT_EQ(delta("kiln_inference_exec_count_total" + mlp), 4);
  EXPECT_GT(delta("kiln_inference_request_duration_seconds_total" + mlp), 0);
  EXPECT_GT(delta("kiln_inference_compute_infer_duration_seconds_total" + mlp), 0);
  EXPECT_EQ(delta("kiln_inference_request_seconds_count" + mlp), 4);
  EXPECT_EQ(delta("kiln_inference_request_seconds_bucket{le=\"+Inf\",model=\"mlp\",version=\"1\"}"),
            4);
  EXPECT_NEAR(Get(after, "kiln_inference_request_seconds_sum" + mlp),
              Get(after, "kiln_inference_request_duration_seconds_total" + mlp), 1e-9);
  EXPECT_EQ(delta("kiln_kernel_cache_hits_total{tier=\"memory\"}"), 4);
  EXPECT_EQ(Get(after, "kiln_model_kernel_cache_hits_total{model=\"mlp2\",version=\"1\"}"), 4);
  EXPECT_EQ(Get(after, "kiln_models_loaded{}"), 2);
  // Each of the MLP's kernels ran once per good request.
  const std::map<std::string, double> calls =
      Matching(after, "kiln_kernel_calls_total", "model=\"mlp\"");
  EXPECT_EQ(calls.size(), 4u) << page_;
  for (const auto& [key, value] : calls) EXPECT_EQ(value, 4) << key;
  EXPECT_EQ(Matching(after, "kiln_kernel_seconds_total", "model=\"mlp\"").size(), 4u);
}

// Replaces the fixture's server by one on `cache` with the remote tier on `redis`.
void UseRemoteCacheServer(const std::string& cache, const RedisServer& redis,
                          std::unique_ptr<ServerProcess>* server,
                          std::shared_ptr<grpc::Channel>* channel) {
  *server = std::make_unique<ServerProcess>(
      cache, std::vector<std::string>{"--metrics-port=0", "--remote-cache=" + redis.url()});
  ASSERT_GT((*server)->metrics_port(), 0);
  *channel = grpc::CreateChannel("127.0.0.1:" + std::to_string((*server)->port()),
                                 grpc::InsecureChannelCredentials());
}

TEST_F(MetricsTest, TheRemoteTierIsOnThePageWithItsHitsMissesLeasesAndLatency) {
  RedisServer redis;
  ASSERT_TRUE(redis.running());
  UseRemoteCacheServer(dir_ + "/a", redis, &server_, &channel_);
  Compile("mlp");
  // The MLP's four kernels: missed, compiled under a lease each, written.
  const std::string writes = "kiln_remote_cache_writes_total{}";
  std::map<std::string, double> a = Scrape();
  for (int i = 0; i < 100 && (a.count(writes) == 0 || a.at(writes) < 4); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    a = Scrape();
  }
  ASSERT_FALSE(a.empty()) << page_;
  EXPECT_EQ(Get(a, "kiln_remote_cache_available{}"), 1);
  EXPECT_EQ(Get(a, "kiln_remote_cache_writes_total{}"), 4);
  EXPECT_EQ(Get(a, "kiln_remote_cache_misses_total{}"), 4);
  EXPECT_EQ(Get(a, "kiln_remote_cache_hits_total{}"), 0);
  EXPECT_EQ(Get(a, "kiln_remote_cache_leases_total{event=\"acquired\"}"), 4);
  EXPECT_EQ(Get(a, "kiln_kernel_cache_hits_total{tier=\"remote\"}"), 0);

  // A second replica with its own disk: four remote hits, one GET each.
  UseRemoteCacheServer(dir_ + "/b", redis, &server_, &channel_);
  Compile("mlp");
  const std::map<std::string, double> b = Scrape();
  ASSERT_FALSE(b.empty()) << page_;
  EXPECT_EQ(Get(b, "kiln_remote_cache_hits_total{}"), 4);
  EXPECT_EQ(Get(b, "kiln_kernel_cache_hits_total{tier=\"remote\"}"), 4);
  EXPECT_EQ(Get(b, "kiln_compiles_total{}"), 0);
  EXPECT_EQ(Get(b, "kiln_remote_cache_errors_total{}"), 0);
  EXPECT_EQ(Get(b, "kiln_remote_cache_corrupt_entries_total{}"), 0);
  EXPECT_EQ(Get(b, "kiln_remote_cache_lookup_seconds_count{}"), 4);
  EXPECT_EQ(Get(b, "kiln_remote_cache_lookup_seconds_bucket{le=\"+Inf\"}"), 4);
  // The request histograms' buckets (engine::LatencyHistogram), 100 us to 10 s:
  // four loopback GETs well within 10 s.
  EXPECT_EQ(b.count("kiln_remote_cache_lookup_seconds_bucket{le=\"0.0001\"}"), 1u) << page_;
  EXPECT_EQ(Get(b, "kiln_remote_cache_lookup_seconds_bucket{le=\"10\"}"), 4);
  EXPECT_GT(Get(b, "kiln_remote_cache_lookup_seconds_sum{}"), 0);
}

// Two replicas, one after the other, on one Redis as kernel cache and model
// store: the first publishes, the second loads at its first request.
TEST_F(MetricsTest, TheModelStoreIsOnThePageWithWhatEachReplicaDid) {
  RedisServer redis;
  ASSERT_TRUE(redis.running());
  const std::vector<std::string> flags = {"--metrics-port=0", "--remote-cache=" + redis.url(),
                                          "--model-store=" + redis.url()};
  server_ = std::make_unique<ServerProcess>(dir_ + "/a", flags);
  ASSERT_GT(server_->metrics_port(), 0);
  channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->port()),
                                 grpc::InsecureChannelCredentials());
  Compile("mlp");
  const std::map<std::string, double> a = Scrape();
  ASSERT_FALSE(a.empty()) << page_;
  EXPECT_EQ(Get(a, "kiln_model_store_models_total{event=\"published\"}"), 1);
  EXPECT_EQ(Get(a, "kiln_model_store_models_total{event=\"loaded\"}"), 0);
  EXPECT_EQ(Get(a, "kiln_model_store_errors_total{}"), 0);

  server_ = std::make_unique<ServerProcess>(dir_ + "/b", flags);
  ASSERT_GT(server_->metrics_port(), 0);
  channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->port()),
                                 grpc::InsecureChannelCredentials());
  EXPECT_TRUE(GrpcInfer("mlp"));
  EXPECT_TRUE(GrpcInfer("mlp"));
  EXPECT_FALSE(GrpcInfer("nobody"));
  const std::map<std::string, double> b = Scrape();
  ASSERT_FALSE(b.empty()) << page_;
  EXPECT_EQ(Get(b, "kiln_model_store_models_total{event=\"published\"}"), 0);
  EXPECT_EQ(Get(b, "kiln_model_store_models_total{event=\"loaded\"}"), 1);
  // One read per name: the second request for mlp came within the view.
  EXPECT_EQ(Get(b, "kiln_model_store_lookups_total{}"), 2);
  EXPECT_EQ(Get(b, "kiln_compiles_total{}"), 0);
  EXPECT_EQ(Get(b, "kiln_kernel_cache_hits_total{tier=\"remote\"}"), 4);
}

TEST_F(MetricsTest, TheParserRefusesBrokenPages) {
  const std::vector<std::string> broken = {
      "kiln_x_total 1\n",                                                   // no TYPE
      "# HELP a_total x\n# TYPE a_total counter\na_total 1",                // no newline
      "# HELP a_total x\n# TYPE a_total counter\na_total{m=\"a\\q\"} 1\n",  // bad escape
      "# HELP a_total x\n# TYPE a_total counter\na_total 1\na_total 2\n",   // repeated
      "# HELP a x\n# TYPE a counter\na 1\n",                                // no _total
      "# TYPE a gauge\na 1\n",                                              // no HELP
      "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\n"
      "h_sum 1\nh_count 1\n",  // not cumulative
      "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_sum 1\nh_count 1\n",  // no +Inf
      "# HELP a x\n# TYPE a gauge\n# HELP b x\n# TYPE b gauge\nb 1\na 1\n",          // interleaved
      "# HELP a x\n# TYPE a gauge\na one\n",                                         // bad value
  };
  for (const std::string& page : broken) {
    EXPECT_NE(RunParser(dir_, page).status, 0) << page;
  }
  const Parsed good =
      RunParser(dir_, "# HELP a_total x\n# TYPE a_total counter\na_total{m=\"q\\\"\\\\\\n\"} 3\n");
  EXPECT_EQ(good.status, 0) << good.err;
  EXPECT_EQ(Json::parse(good.out, nullptr, false), Json({{"a_total{m=\"q\"\\\n\"}", 3}}));
}

TEST(MetricsAuthTest, WithTokensTheMetricsPageNeedsAnInferToken) {
  const std::string dir = TempDir();
  std::ofstream(dir + "/tokens") << "infer-token-0123456789 infer\n";
  ServerProcess server(dir + "/cache", {"--metrics-port=0", "--auth-tokens=" + dir + "/tokens"});
  ASSERT_GT(server.metrics_port(), 0);
  httplib::Client client("127.0.0.1", server.metrics_port());
  httplib::Result none = client.Get("/metrics");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 401);
  httplib::Result good =
      client.Get("/metrics", {{"Authorization", "Bearer infer-token-0123456789"}});
  ASSERT_TRUE(good);
  EXPECT_EQ(good->status, 200);
  EXPECT_THAT(good->body, HasSubstr("# TYPE kiln_compiles_total counter"));
  std::system(("rm -rf " + dir).c_str());
}

}  // namespace
}  // namespace kiln
