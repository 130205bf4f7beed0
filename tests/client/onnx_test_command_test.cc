// Unsupported ONNX cases are tallied by why: the server's reasons (as it
// words them today) map to their category.
#include "client/onnx_test_command.h"

#include "gtest/gtest.h"

namespace kiln::client {
namespace {

TEST(OnnxTestCommandTest, ServerReasonsMapToTheirCategories) {
  EXPECT_EQ(UnsupportedCategory("unsupported ONNX operator Loop (node '', opset 11)"),
            "operator");
  EXPECT_EQ(UnsupportedCategory("node 'n': operator domain 'com.microsoft' is not supported"),
            "operator");
  EXPECT_EQ(UnsupportedCategory("input 'x': element type STRING is not supported (strings and "
                                "complex numbers are not; every numeric type and BOOL are)"),
            "dtype");
  EXPECT_EQ(UnsupportedCategory("ONNX opset 18 is not supported (7 to 17 are)"), "opset");
  EXPECT_EQ(UnsupportedCategory("node '' (Range): input 0 must be a constant or computed from "
                                "integer model inputs (its value decides a shape)"),
            "value-dependent shape");
  EXPECT_EQ(UnsupportedCategory("node '' (Resize): scales must be a float constant"),
            "value-dependent shape");
  EXPECT_EQ(UnsupportedCategory("node '' (Dropout, opset 13): training mode (random dropping) "
                                "is not supported; inference only"),
            "training");
  EXPECT_EQ(UnsupportedCategory("input 'x' dim 0 is 0: zero-size tensors are not supported "
                                "(dims must be at least 1)"),
            "zero-size tensor");
  EXPECT_EQ(UnsupportedCategory("node '' (Pad): mode 'reflect'"), "attribute");
}

}  // namespace
}  // namespace kiln::client
