// The loaded-model budget on its own: charges add up and end with their
// owner, a charge that does not fit unloads in the owner's order until it
// does, and what cannot fit is ResourceExhausted naming --max-loaded-mb,
// marked as the model's fault only when it could never fit.
#include "engine/memory_budget.h"

#include <atomic>
#include <deque>
#include <string>
#include <thread>
#include <vector>

#include "compiler/ir/verifier.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kiln::engine {
namespace {

using ::testing::HasSubstr;

// Charges the test holds as "loaded", unloaded oldest first.
struct Loaded {
  std::deque<std::pair<std::string, MemoryBudget::Charge>> charges;
  std::vector<std::string> unloaded;
  std::string last_for;
  bool Unload(absl::string_view for_what) {
    if (charges.empty()) return false;
    last_for = std::string(for_what);
    unloaded.push_back(charges.front().first);
    charges.pop_front();  // the charge ends here
    return true;
  }
  MemoryBudget::Unload AsUnload() {
    return [this](absl::string_view for_what) { return Unload(for_what); };
  }
};

TEST(MemoryBudgetTest, ChargesAddUpAndEndWithTheirOwner) {
  MemoryBudget budget(100, nullptr);
  absl::StatusOr<MemoryBudget::Charge> a = budget.Reserve(30, "a");
  ASSERT_TRUE(a.ok()) << a.status();
  {
    absl::StatusOr<MemoryBudget::Charge> b = budget.Reserve(50, "b");
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(budget.used_bytes(), 80);
    MemoryBudget::Charge moved = *std::move(b);
    EXPECT_EQ(moved.bytes(), 50);
    EXPECT_EQ(budget.used_bytes(), 80);  // moving is not releasing
  }
  EXPECT_EQ(budget.used_bytes(), 30);
  ASSERT_TRUE(budget.Grow(*a, 70, "a").ok());
  EXPECT_EQ(a->bytes(), 100);
  a->Release();
  EXPECT_EQ(budget.used_bytes(), 0);
}

TEST(MemoryBudgetTest, AChargeThatDoesNotFitUnloadsLeastRecentlyUsedFirstUntilItFits) {
  Loaded loaded;
  MemoryBudget budget(100, loaded.AsUnload());
  for (const char* name : {"oldest", "older", "newer"}) {
    absl::StatusOr<MemoryBudget::Charge> c = budget.Reserve(30, name);
    ASSERT_TRUE(c.ok()) << c.status();
    loaded.charges.emplace_back(name, *std::move(c));
  }
  absl::StatusOr<MemoryBudget::Charge> big = budget.Reserve(60, "big");
  ASSERT_TRUE(big.ok()) << big.status();
  EXPECT_EQ(loaded.unloaded, (std::vector<std::string>{"oldest", "older"}));
  EXPECT_EQ(loaded.last_for, "big");
  EXPECT_EQ(budget.unloads(), 2);
  EXPECT_EQ(budget.used_bytes(), 90);  // "newer" and "big"
}

TEST(MemoryBudgetTest, RefusedNamingTheFlagWhenNothingMoreCanBeUnloaded) {
  Loaded loaded;
  MemoryBudget budget(int64_t{64} << 20, loaded.AsUnload());
  absl::StatusOr<MemoryBudget::Charge> pinned = budget.Reserve(int64_t{40} << 20, "pinned");
  ASSERT_TRUE(pinned.ok());
  runtime::ModelFootprint f;
  f.constant_bytes = int64_t{20} << 20;
  f.arena_bytes = int64_t{10} << 20;
  f.largest_value_bytes = int64_t{8} << 20;
  absl::StatusOr<MemoryBudget::Charge> c = budget.Admit(f, "model 'm'");
  EXPECT_EQ(c.status().code(), absl::StatusCode::kResourceExhausted);
  const std::string message(c.status().message());
  EXPECT_THAT(message, HasSubstr("model 'm' (weights 20.0 MiB, intermediates 10.0 MiB)"));
  EXPECT_THAT(message, HasSubstr("needs 30.0 MiB"));
  EXPECT_THAT(message, HasSubstr("40.0 MiB of the server's 64.0 MiB budget"));
  EXPECT_THAT(message, HasSubstr("--max-loaded-mb"));
  // Not the model's fault: it would load on a server with less loaded.
  EXPECT_FALSE(c.status().GetPayload(kLimitPayload).has_value());
  EXPECT_EQ(budget.used_bytes(), int64_t{40} << 20);  // nothing charged
}

TEST(MemoryBudgetTest, WhatCanNeverFitIsRefusedWithoutUnloadingAnything) {
  Loaded loaded;
  MemoryBudget budget(int64_t{64} << 20, loaded.AsUnload());
  absl::StatusOr<MemoryBudget::Charge> other = budget.Reserve(1, "other");
  ASSERT_TRUE(other.ok());
  loaded.charges.emplace_back("other", *std::move(other));

  runtime::ModelFootprint huge;  // a 128 GiB output, nothing held
  huge.largest_value_bytes = int64_t{128} << 30;
  huge.largest_value = "value 'y' (float32[1048576,32768])";
  absl::Status s = budget.Admit(huge, "model 'huge'").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("value 'y' (float32[1048576,32768]) alone needs 128.0 GiB, more than "
                        "the server's whole budget of 64.0 MiB"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("--max-loaded-mb"));
  EXPECT_EQ(s.GetPayload(kLimitPayload), absl::Cord(kMaxLoadedLimitName));

  runtime::ModelFootprint heavy;  // each value fits, all of them do not
  heavy.constant_bytes = int64_t{65} << 20;
  heavy.largest_value_bytes = int64_t{1} << 20;
  s = budget.Admit(heavy, "model 'heavy'").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(s.message()), HasSubstr("whole budget of 64.0 MiB"));
  EXPECT_TRUE(s.GetPayload(kLimitPayload).has_value());
  EXPECT_TRUE(loaded.unloaded.empty());
}

