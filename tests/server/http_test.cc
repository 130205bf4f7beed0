// KServe v2 over HTTP/REST against a real kiln-server process (--http-port=0):
// every route's status and body, JSON and binary-extension inference of every
// datatype compared with hand-written values, the MLP against NumPy, errors'
// statuses, the body limit, and bearer tokens.
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "proto/kiln_service.grpc.pb.h"
#include "tests/server/server_fixture.h"
#include "tests/server/server_process.h"

namespace kiln {
namespace {

using ::kiln::testing::AddNode;
using ::kiln::testing::Fixture;
using ::kiln::testing::MlpGraph;
using ::kiln::testing::NpyFloat32;
using ::kiln::testing::ServerProcess;
using ::testing::HasSubstr;
using Json = nlohmann::json;

std::string TempDir(const char* name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/" + name + "XXXXXX";
  return ::mkdtemp(dir.data());
}

grpc::Status Compile(int grpc_port, const kiln::v1::Graph& graph, const std::string& name) {
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(grpc_port),
                                     grpc::InsecureChannelCredentials());
  auto compiler = kiln::v1::Compiler::NewStub(channel);
  kiln::v1::CompileModelRequest request;
  *request.mutable_graph() = graph;
  request.set_model_name(name);
  kiln::v1::CompileModelResponse response;
  grpc::ClientContext context;
  return compiler->CompileModel(&context, request, &response);
}

template <typename T>
std::string Bytes(std::initializer_list<T> values) {
  std::string out;
  for (T v : values) out.append(reinterpret_cast<const char*>(&v), sizeof(T));
  return out;
}

// One datatype through a model computing wide = float64(x) and back =
// <datatype>(wide): `json` the six values of x as JSON, `raw` the same
// little-endian (written out by hand), `wide` what float64(x) is.
struct DatatypeCase {
  std::string datatype;  // KServe's name
  std::string kiln;      // the cast op's name for it
  kiln::v1::DataType wire;
  std::string json;
  std::string raw;
  std::vector<double> wide;
};

std::vector<DatatypeCase> DatatypeCases() {
  return {
      {"BOOL",
       "bool",
       kiln::v1::BOOL,
       "[true, false, true, true, false, false]",
       std::string("\x01\x00\x01\x01\x00\x00", 6),
       {1, 0, 1, 1, 0, 0}},
      {"UINT8",
       "uint8",
       kiln::v1::UINT8,
       "[0, 1, 2, 127, 128, 255]",
       Bytes<uint8_t>({0, 1, 2, 127, 128, 255}),
       {0, 1, 2, 127, 128, 255}},
      {"UINT16",
       "uint16",
       kiln::v1::UINT16,
       "[0, 1, 65535, 300, 7, 1000]",
       Bytes<uint16_t>({0, 1, 65535, 300, 7, 1000}),
       {0, 1, 65535, 300, 7, 1000}},
      {"UINT32",
       "uint32",
       kiln::v1::UINT32,
       "[0, 1, 4294967295, 65536, 7, 1000]",
       Bytes<uint32_t>({0, 1, 4294967295u, 65536, 7, 1000}),
       {0, 1, 4294967295.0, 65536, 7, 1000}},
      // Below 2^63: Kiln's cast of a larger uint64 to float64 comes out negative
      // (a compiler issue, not the protocol's); UINT64 past INT64's range is
      // UInt64PastInt64RangeRoundTrips's.
      {"UINT64",
       "uint64",
       kiln::v1::UINT64,
       "[0, 1, 4611686018427387904, 4294967296, 7, 9007199254740992]",
       Bytes<uint64_t>({0, 1, uint64_t{1} << 62, uint64_t{1} << 32, 7, uint64_t{1} << 53}),
       {0, 1, 4611686018427387904.0, 4294967296.0, 7, 9007199254740992.0}},
      {"INT8",
       "int8",
       kiln::v1::INT8,
       "[-128, 127, 0, -1, 1, 5]",
       Bytes<int8_t>({-128, 127, 0, -1, 1, 5}),
       {-128, 127, 0, -1, 1, 5}},
      {"INT16",
       "int16",
       kiln::v1::INT16,
       "[-32768, 32767, 0, -1, 1, 5]",
       Bytes<int16_t>({-32768, 32767, 0, -1, 1, 5}),
       {-32768, 32767, 0, -1, 1, 5}},
      {"INT32",
       "int32",
       kiln::v1::INT32,
       "[-2147483648, 2147483647, 0, -1, 1, 5]",
       Bytes<int32_t>({INT32_MIN, INT32_MAX, 0, -1, 1, 5}),
       {-2147483648.0, 2147483647.0, 0, -1, 1, 5}},
      {"INT64",
       "int64",
       kiln::v1::INT64,
       "[-9223372036854775808, 9007199254740992, 0, -1, 1, 123456789]",
       Bytes<int64_t>({INT64_MIN, int64_t{1} << 53, 0, -1, 1, 123456789}),
       {-9223372036854775808.0, 9007199254740992.0, 0, -1, 1, 123456789}},
      // float16 bits: 1.5 3e00, -2.25 c080, 65504 7bff, 2^-10 1400, -1 bc00.
      {"FP16",
       "float16",
       kiln::v1::FLOAT16,
       "[1.5, -2.25, 65504, 0.0009765625, 0, -1]",
       Bytes<uint16_t>({0x3e00, 0xc080, 0x7bff, 0x1400, 0, 0xbc00}),
       {1.5, -2.25, 65504, 0.0009765625, 0, -1}},
      // bfloat16 bits: 1.5 3fc0, -3 c040, 256 4380, 2^-7 3c00, -1 bf80.
      {"BF16",
       "bfloat16",
       kiln::v1::BFLOAT16,
       "[1.5, -3, 256, 0.0078125, 0, -1]",
       Bytes<uint16_t>({0x3fc0, 0xc040, 0x4380, 0x3c00, 0, 0xbf80}),
       {1.5, -3, 256, 0.0078125, 0, -1}},
      {"FP32",
       "float32",
       kiln::v1::FLOAT32,
       "[0.5, -2.25, 1e30, 0.1, 0, -1]",
       Bytes<float>({0.5f, -2.25f, 1e30f, 0.1f, 0.0f, -1.0f}),
       {0.5, -2.25, static_cast<double>(1e30f), static_cast<double>(0.1f), 0, -1}},
      {"FP64",
       "float64",
       kiln::v1::FLOAT64,
       "[0.5, -2.25, 1e300, 0.1, 0, -1]",
       Bytes<double>({0.5, -2.25, 1e300, 0.1, 0.0, -1.0}),
       {0.5, -2.25, 1e300, 0.1, 0, -1}},
  };
}

// x: datatype[2,3]; wide = cast(x, float64); back = cast(wide, datatype).
kiln::v1::Graph CastGraph(const DatatypeCase& c) {
  kiln::v1::Graph g;
  g.set_name("cast_" + c.kiln);
  kiln::v1::ValueInfo* x = g.add_inputs();
  x->set_name("x");
  x->set_dtype(c.wire);
  x->add_dims(2);
  x->add_dims(3);
  (*AddNode(g, "wide", "cast", {"x"})->mutable_attributes())["to"].set_s("float64");
  (*AddNode(g, "back", "cast", {"wide"})->mutable_attributes())["to"].set_s(c.kiln);
  g.add_outputs("wide");
  g.add_outputs("back");
  return g;
}

// The server every test but the limit and token ones talks to.
class HttpTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(TempDir("kiln_http_test"));
    server_ = new ServerProcess(*dir_, {"--http-port=0"});
    ASSERT_GT(server_->port(), 0) << "kiln-server did not start";
    ASSERT_GT(server_->http_port(), 0) << "no HTTP port in kiln-server's output";
    grpc::Status s = Compile(server_->port(), MlpGraph(), "mlp");
    ASSERT_TRUE(s.ok()) << s.error_message();
    kiln::v1::Graph max_uint64;
    max_uint64.set_name("max_uint64");
    kiln::v1::ValueInfo* x = max_uint64.add_inputs();
    x->set_name("x");
    x->set_dtype(kiln::v1::UINT64);
    x->add_dims(3);
    AddNode(max_uint64, "y", "maximum", {"x", "x"});
    max_uint64.add_outputs("y");
    s = Compile(server_->port(), max_uint64, "max_uint64");
    ASSERT_TRUE(s.ok()) << s.error_message();
    for (const DatatypeCase& c : DatatypeCases()) {
      s = Compile(server_->port(), CastGraph(c), "cast_" + c.kiln);
      ASSERT_TRUE(s.ok()) << c.datatype << ": " << s.error_message();
    }
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    std::system(("rm -rf " + *dir_).c_str());
  }

  static httplib::Client Client() {
    httplib::Client client("127.0.0.1", server_->http_port());
    client.set_read_timeout(120, 0);
    return client;
  }

  // The MLP's input x as nested JSON rows.
  static Json MlpRows() {
    const NpyFloat32 x = Fixture("x");
    Json rows = Json::array();
    for (int64_t r = 0; r < x.shape[0]; ++r) {
      Json row = Json::array();
      for (int64_t c = 0; c < x.shape[1]; ++c) row.push_back(x.values[r * x.shape[1] + c]);
      rows.push_back(row);
    }
    return rows;
  }

  static Json Parse(const std::string& body) {
    Json j = Json::parse(body, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << body;
    return j;
  }

  // POSTs `body` to `path`; the response (status 0 when there is none).
  static httplib::Result Post(const std::string& path, const std::string& body,
                              const httplib::Headers& headers = {}) {
    return Client().Post(path.c_str(), headers, body, "application/json");
  }

  inline static ServerProcess* server_ = nullptr;
  inline static std::string* dir_ = nullptr;
};

