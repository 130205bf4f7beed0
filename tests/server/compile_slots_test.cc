// The bound on concurrent compiles: a call waits for a free slot until its
// deadline, a released slot lets a waiter in, and past the queue bound a
// call is refused at once, naming the flag.
#include "server/compile_slots.h"

#include <optional>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kiln::server {
namespace {

using ::testing::HasSubstr;

TEST(CompileSlotsTest, WaitsForAFreeSlotUntilItsDeadline) {
  CompileSlots slots(/*slots=*/1, /*max_waiting=*/4);
  absl::StatusOr<CompileSlots::Slot> held = slots.Acquire(absl::InfiniteFuture());
  ASSERT_TRUE(held.ok());
  absl::StatusOr<CompileSlots::Slot> late = slots.Acquire(absl::Now() + absl::Milliseconds(20));
  EXPECT_EQ(late.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(late.status().message()), HasSubstr("--max-concurrent-compiles"));
}

TEST(CompileSlotsTest, AReleasedSlotLetsTheWaiterIn) {
  CompileSlots slots(1, 4);
  std::optional<absl::StatusOr<CompileSlots::Slot>> held(slots.Acquire(absl::InfiniteFuture()));
  ASSERT_TRUE(held->ok());
  bool got = false;
  std::thread waiter([&] { got = slots.Acquire(absl::InfiniteFuture()).ok(); });
  while (slots.waiting() == 0) std::this_thread::yield();
  held.reset();  // frees the slot
  waiter.join();
  EXPECT_TRUE(got);
}

TEST(CompileSlotsTest, PastTheQueueBoundACallIsRefusedAtOnce) {
  CompileSlots slots(1, /*max_waiting=*/1);
  std::optional<absl::StatusOr<CompileSlots::Slot>> held(slots.Acquire(absl::InfiniteFuture()));
  ASSERT_TRUE(held->ok());
  std::thread waiter([&] { (void)slots.Acquire(absl::InfiniteFuture()); });
  while (slots.waiting() == 0) std::this_thread::yield();
  absl::StatusOr<CompileSlots::Slot> refused = slots.Acquire(absl::InfiniteFuture());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("--max-concurrent-compiles"));
  held.reset();
  waiter.join();
}

}  // namespace
}  // namespace kiln::server
