// WriteFileDurably replaces a file whole and leaves no temporary behind, or
// fails naming the path with the old file untouched; FileLock excludes a
// second holder until the first lets go.
#include "common/durable_file.h"

#include <dirent.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace kiln {
namespace {

class DurableFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/kiln_durable_file_testXXXXXX";
    dir_ = ::mkdtemp(tmpl);
  }
  void TearDown() override { EXPECT_EQ(std::system(("rm -rf " + dir_).c_str()), 0); }

  static std::string Read(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  std::vector<std::string> Names() const {
    std::vector<std::string> names;
    DIR* d = ::opendir(dir_.c_str());
    while (dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name != "." && name != "..") names.push_back(name);
    }
    ::closedir(d);
    return names;
  }

  std::string dir_;
};

TEST_F(DurableFileTest, ReplacesTheWholeFileAndLeavesNoTemporary) {
  const std::string path = dir_ + "/state.tsv";
  ASSERT_TRUE(WriteFileDurably(path, "a much longer first version\n").ok());
  ASSERT_TRUE(WriteFileDurably(path, "second\n").ok());
  EXPECT_EQ(Read(path), "second\n");
  EXPECT_EQ(Names(), std::vector<std::string>{"state.tsv"});
}

TEST_F(DurableFileTest, AFailedWriteNamesThePathAndKeepsTheOldFile) {
  const std::string path = dir_ + "/missing_dir/state.tsv";
  absl::Status s = WriteFileDurably(path, "x");
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_NE(s.message().find(path), std::string::npos) << s;
  EXPECT_NE(s.message().find("No such file"), std::string::npos) << s;
}

TEST_F(DurableFileTest, ASecondLockWaitsForTheFirst) {
  const std::string lock_path = dir_ + "/state.lock";
  std::atomic<bool> second_held{false};
  std::thread second;
  {
    FileLock first(lock_path);
    ASSERT_TRUE(first.held());
    second = std::thread([&] {
      FileLock lock(lock_path);
      second_held = lock.held();
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_FALSE(second_held) << "the second lock was granted while the first was held";
  }
  second.join();
  EXPECT_TRUE(second_held);
}

}  // namespace
}  // namespace kiln