TEST_F(HttpTest, HealthLiveAndReadyAnswer200) {
  for (const char* path : {"/v2/health/live", "/v2/health/ready"}) {
    httplib::Result r = Client().Get(path);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 200) << path;
  }
}

TEST_F(HttpTest, ServerMetadataNamesKilnAndItsExtensions) {
  httplib::Result r = Client().Get("/v2");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"), "application/json");
  Json j = Parse(r->body);
  EXPECT_EQ(j["name"], "kiln");
  EXPECT_TRUE(j["version"].is_string() && !j["version"].get<std::string>().empty());
  ASSERT_TRUE(j["extensions"].is_array());
  EXPECT_NE(std::find(j["extensions"].begin(), j["extensions"].end(), "kiln.profile"),
            j["extensions"].end());
}

TEST_F(HttpTest, ModelMetadataDescribesTheMlpWithAndWithoutItsVersion) {
  const NpyFloat32 y = Fixture("y");
  for (const char* path : {"/v2/models/mlp", "/v2/models/mlp/versions/1"}) {
    httplib::Result r = Client().Get(path);
    ASSERT_TRUE(r) << path;
    ASSERT_EQ(r->status, 200) << path << ": " << r->body;
    Json j = Parse(r->body);
    EXPECT_EQ(j["name"], "mlp");
    EXPECT_EQ(j["versions"], Json::array({"1"}));
    EXPECT_EQ(j["platform"], "kiln");
    EXPECT_EQ(j["inputs"], Json::parse(R"([{"name":"x","datatype":"FP32","shape":[4,16]}])"));
    ASSERT_EQ(j["outputs"].size(), 1u);
    EXPECT_EQ(j["outputs"][0]["name"], "probs");
    EXPECT_EQ(j["outputs"][0]["datatype"], "FP32");
    EXPECT_EQ(j["outputs"][0]["shape"], Json(y.shape));
  }
}

