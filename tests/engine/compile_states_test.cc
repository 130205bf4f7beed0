#include "engine/compile_states.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kiln::engine {
namespace {

using ::testing::HasSubstr;

TEST(CompileStatesTest, ANameNeverCompiledIsNotFound) {
  CompileStates states;
  EXPECT_EQ(states.WhyNotServed("m").code(), absl::StatusCode::kNotFound);
}

TEST(CompileStatesTest, ANameIsUnavailableWhileAnyCompileOfItRuns) {
  CompileStates states;
  {
    CompileStates::Mark first = states.Begin("m");
    {
      CompileStates::Mark second = states.Begin("m");
      EXPECT_EQ(states.WhyNotServed("m").code(), absl::StatusCode::kUnavailable);
      EXPECT_EQ(states.WhyNotServed("other").code(), absl::StatusCode::kNotFound);
    }
    EXPECT_EQ(states.WhyNotServed("m").code(), absl::StatusCode::kUnavailable);
    CompileStates::Mark moved = std::move(first);
    EXPECT_EQ(states.WhyNotServed("m").code(), absl::StatusCode::kUnavailable);
  }
  EXPECT_EQ(states.WhyNotServed("m").code(), absl::StatusCode::kNotFound);
}

TEST(CompileStatesTest, AFailureIsFailedPreconditionWithItsDiagnosticUntilForgotten) {
  CompileStates states;
  {
    CompileStates::Mark compiling = states.Begin("m");
    states.Failed("m", absl::UnimplementedError("unknown op 'frobnicate'"));
    // A compile still running wins: the name may yet load.
    EXPECT_EQ(states.WhyNotServed("m").code(), absl::StatusCode::kUnavailable);
  }
  absl::Status why = states.WhyNotServed("m");
  EXPECT_EQ(why.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(why.message()), HasSubstr("UNIMPLEMENTED"));
  EXPECT_THAT(std::string(why.message()), HasSubstr("frobnicate"));
  states.Forget("m");
  EXPECT_EQ(states.WhyNotServed("m").code(), absl::StatusCode::kNotFound);
}

TEST(CompileStatesTest, FailuresAreBoundedOldestForgottenFirst) {
  CompileStates states;
  for (int i = 0; i <= CompileStates::kMaxFailures; ++i) {
    states.Failed("m" + std::to_string(i), absl::InvalidArgumentError("bad"));
  }
  states.Failed("m1", absl::InvalidArgumentError("bad again"));  // m1 is now the newest
  states.Failed("extra", absl::InvalidArgumentError("bad"));
  EXPECT_EQ(states.WhyNotServed("m0").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(states.WhyNotServed("m2").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(states.WhyNotServed("m1").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(states.WhyNotServed("m3").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(states.WhyNotServed("extra").code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace kiln::engine
