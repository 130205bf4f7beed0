// The shared model store across real kiln-server processes: replicas with
// their own --cache-dir, one redis-server (started per test on a free
// loopback port) as both their --remote-cache and their --model-store.
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "client/kiln_client.h"
#include "client/model_file.h"
#include "client/npy.h"
#include "common/sha256.h"
#include "engine/redis_connection.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "gtest/gtest.h"
#include "onnx/onnx_pb.h"
#include "tests/server/external_data_model.h"
#include "tests/server/replica_fixture.h"
#include "tests/server/server_process.h"
#include "tests/test_util/redis_server.h"

namespace kiln {
namespace {

using client::KilnClient;
using testing::RedisServer;
using testing::ServerProcess;

class ModelStoreTest : public testing::ReplicaFixture {
 protected:
  std::unique_ptr<ServerProcess> Replica(const std::string& name,
                                         std::vector<std::string> extra = {}) {
    std::vector<std::string> flags = {"--remote-cache=" + redis_.url(),
                                      "--model-store=" + redis_.url(), "--model-store-view-ms=300"};
    flags.insert(flags.end(), extra.begin(), extra.end());
    return std::make_unique<ServerProcess>(dir_ + "/" + name, flags, LogPath(name));
  }

  std::optional<std::string> RedisGet(const std::string& key) {
    engine::RedisConnection redis({"127.0.0.1", redis_.port(), 0}, {});
    auto v = redis.Get(key);
    EXPECT_TRUE(v.ok()) << v.status();
    return v.ok() ? *v : std::nullopt;
  }
};

TEST_F(ModelStoreTest, ModelCompiledOnOneReplicaIsServedByAnotherWithoutCompiling) {
  auto a = Replica("a"), b = Replica("b");
  auto ca = Connect(*a), cb = Connect(*b);
  ASSERT_NE(ca, nullptr);
  ASSERT_NE(cb, nullptr);
  auto compiled = ca->Compile(Mlp("mlp"));
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  const int64_t kernels = compiled->report().kernels_size();
  ASSERT_GT(kernels, 1);
  ASSERT_TRUE(AwaitRemoteWrites(*ca, kernels));

  // The mapping names the record by the SHA-256 of what Redis holds, and the
  // record is the request without its name (the model's graph and options).
  std::optional<std::string> mapping = RedisGet("kiln:model:name:mlp");
  ASSERT_TRUE(mapping.has_value());
  ASSERT_EQ(mapping->size(), 64u + 2u) << *mapping;
  EXPECT_EQ(mapping->substr(64), " 1");
  std::optional<std::string> record = RedisGet("kiln:model:record:" + mapping->substr(0, 64));
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(Sha256Hex(*record), mapping->substr(0, 64));
  kiln::v1::CompileModelRequest stored;
  ASSERT_TRUE(stored.ParseFromString(*record));
  EXPECT_EQ(stored.model_name(), "");
  EXPECT_EQ(stored.graph().SerializeAsString(), Mlp("mlp").graph().SerializeAsString());

  // B never saw a CompileModel: its first ModelInfer loads from the store,
  // every kernel a remote hit, none compiled there.
  ExpectReferenceOutput(*cb, "mlp");
  const kiln::v1::GetCacheStatsResponse sb = Stats(*cb);
  EXPECT_EQ(sb.compiles(), 0);
  EXPECT_EQ(sb.remote().hits(), kernels);
  auto metadata = cb->ModelMetadata("mlp");
  ASSERT_TRUE(metadata.ok()) << metadata.status();
  EXPECT_EQ(metadata->inputs(0).shape(0), 4);
  EXPECT_EQ(Count(ReadFile(LogPath("b")), "loaded version 1 from the model store"), 1);

  // A name nobody compiled is still NOT_FOUND.
  auto unknown = cb->Infer("nobody", {{"x", x_}}, false);
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound) << unknown.status();
}

TEST_F(ModelStoreTest, ConcurrentRequestsForAnUnknownNameLoadItOnce) {
  auto a = Replica("a"), b = Replica("b");
  auto ca = Connect(*a), cb = Connect(*b);
  ASSERT_NE(ca, nullptr);
  ASSERT_NE(cb, nullptr);
  ASSERT_TRUE(ca->Compile(Mlp("mlp")).ok());
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] {
      auto c = Connect(*b);
      if (c && c->Infer("mlp", {{"x", x_}}, false).ok()) ++ok;
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(ok.load(), 8);
  EXPECT_EQ(Count(ReadFile(LogPath("b")), "from the model store"), 1) << ReadFile(LogPath("b"));
}

TEST_F(ModelStoreTest, UnloadOnOneReplicaRemovesTheNameFromEvery) {
  auto a = Replica("a"), b = Replica("b");
  auto ca = Connect(*a), cb = Connect(*b);
  ASSERT_NE(ca, nullptr);
  ASSERT_NE(cb, nullptr);
  ASSERT_TRUE(ca->Compile(Mlp("mlp")).ok());
  ExpectReferenceOutput(*cb, "mlp");
  ASSERT_TRUE(ca->UnloadModel("mlp").ok());
  EXPECT_EQ(RedisGet("kiln:model:name:mlp"), "-");  // a tombstone
  // B drops it at its first request after its view (300 ms) expires.
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  auto r = cb->Infer("mlp", {{"x", x_}}, false);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound) << r.status();
  auto listed = cb->ListModels();
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->models_size(), 0);

  // Unloading on a replica that never loaded the name works too.
  ASSERT_TRUE(ca->Compile(Mlp("mlp")).ok());
  auto c = Replica("c");
  auto cc = Connect(*c);
  ASSERT_NE(cc, nullptr);
  EXPECT_TRUE(cc->UnloadModel("mlp").ok());
  EXPECT_EQ(RedisGet("kiln:model:name:mlp"), "-");
  // ... and once more is NOT_FOUND: nothing serves it anywhere.
  EXPECT_EQ(cc->UnloadModel("mlp").code(), absl::StatusCode::kNotFound);
  // A name nobody ever had leaves nothing behind in Redis.
  EXPECT_EQ(cc->UnloadModel("nobody").code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(RedisGet("kiln:model:name:nobody").has_value());
}

