// THE ordered list of passes Kiln runs on every graph.
#ifndef KILN_COMPILER_DEFAULT_PIPELINE_H_
#define KILN_COMPILER_DEFAULT_PIPELINE_H_

#include <memory>

#include "compiler/pass.h"

namespace kiln {

std::unique_ptr<Sequential> DefaultPipeline();

}  // namespace kiln

#endif  // KILN_COMPILER_DEFAULT_PIPELINE_H_