TEST_F(HttpTest, ModelReadyIs200ForALoadedModelAnd404ForAnUnknownOne) {
  httplib::Result ready = Client().Get("/v2/models/mlp/ready");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 200);
  httplib::Result versioned = Client().Get("/v2/models/mlp/versions/1/ready");
  ASSERT_TRUE(versioned);
  EXPECT_EQ(versioned->status, 200);
  httplib::Result unknown = Client().Get("/v2/models/nope/ready");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404);
  EXPECT_THAT(Parse(unknown->body)["error"].get<std::string>(), HasSubstr("nope"));
  httplib::Result other_version = Client().Get("/v2/models/mlp/versions/7/ready");
  ASSERT_TRUE(other_version);
  EXPECT_EQ(other_version->status, 404) << other_version->body;
}

TEST_F(HttpTest, JsonInferOfTheMlpMatchesNumPy) {
  Json request = {
      {"id", "req-7"},
      {"inputs", {{{"name", "x"}, {"shape", {4, 16}}, {"datatype", "FP32"}, {"data", MlpRows()}}}}};
  httplib::Result r = Post("/v2/models/mlp/infer", request.dump());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->get_header_value("Content-Type"), "application/json");
  Json j = Parse(r->body);
  EXPECT_EQ(j["model_name"], "mlp");
  EXPECT_EQ(j["model_version"], "1");
  EXPECT_EQ(j["id"], "req-7");
  const NpyFloat32 y = Fixture("y");
  ASSERT_EQ(j["outputs"].size(), 1u);
  const Json& out = j["outputs"][0];
  EXPECT_EQ(out["name"], "probs");
  EXPECT_EQ(out["datatype"], "FP32");
  EXPECT_EQ(out["shape"], Json(y.shape));
  ASSERT_EQ(out["data"].size(), y.values.size());
  for (size_t i = 0; i < y.values.size(); ++i) {
    EXPECT_NEAR(out["data"][i].get<double>(), y.values[i], 1e-5) << "at " << i;
  }
}

