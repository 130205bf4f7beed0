// The element types the client handles, by their KServe names: size, NumPy
// dtype, and one element read as a number or as text. The client's only such
// table (it does not link the compiler's DType).
#ifndef KILN_CLIENT_ELEMENT_TYPE_H_
#define KILN_CLIENT_ELEMENT_TYPE_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace kiln::client {

struct ElementType {
  enum class Kind { kFloat, kSigned, kUnsigned, kBool };
  absl::string_view datatype;   // KServe's name: "FP32", "BF16", "BOOL"
  absl::string_view npy_descr;  // NumPy's: "<f4", "|b1"; empty for BF16, which NumPy lacks
  size_t size;                  // bytes per element
  Kind kind;
};

// The entry KServe's `datatype` names, or nullptr.
const ElementType* FindElementType(absl::string_view datatype);

// The entry for a NumPy descr as .npy headers spell it ("<f4", "|i1"), or
// nullptr. One-byte types are taken with any byte-order mark.
const ElementType* FindNpyElementType(absl::string_view descr);

// The NumPy descrs the client reads, for messages: "<f2 <f4 ... |b1".
std::string NpyDescrList();

// Element i of `data` as a double: FP16 and BF16 widened exactly, integers
// converted (exact up to 2^53), BOOL 0 or 1.
double ElementAsDouble(const ElementType& type, absl::string_view data, size_t i);

// Element i as text: floats "%.6g", integers in full, BOOL true or false.
std::string FormatElement(const ElementType& type, absl::string_view data, size_t i);

}  // namespace kiln::client

#endif  // KILN_CLIENT_ELEMENT_TYPE_H_