TEST_F(ModelStoreTest, RedisDownOrRestartedEmptyLeavesReplicasServing) {
  auto a = Replica("a"), b = Replica("b");
  auto ca = Connect(*a), cb = Connect(*b);
  ASSERT_NE(ca, nullptr);
  ASSERT_NE(cb, nullptr);
  ASSERT_TRUE(ca->Compile(Mlp("mlp")).ok());
  ASSERT_TRUE(ca->Compile(Mlp("spare", 2)).ok());
  ExpectReferenceOutput(*cb, "mlp");
  redis_.Stop();
  std::this_thread::sleep_for(std::chrono::milliseconds(400));  // past the view
  ExpectReferenceOutput(*cb, "mlp");
  ExpectReferenceOutput(*ca, "mlp");
  // A name not loaded here cannot be fetched: NOT_FOUND, at once.
  const auto start = std::chrono::steady_clock::now();
  auto other = cb->Infer("other", {{"x", x_}}, false);
  EXPECT_EQ(other.status().code(), absl::StatusCode::kNotFound) << other.status();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  // An unload the store cannot record is not reported done: the other
  // replicas still serve the name.
  absl::Status unload = ca->UnloadModel("spare");
  EXPECT_EQ(unload.code(), absl::StatusCode::kUnavailable) << unload;
  EXPECT_NE(unload.message().find("try again"), absl::string_view::npos) << unload;

  // Back without its data (no persistence): the store knows no name, which
  // is not an unload; the replicas keep serving.
  ASSERT_TRUE(redis_.Start());
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  ExpectReferenceOutput(*cb, "mlp");
  // An unload is, once B asks Redis again (its backoff after the failures
  // while Redis was down is at most a few seconds).
  ASSERT_TRUE(ca->UnloadModel("mlp").ok());
  absl::Status gone;
  for (int i = 0; i < 80 && !absl::IsNotFound(gone); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    gone = cb->Infer("mlp", {{"x", x_}}, false).status();
  }
  EXPECT_EQ(gone.code(), absl::StatusCode::kNotFound) << gone;
  // One warning for the outage on each replica, and a line when it ended.
  for (const char* replica : {"a", "b"}) {
    const std::string log = ReadFile(LogPath(replica));
    EXPECT_EQ(Count(log, "model store unavailable"), 1) << replica << "\n" << log;
    EXPECT_EQ(Count(log, "model store " + redis_.url() + "/0 is back"), 1) << replica << "\n"
                                                                           << log;
  }
}

