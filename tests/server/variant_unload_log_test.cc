#include "server/variant_unload_log.h"

#include "gtest/gtest.h"

namespace kiln::server {
namespace {

TEST(VariantUnloadLogTest, TheLineNamesTheShapeTheModelWhatItMadeRoomForAndTheFlag) {
  engine::VariantUnloaded unloaded{"m", "x=[3,24]", 4200, "shape x=[4,24] of model 'm'"};
  EXPECT_EQ(VariantUnloadLogLine(unloaded, int64_t{64} << 20),
            "unloaded shape x=[3,24] of model 'm' (4.1 KiB, unused longest) to "
            "make room for shape x=[4,24] of model 'm' (--max-loaded-mb: 64.0 MiB)");
}

}  // namespace
}  // namespace kiln::server
