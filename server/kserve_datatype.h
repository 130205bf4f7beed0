// KServe v2's datatype names ("FP32", "INT64", "BOOL", "BF16", ...) for Kiln's
// element types, both ways: the one table the server's protocols share.
#ifndef KILN_SERVER_KSERVE_DATATYPE_H_
#define KILN_SERVER_KSERVE_DATATYPE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "compiler/ir/dtype.h"

namespace kiln::server {

// The protocol's name for `dtype`, spelled as KServe and Triton spell it.
std::string DatatypeName(DType dtype);

// The element type KServe's `datatype` names. `tensor` ("input 'x'",
// "argument 2") opens the error: Unimplemented for BYTES (strings, which
// Kiln does not serve), InvalidArgument for a name KServe does not have.
absl::StatusOr<DType> DTypeFromDatatype(absl::string_view datatype, absl::string_view tensor);

}  // namespace kiln::server

#endif  // KILN_SERVER_KSERVE_DATATYPE_H_