TEST(MemoryBudgetTest, AGrowThatFailsLeavesTheChargeAsItWas) {
  MemoryBudget budget(100, nullptr);
  absl::StatusOr<MemoryBudget::Charge> a = budget.Reserve(60, "a");
  absl::StatusOr<MemoryBudget::Charge> b = budget.Reserve(30, "b");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(budget.Grow(*a, 20, "a's code").code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(a->bytes(), 60);
  EXPECT_EQ(budget.used_bytes(), 90);
}

TEST(MemoryBudgetTest, AChargedObjectReleasesItsChargeWithItsLastOwner) {
  MemoryBudget budget(100, nullptr);
  absl::StatusOr<MemoryBudget::Charge> c = budget.Reserve(40, "x");
  ASSERT_TRUE(c.ok());
  std::shared_ptr<int> first = ChargedTo(std::make_unique<int>(7), *std::move(c));
  std::shared_ptr<int> second = first;  // a call still running on it
  first.reset();
  EXPECT_EQ(budget.used_bytes(), 40);
  EXPECT_EQ(*second, 7);
  second.reset();
  EXPECT_EQ(budget.used_bytes(), 0);
}

TEST(MemoryBudgetTest, ConcurrentChargesNeverExceedTheBudget) {
  MemoryBudget budget(1000, nullptr);
  std::atomic<int64_t> admitted{0};
  std::atomic<bool> over{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) {
        absl::StatusOr<MemoryBudget::Charge> c = budget.Reserve(300, "x");
        if (!c.ok()) continue;
        ++admitted;
        if (budget.used_bytes() > 1000) over = true;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_FALSE(over.load());
  EXPECT_GT(admitted.load(), 0);
  EXPECT_EQ(budget.used_bytes(), 0);
}

}  // namespace
}  // namespace kiln::engine