TEST_F(ModelStoreTest, ReRegisteredNameReachesTheOtherReplicas) {
  auto a = Replica("a"), b = Replica("b");
  auto ca = Connect(*a), cb = Connect(*b);
  ASSERT_NE(ca, nullptr);
  ASSERT_NE(cb, nullptr);
  ASSERT_TRUE(ca->Compile(Mlp("mlp", 4)).ok());
  ExpectReferenceOutput(*cb, "mlp");
  kiln::v1::CompileModelRequest two = Mlp("mlp", 2);
  two.set_replace(true);
  auto replaced = ca->Compile(two);
  ASSERT_TRUE(replaced.ok()) << replaced.status();
  EXPECT_EQ(replaced->version(), 2);
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  // B's next request for the name finds the new mapping and loads version 2.
  auto metadata = cb->ModelMetadata("mlp");
  ASSERT_TRUE(metadata.ok()) << metadata.status();
  EXPECT_EQ(metadata->inputs(0).shape(0), 2);
  EXPECT_EQ(Count(ReadFile(LogPath("b")), "loaded version 2 from the model store"), 1);
}

// CompileModel on a replica that never saw the name still knows it: the
// cluster has one name space and one version sequence.
TEST_F(ModelStoreTest, CompilingANameAnotherReplicaRegisteredNeedsReplace) {
  auto a = Replica("a"), b = Replica("b");
  auto ca = Connect(*a), cb = Connect(*b);
  ASSERT_NE(ca, nullptr);
  ASSERT_NE(cb, nullptr);
  ASSERT_TRUE(ca->Compile(Mlp("mlp", 4)).ok());
  auto clash = cb->Compile(Mlp("mlp", 2));
  EXPECT_EQ(clash.status().code(), absl::StatusCode::kAlreadyExists) << clash.status();
  kiln::v1::CompileModelRequest two = Mlp("mlp", 2);
  two.set_replace(true);
  auto replaced = cb->Compile(two);
  ASSERT_TRUE(replaced.ok()) << replaced.status();
  EXPECT_EQ(replaced->version(), 2);
  EXPECT_EQ(RedisGet("kiln:model:name:mlp")->substr(64), " 2");
  // B learnt that from the name's mapping: it never loaded A's model.
  EXPECT_EQ(Count(ReadFile(LogPath("b")), "from the model store"), 0) << ReadFile(LogPath("b"));
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  auto metadata = ca->ModelMetadata("mlp");
  ASSERT_TRUE(metadata.ok()) << metadata.status();
  EXPECT_EQ(metadata->inputs(0).shape(0), 2);
}