TEST_F(HttpTest, BinaryInferOfTheMlpGivesTheJsonInferNumbers) {
  const NpyFloat32 x = Fixture("x");
  Json json_request = {{"inputs",
                        {{{"name", "x"},
                          {"shape", {4, 16}},
                          {"datatype", "FP32"},
                          {"data", x.values}}}}};  // flat this time
  httplib::Result as_json = Post("/v2/models/mlp/infer", json_request.dump());
  ASSERT_TRUE(as_json);
  ASSERT_EQ(as_json->status, 200) << as_json->body;
  const Json json_out = Parse(as_json->body)["outputs"][0]["data"];

  Json header = {{"inputs",
                  {{{"name", "x"},
                    {"shape", {4, 16}},
                    {"datatype", "FP32"},
                    {"parameters", {{"binary_data_size", x.bytes().size()}}}}}},
                 {"parameters", {{"binary_data_output", true}}}};
  const std::string text = header.dump();
  httplib::Result r = Client().Post(
      "/v2/models/mlp/infer", {{"Inference-Header-Content-Length", std::to_string(text.size())}},
      text + x.bytes(), "application/octet-stream");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const size_t json_length = std::stoul(r->get_header_value("Inference-Header-Content-Length"));
  ASSERT_LE(json_length, r->body.size());
  Json j = Parse(r->body.substr(0, json_length));
  ASSERT_EQ(j["outputs"].size(), 1u);
  const Json& out = j["outputs"][0];
  EXPECT_FALSE(out.contains("data"));
  const size_t size = out["parameters"]["binary_data_size"].get<size_t>();
  ASSERT_EQ(size, json_out.size() * sizeof(float));
  ASSERT_EQ(r->body.size(), json_length + size);
  for (size_t i = 0; i < json_out.size(); ++i) {
    float got;
    std::memcpy(&got, r->body.data() + json_length + i * sizeof(float), sizeof got);
    EXPECT_EQ(got, static_cast<float>(json_out[i].get<double>())) << "at " << i;
  }
}

TEST_F(HttpTest, EveryDatatypeRoundTripsAsJsonAndAsBinary) {
  for (const DatatypeCase& c : DatatypeCases()) {
    SCOPED_TRACE(c.datatype);
    const std::string path = "/v2/models/cast_" + c.kiln + "/infer";
    Json request = {{"inputs",
                     {{{"name", "x"},
                       {"shape", {2, 3}},
                       {"datatype", c.datatype},
                       {"data", Json::parse(c.json)}}}}};
    httplib::Result r = Post(path, request.dump());
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    Json j = Parse(r->body);
    Json back, wide;
    for (const Json& out : j["outputs"]) {
      (out["name"] == "back" ? back : wide) = out;
    }
    EXPECT_EQ(back["datatype"], c.datatype);
    EXPECT_EQ(back["shape"], Json({2, 3}));
    EXPECT_EQ(wide["datatype"], "FP64");
    ASSERT_EQ(wide["data"].size(), 6u);
    ASSERT_EQ(back["data"].size(), 6u);
    const Json sent = Json::parse(c.json);
    for (size_t i = 0; i < 6; ++i) {
      EXPECT_EQ(wide["data"][i].get<double>(), c.wide[i]) << "wide at " << i;
      if (c.datatype == "FP32") {
        EXPECT_EQ(static_cast<float>(back["data"][i].get<double>()),
                  static_cast<float>(sent[i].get<double>()));
      } else {
        EXPECT_EQ(back["data"][i], sent[i]) << "back at " << i;  // exact, integers exactly
      }
    }

    // The same values as binary, both ways: the same numbers.
    Json header = {{"inputs",
                    {{{"name", "x"},
                      {"shape", {2, 3}},
                      {"datatype", c.datatype},
                      {"parameters", {{"binary_data_size", c.raw.size()}}}}}},
                   {"outputs",
                    {{{"name", "back"}, {"parameters", {{"binary_data", true}}}},
                     {{"name", "wide"}, {"parameters", {{"binary_data", true}}}}}}};
    const std::string text = header.dump();
    httplib::Result b = Client().Post(
        path.c_str(), {{"Inference-Header-Content-Length", std::to_string(text.size())}},
        text + c.raw, "application/octet-stream");
    ASSERT_TRUE(b);
    ASSERT_EQ(b->status, 200) << b->body;
    const size_t json_length = std::stoul(b->get_header_value("Inference-Header-Content-Length"));
    Json bj = Parse(b->body.substr(0, json_length));
    size_t at = json_length;
    for (const Json& out : bj["outputs"]) {
      const size_t size = out["parameters"]["binary_data_size"].get<size_t>();
      ASSERT_LE(at + size, b->body.size());
      const std::string bytes = b->body.substr(at, size);
      at += size;
      if (out["name"] == "back") {
        EXPECT_EQ(bytes, c.raw);
      } else {
        ASSERT_EQ(bytes.size(), 6 * sizeof(double));
        for (size_t i = 0; i < 6; ++i) {
          double v;
          std::memcpy(&v, bytes.data() + i * sizeof v, sizeof v);
          EXPECT_EQ(v, c.wide[i]) << "binary wide at " << i;
        }
      }
    }
    EXPECT_EQ(at, b->body.size());
  }
}

