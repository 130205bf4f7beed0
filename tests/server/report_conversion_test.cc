// kiln.v1 reports (compile reports, model listings) name every element type
// as the wire's DataType: before, anything but INT64 was reported FLOAT32.
#include "server/report_conversion.h"

#include <set>
#include <string>

#include "absl/strings/ascii.h"
#include "gtest/gtest.h"

namespace kiln::server {
namespace {

TEST(ReportConversionTest, EveryDTypeHasItsOwnWireDataTypeOfTheSameName) {
  std::set<int> seen;
  for (DType d : kAllDTypes) {
    const kiln::v1::DataType wire = WireDataType(d);
    EXPECT_NE(wire, kiln::v1::DATA_TYPE_UNSPECIFIED) << DTypeName(d);
    EXPECT_TRUE(seen.insert(wire).second) << DTypeName(d) << " shares a DataType";
    EXPECT_EQ(kiln::v1::DataType_Name(wire), absl::AsciiStrToUpper(DTypeName(d)));
  }
}

TEST(ReportConversionTest, ValueInfoCarriesTheDType) {
  TensorSignature mask;
  mask.name = "mask";
  mask.dtype = DType::kBool;
  mask.dims = {-1, 128};
  kiln::v1::ValueInfo info;
  FillValueInfo(mask, &info);
  EXPECT_EQ(info.dtype(), kiln::v1::BOOL);
  EXPECT_EQ(info.dims_size(), 2);
}

}  // namespace
}  // namespace kiln::server
