#include "client/element_type.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kiln::client {
namespace {

TEST(ElementTypeTest, KnowsEveryKServeDatatypeWithItsSizeAndNumPyDescr) {
  struct Case {
    const char* datatype;
    const char* descr;
    size_t size;
  };
  const Case cases[] = {{"BOOL", "|b1", 1},   {"UINT8", "|u1", 1},  {"UINT16", "<u2", 2},
                        {"UINT32", "<u4", 4}, {"UINT64", "<u8", 8}, {"INT8", "|i1", 1},
                        {"INT16", "<i2", 2},  {"INT32", "<i4", 4},  {"INT64", "<i8", 8},
                        {"FP16", "<f2", 2},   {"FP32", "<f4", 4},   {"FP64", "<f8", 8},
                        {"BF16", "", 2}};
  for (const Case& c : cases) {
    const ElementType* t = FindElementType(c.datatype);
    ASSERT_NE(t, nullptr) << c.datatype;
    EXPECT_EQ(t->size, c.size) << c.datatype;
    EXPECT_EQ(t->npy_descr, c.descr) << c.datatype;
    if (*c.descr != '\0') EXPECT_EQ(FindNpyElementType(c.descr), t) << c.descr;
  }
  EXPECT_EQ(FindElementType("BYTES"), nullptr);
  EXPECT_EQ(FindNpyElementType(">f4"), nullptr);
  EXPECT_EQ(FindNpyElementType("<c8"), nullptr);
}

TEST(ElementTypeTest, FormatsElementsOfEachKind) {
  const ElementType& fp16 = *FindElementType("FP16");
  EXPECT_EQ(FormatElement(fp16, std::string("\x00\xc1", 2), 0), "-2.5");
  EXPECT_EQ(ElementAsDouble(fp16, std::string("\x00\x7c", 2), 0), INFINITY);
  const ElementType& bf16 = *FindElementType("BF16");
  EXPECT_EQ(FormatElement(bf16, "\x80\x3f\x40\xc0", 1), "-3");
  EXPECT_EQ(FormatElement(*FindElementType("INT8"), "\x01\xff", 1), "-1");
  EXPECT_EQ(FormatElement(*FindElementType("UINT8"), "\x01\xff", 1), "255");
  EXPECT_EQ(FormatElement(*FindElementType("UINT64"), std::string(8, '\xff'), 0),
            "18446744073709551615");
  EXPECT_EQ(FormatElement(*FindElementType("INT64"), std::string(8, '\xff'), 0), "-1");
  EXPECT_EQ(FormatElement(*FindElementType("BOOL"), std::string("\x00\x01", 2), 0), "false");
  EXPECT_EQ(FormatElement(*FindElementType("BOOL"), std::string("\x00\x01", 2), 1), "true");
  const double third = 1.0 / 3;
  EXPECT_EQ(FormatElement(*FindElementType("FP64"),
                          std::string(reinterpret_cast<const char*>(&third), 8), 0),
            "0.333333");
}

}  // namespace
}  // namespace kiln::client