TEST_F(HttpTest, UInt64PastInt64RangeRoundTrips) {
  const std::string values = "[18446744073709551615, 9223372036854775808, 1]";
  Json request = {
      {"inputs",
       {{{"name", "x"}, {"shape", {3}}, {"datatype", "UINT64"}, {"data", Json::parse(values)}}}}};
  httplib::Result r = Post("/v2/models/max_uint64/infer", request.dump());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const Json y = Parse(r->body)["outputs"][0];
  EXPECT_EQ(y["datatype"], "UINT64");
  EXPECT_EQ(y["data"].dump(), "[18446744073709551615,9223372036854775808,1]");
}

TEST_F(HttpTest, ConfigDescribesTheMlpInTritonsShape) {
  httplib::Result r = Client().Get("/v2/models/mlp/config");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  Json j = Parse(r->body);
  EXPECT_EQ(j["name"], "mlp");
  EXPECT_EQ(j["max_batch_size"], 0);
  ASSERT_EQ(j["input"].size(), 1u) << r->body;
  EXPECT_EQ(j["input"][0]["name"], "x");
  EXPECT_EQ(j["input"][0]["data_type"], "TYPE_FP32");
  EXPECT_EQ(j["input"][0]["dims"], Json({4, 16})) << "dims as JSON numbers: " << r->body;
  ASSERT_EQ(j["output"].size(), 1u);
  EXPECT_EQ(j["output"][0]["name"], "probs");
  EXPECT_FALSE(j.contains("dynamic_batching"));
  httplib::Result unknown = Client().Get("/v2/models/nope/config");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404);
}

TEST_F(HttpTest, StatsCountTheCallsMadeOverHttp) {
  auto stats = [&]() {
    httplib::Result r = Client().Get("/v2/models/cast_int32/versions/1/stats");
    EXPECT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
    Json j = Parse(r->body);
    EXPECT_EQ(j["model_stats"].size(), 1u) << r->body;
    return j["model_stats"][0];
  };
  const Json before = stats();
  EXPECT_EQ(before["name"], "cast_int32");
  EXPECT_EQ(before["version"], "1");
  const std::string good =
      R"({"inputs":[{"name":"x","datatype":"INT32","shape":[2,3],"data":[1,2,3,4,5,6]}]})";
  const std::string bad =
      R"({"inputs":[{"name":"x","datatype":"INT32","shape":[3,2],"data":[1,2,3,4,5,6]}]})";
  for (const std::string& body : {good, good, bad}) Post("/v2/models/cast_int32/infer", body);
  const Json after = stats();
  auto moved = [&](const char* phase, const char* field) {
    return after["inference_stats"][phase][field].get<int64_t>() -
           before["inference_stats"][phase][field].get<int64_t>();
  };
  EXPECT_EQ(moved("success", "count"), 2);
  EXPECT_EQ(moved("fail", "count"), 1);
  EXPECT_GT(moved("success", "ns"), 0);
  EXPECT_EQ(after["execution_count"].get<int64_t>() - before["execution_count"].get<int64_t>(), 2);
  EXPECT_GT(after["last_inference"].get<int64_t>(), 0);

  httplib::Result all = Client().Get("/v2/models/stats");
  ASSERT_TRUE(all);
  ASSERT_EQ(all->status, 200);
  std::vector<std::string> names;
  const Json listed = Parse(all->body);
  for (const Json& m : listed["model_stats"]) names.push_back(m["name"]);
  EXPECT_THAT(names, ::testing::IsSupersetOf({"mlp", "cast_int32", "max_uint64"}));
  httplib::Result unknown = Client().Get("/v2/models/nope/stats");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404);
}

