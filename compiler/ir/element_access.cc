#include "compiler/ir/element_access.h"

#include <cmath>
#include <cstring>

#include "common/half_float.h"

namespace kiln {
namespace {

template <typename T>
T Get(const void* data, int64_t i) {
  T v;
  std::memcpy(&v, static_cast<const char*>(data) + i * sizeof(T), sizeof(T));
  return v;
}

template <typename T>
void Put(void* data, int64_t i, T v) {
  std::memcpy(static_cast<char*>(data) + i * sizeof(T), &v, sizeof(T));
}

// A double to int64 as a kernel's fptosi would give for in-range values;
// NaN and out-of-range values (undefined in C++) become 0 or saturate.
int64_t DoubleToInt(double v) {
  if (std::isnan(v)) return 0;
  if (v >= 9.2233720368547758e18) return INT64_MAX;
  if (v <= -9.2233720368547758e18) return INT64_MIN;
  return static_cast<int64_t>(v);
}

}  // namespace

double ReadElementAsDouble(DType dtype, const void* data, int64_t i) {
  switch (dtype) {
    case DType::kFloat32: return Get<float>(data, i);
    case DType::kFloat64: return Get<double>(data, i);
    case DType::kFloat16: return HalfToFloat(Get<uint16_t>(data, i));
    case DType::kBFloat16: return BFloat16ToFloat(Get<uint16_t>(data, i));
    case DType::kUInt64: return static_cast<double>(Get<uint64_t>(data, i));
    default: return static_cast<double>(ReadElementAsInt(dtype, data, i));
  }
}

int64_t ReadElementAsInt(DType dtype, const void* data, int64_t i) {
  switch (dtype) {
    case DType::kBool: return Get<uint8_t>(data, i) != 0;
    case DType::kInt8: return Get<int8_t>(data, i);
    case DType::kUInt8: return Get<uint8_t>(data, i);
    case DType::kInt16: return Get<int16_t>(data, i);
    case DType::kUInt16: return Get<uint16_t>(data, i);
    case DType::kInt32: return Get<int32_t>(data, i);
    case DType::kUInt32: return Get<uint32_t>(data, i);
    case DType::kInt64: return Get<int64_t>(data, i);
    case DType::kUInt64: return static_cast<int64_t>(Get<uint64_t>(data, i));
    default: return DoubleToInt(ReadElementAsDouble(dtype, data, i));
  }
}

void WriteElementFromDouble(DType dtype, void* data, int64_t i, double v) {
  switch (dtype) {
    case DType::kFloat32: return Put<float>(data, i, static_cast<float>(v));
    case DType::kFloat64: return Put<double>(data, i, v);
    case DType::kFloat16: return Put<uint16_t>(data, i, FloatToHalf(static_cast<float>(v)));
    case DType::kBFloat16:
      return Put<uint16_t>(data, i, FloatToBFloat16(static_cast<float>(v)));
    case DType::kBool: return Put<uint8_t>(data, i, v != 0);
    default: return WriteElementFromInt(dtype, data, i, DoubleToInt(v));
  }
}

void WriteElementFromInt(DType dtype, void* data, int64_t i, int64_t v) {
  switch (dtype) {
    case DType::kBool: return Put<uint8_t>(data, i, v != 0);
    case DType::kInt8: return Put<int8_t>(data, i, static_cast<int8_t>(v));
    case DType::kUInt8: return Put<uint8_t>(data, i, static_cast<uint8_t>(v));
    case DType::kInt16: return Put<int16_t>(data, i, static_cast<int16_t>(v));
    case DType::kUInt16: return Put<uint16_t>(data, i, static_cast<uint16_t>(v));
    case DType::kInt32: return Put<int32_t>(data, i, static_cast<int32_t>(v));
    case DType::kUInt32: return Put<uint32_t>(data, i, static_cast<uint32_t>(v));
    case DType::kInt64: return Put<int64_t>(data, i, v);
    case DType::kUInt64: return Put<uint64_t>(data, i, static_cast<uint64_t>(v));
    default: return WriteElementFromDouble(dtype, data, i, static_cast<double>(v));
  }
}

}  // namespace kiln
