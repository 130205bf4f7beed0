#include "compiler/ir/constant_bytes.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "common/large_block.h"

namespace kiln {

void ConstantBytes::FreeAligned::operator()(char* p) const { std::free(p); }

ConstantBytes ConstantBytes::Aligned(size_t size) {
  const size_t rounded =
      std::max<size_t>(kAlignment, (size + kAlignment - 1) / kAlignment * kAlignment);
  char* p = static_cast<char*>(AllocateLargeBlock(rounded, kAlignment));
  if (p == nullptr) throw std::bad_alloc();  // as std::string's own allocation would
  std::memset(p + size, 0, rounded - size);
  ConstantBytes out;
  out.aligned_.reset(p);
  out.aligned_size_ = size;
  return out;
}

ConstantBytes& ConstantBytes::operator=(const ConstantBytes& other) {
  if (this == &other) return *this;
  if (other.aligned()) {
    ConstantBytes copy = Aligned(other.size());
    std::memcpy(copy.data(), other.data(), other.size());
    *this = std::move(copy);
  } else {
    aligned_.reset();
    aligned_size_ = 0;
    string_ = other.string_;
  }
  return *this;
}

void ConstantBytes::assign(const char* bytes, size_t count) {
  aligned_.reset();
  aligned_size_ = 0;
  string_.assign(bytes, count);
}

void ConstantBytes::assign(size_t count, char c) {
  aligned_.reset();
  aligned_size_ = 0;
  string_.assign(count, c);
}

void ConstantBytes::resize(size_t count) {
  if (aligned()) {
    std::string copy(data(), std::min(count, size()));
    aligned_.reset();
    aligned_size_ = 0;
    string_ = std::move(copy);
  }
  string_.resize(count);
}

}  // namespace kiln