TEST_F(HttpTest, ErrorsAnswerJsonWithTheStatusOfTheirGrpcCode) {
  struct Case {
    std::string path;
    std::string body;
    int status;
    std::string says;
  };
  const std::string x = R"("name":"x","datatype":"FP32")";
  const std::vector<Case> cases = {
      {"/v2/models/nope/infer", R"({"inputs":[]})", 404, "nope"},
      {"/v2/models/mlp/infer", "{not json", 400, "not valid JSON"},
      {"/v2/models/mlp/infer", R"({"inputs":[{)" + x + R"(,"shape":[4,15],"data":[]}]})", 400,
       "0 values"},
      {"/v2/models/mlp/infer",
       R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1,2],"data":[1,2]}]})", 400, "shape"},
      {"/v2/models/mlp/infer",
       R"({"inputs":[{"name":"x","datatype":"BYTES","shape":[1],"data":["a"]}]})", 501, "BYTES"},
      {"/v2/models/mlp/infer",
       R"({"inputs":[{"name":"x","datatype":"FP33","shape":[1],"data":[1]}]})", 400, "FP33"},
      {"/v2/models/cast_int8/infer",
       R"({"inputs":[{"name":"x","datatype":"INT8","shape":[2,3],"data":[1,2,3,4,5,300]}]})", 400,
       "out of range"},
      {"/v2/models/cast_int8/infer",
       R"({"inputs":[{"name":"x","datatype":"INT8","shape":[2,3],"data":[1,2,3,4,5,"6"]}]})", 400,
       "expected an integer"},
      {"/v2/models/mlp/infer", R"({"outputs":[]})", 400, "'inputs'"},
      {"/v2/models/mlp/infer", R"({"inputs":[]})", 400, "x"},
      {"/v2/models/mlp/versions/9/infer", R"({"inputs":[]})", 404, "9"},
  };
  for (const Case& c : cases) {
    httplib::Result r = Post(c.path, c.body);
    ASSERT_TRUE(r) << c.body;
    EXPECT_EQ(r->status, c.status) << c.body << " -> " << r->body;
    Json j = Parse(r->body);
    ASSERT_TRUE(j.contains("error")) << r->body;
    EXPECT_THAT(j["error"].get<std::string>(), HasSubstr(c.says)) << c.body;
  }
  // No such route: 404, still KServe's JSON.
  httplib::Result r = Client().Get("/v2/nothing/here");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_THAT(Parse(r->body)["error"].get<std::string>(), HasSubstr("/v2/nothing/here"));
}

TEST_F(HttpTest, BinaryFramingErrorsAre400) {
  const std::string header = R"({"inputs":[{"name":"x","datatype":"INT8","shape":[2,3],)"
                             R"("parameters":{"binary_data_size":6}}]})";
  struct Case {
    std::string length;
    std::string body;
    std::string says;
  };
  const std::vector<Case> cases = {
      {std::to_string(header.size() + 100), header + "123456", "more than the body"},
      {std::to_string(header.size()), header + "123", "runs past"},
      {std::to_string(header.size()), header + "1234567", "belong to no input"},
      {"-4", header + "123456", "non-negative integer"},
  };
  for (const Case& c : cases) {
    httplib::Result r =
        Client().Post("/v2/models/cast_int8/infer", {{"Inference-Header-Content-Length", c.length}},
                      c.body, "application/octet-stream");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << r->body;
    EXPECT_THAT(Parse(r->body)["error"].get<std::string>(), HasSubstr(c.says));
  }
}

