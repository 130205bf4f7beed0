// ModelStore against a real redis-server, with hooks standing in for the
// server: what an unload writes to Redis, and what a replica's view does
// with a tombstone. (Replicas as processes: tests/server/model_store_test.cc.)
#include "engine/model_store.h"

#include <set>
#include <string>

#include "gtest/gtest.h"
#include "tests/test_util/redis_server.h"

namespace kiln::engine {
namespace {

using ::kiln::testing::RedisServer;

// One replica's served names, as the server's hooks would keep them.
struct FakeReplica {
  std::set<std::string> served;
  int loads = 0;
  ModelStoreHooks Hooks() {
    ModelStoreHooks h;
    h.served = [this](const std::string& n) { return served.count(n) > 0; };
    h.load = [this](const std::string& n, int64_t, const std::string&) {
      ++loads;
      served.insert(n);
      return absl::OkStatus();
    };
    h.unload = [this](const std::string& n) { served.erase(n); };
    return h;
  }
};

class ModelStoreTest : public ::testing::Test {
 protected:
  std::unique_ptr<ModelStore> Store() {
    ModelStoreOptions o;
    o.url = redis_.url();
    o.view_ttl = absl::Milliseconds(100);
    auto s = ModelStore::Create(o);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *std::move(s) : nullptr;
  }
  std::string Value(const std::string& name) {
    return redis_.Cli("GET kiln:model:name:" + name);  // "\n" for no key
  }
  RedisServer redis_;
};

TEST_F(ModelStoreTest, UnloadOfANameTheStoreNeverHadWritesNoTombstone) {
  ASSERT_TRUE(redis_.running());
  auto store = Store();
  ASSERT_NE(store, nullptr);
  auto removed = store->Remove("never-stored");
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_FALSE(*removed);
  EXPECT_EQ(redis_.Cli("EXISTS kiln:model:name:never-stored"), "0\n");
  // A stored name gets one, and unloading it again keeps it (and says so).
  ASSERT_TRUE(store->Publish("m", 1, "record").ok());
  removed = store->Remove("m");
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_TRUE(*removed);
  EXPECT_EQ(Value("m"), "-\n");
  removed = store->Remove("m");
  ASSERT_TRUE(removed.ok());
  EXPECT_FALSE(*removed);
  EXPECT_EQ(Value("m"), "-\n");
}

// Redis restarted empty: a replica that served the name from the store
// still tells the others (who serve it too) that it is unloaded; one that
// never served it has nothing to tell.
TEST_F(ModelStoreTest, UnloadAfterTheStoreLostTheNameTombstonesOnlyWhatThisReplicaServed) {
  auto a = Store(), b = Store();
  ASSERT_TRUE(a && b);
  FakeReplica ra, rb;
  ASSERT_TRUE(a->Publish("m", 1, "record").ok());
  ra.served.insert("m");
  ASSERT_TRUE(b->Resolve("m", rb.Hooks()).ok());
  ASSERT_EQ(rb.served.count("m"), 1u);
  ASSERT_EQ(redis_.Cli("FLUSHALL"), "OK\n");
  auto c = Store();
  auto unknown = c->Remove("m");
  ASSERT_TRUE(unknown.ok()) << unknown.status();
  EXPECT_FALSE(*unknown);
  EXPECT_EQ(redis_.Cli("EXISTS kiln:model:name:m"), "0\n");
  auto removed = a->Remove("m");
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_TRUE(*removed);
  EXPECT_EQ(Value("m"), "-\n");
  absl::SleepFor(absl::Milliseconds(150));  // past b's view
  ASSERT_TRUE(b->Resolve("m", rb.Hooks()).ok());
  EXPECT_EQ(rb.served.count("m"), 0u);
  EXPECT_EQ(b->stats().unloads, 1);
}

// A request's load from the store whose mapping read came before this
// replica's own unload can finish after the local unload: the name is served
// again here. The replica's next request for it finds the tombstone and drops
// that copy instead of taking the tombstone for someone else's business.
TEST_F(ModelStoreTest, LoadThatOvertookTheLocalUnloadIsDroppedAtTheNextRequest) {
  auto a = Store(), b = Store();
  ASSERT_TRUE(a && b);
  FakeReplica rb;
  ASSERT_TRUE(a->Publish("m", 1, "record").ok());
  ASSERT_TRUE(b->Resolve("m", rb.Hooks()).ok());  // the overtaking load
  ASSERT_EQ(rb.loads, 1);
  // B's UnloadEverywhere: its local unload ran before that load ended, so the
  // copy is still there when it removes the name from the store.
  auto removed = b->Remove("m");
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_TRUE(*removed);
  ASSERT_TRUE(b->Resolve("m", rb.Hooks()).ok());
  EXPECT_EQ(rb.served.count("m"), 0u);
  EXPECT_EQ(b->stats().unloads, 1);
  // Nothing served, nothing counted, when the unload was not overtaken.
  ASSERT_TRUE(a->Publish("n", 1, "record n").ok());
  ASSERT_TRUE(b->Resolve("n", rb.Hooks()).ok());
  rb.served.erase("n");
  ASSERT_TRUE(b->Remove("n").ok());
  ASSERT_TRUE(b->Resolve("n", rb.Hooks()).ok());
  EXPECT_EQ(b->stats().unloads, 1);
}

}  // namespace
}  // namespace kiln::engine
