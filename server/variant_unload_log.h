// The server's log line for each shape variant the memory budget unloads
// (--max-loaded-mb), at most 10 a second: a client asking for shape after
// shape on a full server could otherwise fill the log.
#ifndef KILN_SERVER_VARIANT_UNLOAD_LOG_H_
#define KILN_SERVER_VARIANT_UNLOAD_LOG_H_

#include <cstdint>
#include <string>

#include "engine/model_manager.h"

namespace kiln::server {

// "kiln-server: unloaded shape x=[3,24] of model 'm' (4.1 KiB, unused
// longest) to make room for shape x=[4,24] of model 'm' (--max-loaded-mb:
// 64.0 MiB)".
std::string VariantUnloadLogLine(const engine::VariantUnloaded& unloaded, int64_t max_bytes);

// A sink writing those lines to stderr, rate-limited, with a count of the
// ones held back.
engine::VariantUnloadSink LogVariantUnloads(int64_t max_bytes);

}  // namespace kiln::server

#endif  // KILN_SERVER_VARIANT_UNLOAD_LOG_H_
