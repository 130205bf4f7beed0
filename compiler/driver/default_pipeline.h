// THE ordered list of passes Kiln runs on every graph.
#ifndef KILN_COMPILER_DRIVER_DEFAULT_PIPELINE_H_
#define KILN_COMPILER_DRIVER_DEFAULT_PIPELINE_H_

#include <memory>
#include <string>

#include "compiler/pass/pass.h"

namespace kiln {

std::unique_ptr<Sequential> DefaultPipeline();

// A fresh instance of the named pipeline pass, or null (for prerequisites).
std::unique_ptr<Pass> CreatePassByName(const std::string& name);

}  // namespace kiln

#endif  // KILN_COMPILER_DRIVER_DEFAULT_PIPELINE_H_