TEST(HttpLimitTest, ABodyOverMaxMessageMbIs413AndTheServerGoesOn) {
  const std::string dir = TempDir("kiln_http_limit_test");
  ServerProcess server(dir, {"--http-port=0", "--max-message-mb=1"});
  ASSERT_GT(server.http_port(), 0);
  httplib::Client client("127.0.0.1", server.http_port());
  const std::string body(3 << 20, ' ');
  httplib::Result r = client.Post("/v2/models/mlp/infer", body, "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  Json j = Json::parse(r->body, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r->body;
  EXPECT_THAT(j["error"].get<std::string>(), HasSubstr("--max-message-mb"));
  httplib::Client again("127.0.0.1", server.http_port());
  httplib::Result live = again.Get("/v2/health/live");
  ASSERT_TRUE(live);
  EXPECT_EQ(live->status, 200);
  std::system(("rm -rf " + dir).c_str());
}

// PEM files under `dir`: ca, server (127.0.0.1), client (signed by ca).
bool MakeCertificates(const std::string& dir) {
  const std::string script = R"(
set -e
cd ")" + dir + R"("
key() { openssl ecparam -name prime256v1 -genkey -noout -out "$1.key"; }
openssl ecparam -name prime256v1 -genkey -noout -out ca.key
openssl req -x509 -new -key ca.key -out ca.pem -days 2 -subj "/CN=ca"
signed() {
  key "$1"
  openssl req -new -key "$1.key" -out "$1.csr" -subj "/CN=$1"
  printf '%s\n' "$2" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -out "$1.pem" \
    -days 2 -extfile "$1.ext"
}
signed server "subjectAltName=IP:127.0.0.1"
signed client "extendedKeyUsage=clientAuth"
)";
  std::ofstream(dir + "/make.sh") << script;
  return std::system(("bash " + dir + "/make.sh >" + dir + "/make.log 2>&1").c_str()) == 0;
}

TEST(HttpTlsTest, WithTlsCertTheHttpPortSpeaksTlsAndChecksClientCertificates) {
  // OpenSSL writes to a socket the server may have closed (a refused
  // handshake): a client takes that as an error, not as SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  const std::string dir = TempDir("kiln_http_tls_test");
  ASSERT_TRUE(MakeCertificates(dir));
  {
    ServerProcess server(dir, {"--http-port=0", "--tls-cert=" + dir + "/server.pem",
                               "--tls-key=" + dir + "/server.key"});
    ASSERT_GT(server.http_port(), 0);
    httplib::SSLClient tls("127.0.0.1", server.http_port());
    tls.set_ca_cert_path((dir + "/ca.pem").c_str());
    tls.enable_server_certificate_verification(true);
    httplib::Result r = tls.Get("/v2");
    ASSERT_TRUE(r) << "error " << static_cast<int>(r.error());
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(Json::parse(r->body, nullptr, false)["name"], "kiln");
    httplib::Client plain("127.0.0.1", server.http_port());
    plain.set_read_timeout(2, 0);
    httplib::Result refused = plain.Get("/v2");
    EXPECT_FALSE(refused && refused->status == 200) << "plain HTTP answered on the TLS port";
  }
  {
    ServerProcess server(
        dir, {"--http-port=0", "--tls-cert=" + dir + "/server.pem",
              "--tls-key=" + dir + "/server.key", "--tls-client-ca=" + dir + "/ca.pem"});
    ASSERT_GT(server.http_port(), 0);
    httplib::SSLClient without("127.0.0.1", server.http_port());
    without.set_ca_cert_path((dir + "/ca.pem").c_str());
    without.enable_server_certificate_verification(true);
    // TLS 1.3 refuses the missing certificate after the client's side of the
    // handshake is done: without a timeout httplib's client waits on.
    without.set_read_timeout(3, 0);
    without.set_write_timeout(3, 0);
    httplib::Result refused = without.Get("/v2");
    EXPECT_FALSE(refused && refused->status == 200) << "no client certificate, yet answered";
    httplib::SSLClient with("127.0.0.1", server.http_port(), dir + "/client.pem",
                            dir + "/client.key");
    with.set_ca_cert_path((dir + "/ca.pem").c_str());
    with.enable_server_certificate_verification(true);
    httplib::Result r = with.Get("/v2/health/live");
    ASSERT_TRUE(r) << "error " << static_cast<int>(r.error());
    EXPECT_EQ(r->status, 200);
  }
  std::system(("rm -rf " + dir).c_str());
}