// The check before a compile reads the name's mapping only: with the record
// it names gone from Redis the name is still taken, and the same model
// compiled on another replica takes the cluster's version.
TEST_F(ModelStoreTest, CompileChecksTheNameWithoutTheRecord) {
  auto a = Replica("a"), b = Replica("b");
  auto ca = Connect(*a), cb = Connect(*b);
  ASSERT_NE(ca, nullptr);
  ASSERT_NE(cb, nullptr);
  // The statuses are printed: this first compile failed once in a fresh-clone
  // CI (1 of many runs) without saying why.
  auto first_four = ca->Compile(Mlp("mlp", 4));
  ASSERT_TRUE(first_four.ok()) << first_four.status();
  kiln::v1::CompileModelRequest two = Mlp("mlp", 2);
  two.set_replace(true);
  auto then_two = ca->Compile(two);
  ASSERT_TRUE(then_two.ok()) << then_two.status();
  const std::string mapping = RedisGet("kiln:model:name:mlp").value_or("");
  ASSERT_EQ(mapping.substr(64), " 2");
  {
    engine::RedisConnection redis({"127.0.0.1", redis_.port(), 0}, {});
    auto deleted = redis.Delete("kiln:model:record:" + mapping.substr(0, 64));
    ASSERT_TRUE(deleted.ok() && *deleted);
  }
  auto clash = cb->Compile(Mlp("mlp", 3));
  EXPECT_EQ(clash.status().code(), absl::StatusCode::kAlreadyExists) << clash.status();
  EXPECT_NE(clash.status().message().find("version 3"), std::string::npos) << clash.status();
  // The same model as the store's: version 2 on B too, without `replace`.
  auto same = cb->Compile(Mlp("mlp", 2));
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ(same->version(), 2);
  EXPECT_EQ(RedisGet("kiln:model:name:mlp"), mapping);
  // ... and the next one replaces it as the cluster's version 3.
  kiln::v1::CompileModelRequest three = Mlp("mlp", 3);
  three.set_replace(true);
  auto replaced = cb->Compile(three);
  ASSERT_TRUE(replaced.ok()) << replaced.status();
  EXPECT_EQ(replaced->version(), 3);
  EXPECT_EQ(RedisGet("kiln:model:name:mlp")->substr(64), " 3");
  EXPECT_EQ(Count(ReadFile(LogPath("b")), "from the model store"), 0) << ReadFile(LogPath("b"));
}

