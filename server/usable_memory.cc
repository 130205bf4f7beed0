#include "server/usable_memory.h"

#include <unistd.h>

#include <fstream>
#include <string>

#include "absl/strings/numbers.h"

namespace kiln::server {

int64_t UsableMemoryBytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGE_SIZE);
  int64_t bytes = pages > 0 && page_size > 0 ? int64_t{pages} * page_size : 0;
  // v2 says "max" when unlimited and v1 a number near 2^63: neither lowers it.
  for (const char* path :
       {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    std::ifstream in(path);
    std::string word;
    int64_t limit = 0;
    if (in >> word && absl::SimpleAtoi(word, &limit) && limit > 0 &&
        (bytes == 0 || limit < bytes)) {
      bytes = limit;
    }
  }
  return bytes;
}

int64_t DefaultMaxLoadedBytes() {
  const int64_t usable = UsableMemoryBytes();
  return usable > 0 ? usable / 4 * 3 : int64_t{8} << 30;
}

}  // namespace kiln::server
