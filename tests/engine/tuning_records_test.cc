// Tuning records: what one process writes another reads back, field by
// field; a record made on another CPU is kept but never used; a damaged line
// is skipped, not trusted.
#include "engine/tuning_records.h"

#include <stdlib.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "gtest/gtest.h"

namespace kiln::engine {
namespace {

class TuningRecordsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/kiln_tuning_records_testXXXXXX";
    dir_ = ::mkdtemp(tmpl);
  }
  void TearDown() override { EXPECT_EQ(std::system(("rm -rf " + dir_).c_str()), 0); }

  static TuningRecord Record(const std::string& canonical, const TuningCpu& cpu) {
    TuningRecord r;
    r.structure = TuningStructureKey(canonical);
    r.cpu = cpu;
    r.schedule_override = "layout=lanes tile=6x16 kblock=0 parts=1";
    r.kernel = "conv2d_relu_3";
    r.default_schedule = "gemm 4x48 M=64 N=3136 K=576 batch=1";
    r.tuned_schedule = "gemm 6x16 M=3136 N=64 K=576 batch=1 (channel lanes)";
    r.default_us = 812.5;
    r.tuned_us = 650;
    r.candidates = 7;
    return r;
  }

  std::string dir_;
  const TuningCpu host_{"skylake-avx512", "Intel(R) Xeon(R) Processor", "+avx512f,+fma"};
};

TEST_F(TuningRecordsTest, RoundTripsThroughTheDirectory) {
  {
    TuningRecords records(dir_, host_);
    ASSERT_TRUE(records.Put(Record("p0:float32[1,64];n0=conv2d(p0,)", host_)).ok());
  }
  TuningRecords again(dir_, host_);
  std::optional<lower::ScheduleOverride> o = again.Lookup("p0:float32[1,64];n0=conv2d(p0,)");
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->ToString(), "layout=lanes tile=6x16 kblock=0 parts=1");
  EXPECT_EQ(o->mr, 6);
  EXPECT_EQ(again.uses(), 1);
  std::optional<TuningRecord> r = again.Find(TuningStructureKey("p0:float32[1,64];n0=conv2d(p0,)"));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->kernel, "conv2d_relu_3");
  EXPECT_EQ(r->cpu, host_);
  EXPECT_EQ(r->tuned_schedule, "gemm 6x16 M=3136 N=64 K=576 batch=1 (channel lanes)");
  EXPECT_DOUBLE_EQ(r->default_us, 812.5);
  EXPECT_DOUBLE_EQ(r->tuned_us, 650);
  EXPECT_DOUBLE_EQ(r->Gain(), 1.25);
  EXPECT_EQ(r->candidates, 7);
  // Another structure has no record.
  EXPECT_FALSE(again.Lookup("p0:float32[1,65];n0=conv2d(p0,)").has_value());
}

// Two processes sharing a cache directory each hold the records they read at
// start; the second one's write must not drop the first one's record.
TEST_F(TuningRecordsTest, AWriterKeepsWhatAnotherWroteSinceItRead) {
  TuningRecords a(dir_, host_);
  TuningRecords b(dir_, host_);
  ASSERT_TRUE(a.Put(Record("kernel_a", host_)).ok());
  ASSERT_TRUE(b.Put(Record("kernel_b", host_)).ok());
  TuningRecords reader(dir_, host_);
  EXPECT_TRUE(reader.Lookup("kernel_a").has_value());
  EXPECT_TRUE(reader.Lookup("kernel_b").has_value());
  // The writer also learned the other's record.
  EXPECT_TRUE(b.Lookup("kernel_a").has_value());
  // A record both hold: the newest write wins in the file.
  TuningRecord newer = Record("kernel_b", host_);
  newer.tuned_us = 500;
  ASSERT_TRUE(a.Put(newer).ok());
  EXPECT_DOUBLE_EQ(TuningRecords(dir_, host_).Find(newer.structure)->tuned_us, 500);
}

// Concurrent read-modify-write cycles from two holders lose nothing.
TEST_F(TuningRecordsTest, ConcurrentWritersLoseNoRecord) {
  constexpr int kEach = 25;
  TuningRecords a(dir_, host_);
  TuningRecords b(dir_, host_);
  auto put = [&](TuningRecords* records, const std::string& prefix) {
    for (int i = 0; i < kEach; ++i) {
      EXPECT_TRUE(records->Put(Record(prefix + std::to_string(i), host_)).ok());
    }
  };
  std::thread ta(put, &a, "a");
  std::thread tb(put, &b, "b");
  ta.join();
  tb.join();
  TuningRecords reader(dir_, host_);
  EXPECT_EQ(reader.All().size(), 2u * kEach);
  EXPECT_EQ(reader.skipped_lines(), 0);
}

TEST_F(TuningRecordsTest, RecordsOfAnotherCpuAreKeptButNeverUsed) {
  const std::string canonical = "p0:float32[8,8];n0=dense(p0,)";
  for (const TuningCpu& other : {TuningCpu{"forged-cpu", host_.model, host_.features},
                                 TuningCpu{host_.cpu, "AMD EPYC (forged)", host_.features},
                                 TuningCpu{host_.cpu, host_.model, "+avx2,+fma"}}) {
    {
      TuningRecords writer(dir_, other);
      ASSERT_TRUE(writer.Put(Record(canonical, other)).ok());
    }
    TuningRecords here(dir_, host_);
    EXPECT_FALSE(here.Lookup(canonical).has_value()) << other.cpu << " " << other.model;
    EXPECT_FALSE(here.Find(TuningStructureKey(canonical)).has_value());
    EXPECT_EQ(here.uses(), 0);
  }
  // All three stayed in the file, beside any of this CPU's.
  TuningRecords here(dir_, host_);
  ASSERT_TRUE(here.Put(Record(canonical, host_)).ok());
  TuningRecords reread(dir_, host_);
  EXPECT_EQ(reread.All().size(), 4u);
  EXPECT_TRUE(reread.Lookup(canonical).has_value());
}

TEST_F(TuningRecordsTest, DamagedLinesAreSkipped) {
  {
    TuningRecords records(dir_, host_);
    ASSERT_TRUE(records.Put(Record("a", host_)).ok());
    ASSERT_TRUE(records.Put(Record("b", host_)).ok());
  }
  const std::string path = dir_ + "/tuning_records.tsv";
  {
    std::ofstream out(path, std::ios::app);
    out << "not a record\n";
    TuningRecord bad = Record("c", host_);
    out << bad.structure << "\t" << host_.cpu << "\t" << host_.model << "\t" << host_.features
        << "\ttile=7x13\tk\td\tt\t1\t1\t1\n";  // an override no ToString wrote
  }
  TuningRecords records(dir_, host_);
  EXPECT_EQ(records.skipped_lines(), 2);
  EXPECT_EQ(records.All().size(), 2u);
  EXPECT_TRUE(records.Lookup("a").has_value());
  EXPECT_FALSE(records.Lookup("c").has_value());
}

}  // namespace
}  // namespace kiln::engine