// A repository model keeping its weights as ONNX external data is published
// with them read in: a replica without the repository serves it.
TEST_F(ModelStoreTest, RepositoryModelWithExternalDataIsServedByAReplicaWithoutIt) {
  const std::string repo = dir_ + "/repo";
  ASSERT_EQ(std::system(("mkdir -p " + repo + "/affine/1").c_str()), 0);
  std::ofstream(repo + "/affine/1/model.onnx") << testing::ExternalDataModel("weights.bin");
  std::ofstream(repo + "/affine/1/weights.bin") << testing::ExternalDataWeights();
  auto a = Replica("a", {"--model-repository=" + repo});
  auto b = Replica("b");
  auto cb = Connect(*b);
  ASSERT_NE(cb, nullptr);
  std::optional<std::string> mapping;
  for (int i = 0; i < 100 && !mapping; ++i) {
    mapping = RedisGet("kiln:model:name:affine");
    if (!mapping) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(mapping.has_value()) << ReadFile(LogPath("a"));
  // The record is self-contained: no tensor keeps its data outside.
  std::optional<std::string> record = RedisGet("kiln:model:record:" + mapping->substr(0, 64));
  ASSERT_TRUE(record.has_value());
  kiln::v1::CompileModelRequest stored;
  ASSERT_TRUE(stored.ParseFromString(*record));
  onnx::ModelProto model;
  ASSERT_TRUE(model.ParseFromString(stored.onnx_model()));
  ASSERT_EQ(model.graph().initializer_size(), 2);
  for (const onnx::TensorProto& t : model.graph().initializer()) {
    EXPECT_NE(t.data_location(), onnx::TensorProto::EXTERNAL) << t.name();
    EXPECT_EQ(t.external_data_size(), 0) << t.name();
  }

  client::NpyArray x;
  x.datatype = "FP32";
  x.shape = {2, 3};
  const std::vector<float> xs = {1, 0, -1, 2, 1, 0};
  x.data.assign(reinterpret_cast<const char*>(xs.data()), 24);
  auto r = cb->Infer("affine", {{"x", x}}, false);
  ASSERT_TRUE(r.ok()) << r.status() << "\n" << ReadFile(LogPath("b"));
  ASSERT_EQ(r->outputs.size(), 1u);
  std::vector<float> y(4);
  ASSERT_EQ(r->outputs[0].second.data.size(), 16u);
  std::memcpy(y.data(), r->outputs[0].second.data.data(), 16);
  // [1 0 -1] @ [[1 2] [3 4] [5 6]] = [-4 -4]; [2 1 0] @ ... = [5 8]; + [0.5 -1].
  EXPECT_EQ(y, (std::vector<float>{-3.5f, -5.0f, 5.5f, 7.0f}));
}

// A repository serving versions 1 and 3 (version_policy all, compiled at
// once) maps the name to version 3 in the store, what a request naming no
// version gets, however the compiles end: version 1 is the larger model, so
// it usually ends last.
TEST_F(ModelStoreTest, RepositoryVersionsPublishTheHighest) {
  const std::string repo = dir_ + "/repo";
  ASSERT_EQ(std::system(("mkdir -p " + repo + "/m/1 " + repo + "/m/3").c_str()), 0);
  std::ofstream(repo + "/m/config.pbtxt") << "name: \"m\"\nversion_policy: { all: {} }\n";
  std::ofstream(repo + "/m/1/model.pbtxt") << ReadFile("examples/mlp.pbtxt");
  std::ofstream(repo + "/m/3/model.onnx") << testing::ExternalDataModel("weights.bin");
  std::ofstream(repo + "/m/3/weights.bin") << testing::ExternalDataWeights();
  auto a = Replica("a", {"--model-repository=" + repo});
  auto ca = Connect(*a);
  ASSERT_NE(ca, nullptr);
  std::string log;
  for (int i = 0; i < 200; ++i) {
    log = ReadFile(LogPath("a"));
    if (Count(log, "from the repository") == 2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(Count(log, "loaded version 1 from the repository"), 1) << log;
  ASSERT_EQ(Count(log, "loaded version 3 from the repository"), 1) << log;
  std::optional<std::string> mapping = RedisGet("kiln:model:name:m");
  ASSERT_TRUE(mapping.has_value());
  EXPECT_EQ(mapping->substr(64), " 3");
  // Another replica serves version 3: the affine model's [2, 3] input.
  auto b = Replica("b");
  auto cb = Connect(*b);
  ASSERT_NE(cb, nullptr);
  auto metadata = cb->ModelMetadata("m");
  ASSERT_TRUE(metadata.ok()) << metadata.status();
  ASSERT_EQ(metadata->versions_size(), 1);
  EXPECT_EQ(metadata->versions(0), "3");
  ASSERT_EQ(metadata->inputs(0).shape_size(), 2);
  EXPECT_EQ(metadata->inputs(0).shape(1), 3);
}

TEST_F(ModelStoreTest, ModelOverTheBoundIsNotStoredAndLoggedOnce) {
  // The bound is in MiB: a 1 MiB bound and a graph carrying an unused
  // 1.5 MiB constant.
  auto a = Replica("a", {"--model-store-max-mb=1"});
  auto ca = Connect(*a);
  ASSERT_NE(ca, nullptr);
  for (const char* name : {"big1", "big2"}) {
    kiln::v1::CompileModelRequest r = Mlp(name);
    kiln::v1::Tensor* pad = r.mutable_graph()->add_constants();
    pad->set_name("pad");
    pad->set_dtype(kiln::v1::FLOAT32);
    pad->add_dims(384 << 10);
    pad->set_raw_data(std::string(size_t{1536} << 10, '\0'));
    auto compiled = ca->Compile(r);
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    EXPECT_FALSE(RedisGet(std::string("kiln:model:name:") + name).has_value());
  }
  ASSERT_TRUE(ca->Compile(Mlp("small")).ok());
  EXPECT_TRUE(RedisGet("kiln:model:name:small").has_value());
  EXPECT_EQ(Count(ReadFile(LogPath("a")), "over the model store's bound"), 1);
}

}  // namespace
}  // namespace kiln