// The server's peak resident set (VmHWM) in KiB, from /proc.
int64_t PeakRssKb(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::atoll(line.c_str() + 6);
  }
  return -1;
}

TEST(HttpLimitTest, AGzipBodyIsBoundedOnceInflatedNotOnlyOnTheWire) {
  const std::string dir = TempDir("kiln_http_gzip_test");
  // 200 MB of zeros in ~200 KB: under --max-message-mb=1 on the wire.
  ASSERT_EQ(std::system(("head -c 200000000 /dev/zero | gzip -9 > " + dir + "/zeros.gz").c_str()),
            0);
  std::ifstream in(dir + "/zeros.gz", std::ios::binary);
  const std::string gzip((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_LT(gzip.size(), 1u << 20);
  ServerProcess server(dir, {"--http-port=0", "--metrics-port=0", "--max-message-mb=1"});
  ASSERT_GT(server.http_port(), 0);
  const int64_t before_kb = PeakRssKb(server.pid());
  ASSERT_GT(before_kb, 0);
  const httplib::Headers gzipped = {{"Content-Encoding", "gzip"}};
  struct Case {
    int port;
    std::string path;
    int status;
  };
  for (const Case& c :
       {Case{server.http_port(), "/v2/models/mlp/infer", 413},
        Case{server.http_port(), "/v2/repository/index", 413},
        Case{server.http_port(), "/nowhere", 404}, Case{server.metrics_port(), "/metrics", 404}}) {
    httplib::Client client("127.0.0.1", c.port);
    httplib::Result r = client.Post(c.path.c_str(), gzipped, gzip, "application/json");
    ASSERT_TRUE(r) << c.path;
    EXPECT_EQ(r->status, c.status) << c.path << ": " << r->body;
    EXPECT_TRUE(Json::parse(r->body, nullptr, false).contains("error")) << r->body;
  }
  // Inflated whole, one body would have added 200 MB (335 MB peak, seen).
  EXPECT_LT(PeakRssKb(server.pid()) - before_kb, 32 * 1024);
  httplib::Client client("127.0.0.1", server.http_port());
  httplib::Result live = client.Get("/v2/health/live");
  ASSERT_TRUE(live);
  EXPECT_EQ(live->status, 200);
  std::system(("rm -rf " + dir).c_str());
}

TEST(HttpAuthTest, RoutesNeedABearerTokenWithTheirScopeButProbesDoNot) {
  const std::string dir = TempDir("kiln_http_auth_test");
  std::ofstream(dir + "/tokens") << "infer-token-0123456789 infer\n"
                                 << "expired-token-0123456789 infer expires=1000000000\n";
  ServerProcess server(dir, {"--http-port=0", "--auth-tokens=" + dir + "/tokens"});
  ASSERT_GT(server.http_port(), 0);
  httplib::Client client("127.0.0.1", server.http_port());
  httplib::Result live = client.Get("/v2/health/live");
  ASSERT_TRUE(live);
  EXPECT_EQ(live->status, 200);
  httplib::Result none = client.Get("/v2");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 401);
  EXPECT_TRUE(Json::parse(none->body, nullptr, false).contains("error")) << none->body;
  for (const char* bad :
       {"Bearer wrong-token-0123456789", "Bearer expired-token-0123456789", "Basic aW5mZXI6eA=="}) {
    httplib::Result r = client.Get("/v2", {{"Authorization", bad}});
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 401) << bad;
    EXPECT_EQ(r->body.find("0123456789"), std::string::npos) << "a token echoed: " << r->body;
  }
  const httplib::Headers good = {{"Authorization", "Bearer infer-token-0123456789"}};
  httplib::Result ok = client.Get("/v2", good);
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  httplib::Result infer =
      client.Post("/v2/models/nope/infer", {}, R"({"inputs":[]})", "application/json");
  ASSERT_TRUE(infer);
  EXPECT_EQ(infer->status, 401);
  infer = client.Post("/v2/models/nope/infer", good, R"({"inputs":[]})", "application/json");
  ASSERT_TRUE(infer);
  EXPECT_EQ(infer->status, 404);  // past the token check
  std::system(("rm -rf " + dir).c_str());
}

}  // namespace
}  // namespace kiln
