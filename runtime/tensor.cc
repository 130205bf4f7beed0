#include "runtime/tensor.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kiln::runtime {

namespace {
constexpr int64_t kPooledBytes = 256 << 10;
}  // namespace

WorkspacePool& TensorMemoryPool() {
  // Never destroyed: tensors may outlive other statics.
  static WorkspacePool* pool = new WorkspacePool(int64_t{1} << 30);
  return *pool;
}

void TensorFree::operator()(void* p) const {
  if (owner) return;  // the owner's last reference goes with this deleter
  if (pooled) {
    TensorMemoryPool().Free(p);
  } else {
    std::free(p);
  }
}

absl::StatusOr<Tensor> Tensor::Allocate(const TensorType& type) {
  absl::StatusOr<Tensor> t = AllocateUninitialized(type);
  if (!t.ok()) return t.status();
  std::memset(t->data(), 0, static_cast<size_t>(std::max<int64_t>(64, (t->byte_size() + 63) / 64 * 64)));
  return t;
}

absl::StatusOr<Tensor> Tensor::AllocateUninitialized(const TensorType& type) {
  absl::StatusOr<int64_t> elements = CheckedNumElements(type.shape);
  if (!elements.ok()) return elements.status();
  const int64_t bytes = *elements * DTypeSize(type.dtype);
  if (bytes > kMaxTensorBytes) {
    return absl::ResourceExhaustedError(absl::StrCat("tensor ", type.ToString(), " needs ", bytes,
                                                     " bytes, over the ", kMaxTensorBytes,
                                                     "-byte per-tensor limit"));
  }
  Tensor t;
  t.type_ = type;
  t.byte_size_ = bytes;
  const size_t rounded = static_cast<size_t>(std::max<int64_t>(64, (bytes + 63) / 64 * 64));
  const bool pooled = static_cast<int64_t>(rounded) >= kPooledBytes;
  void* p = pooled ? TensorMemoryPool().Allocate(static_cast<int64_t>(rounded))
                   : std::aligned_alloc(64, rounded);
  if (p == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat("out of memory allocating ", bytes, " bytes"));
  }
  t.data_ = std::unique_ptr<void, Free>(p, Free{pooled});
  return t;
}

absl::StatusOr<Tensor> Tensor::FromBytes(const TensorType& type, absl::string_view bytes) {
  // Copied over uninitialised memory, only the padding past the end zeroed
  // as Allocate does: zeroing it all first touched every page twice.
  absl::StatusOr<Tensor> t = AllocateUninitialized(type);
  if (!t.ok()) return t.status();
  if (static_cast<int64_t>(bytes.size()) != t->byte_size()) {
    return absl::InvalidArgumentError(absl::StrCat(type.ToString(), " needs ", t->byte_size(),
                                                   " bytes, got ", bytes.size()));
  }
  std::memcpy(t->data(), bytes.data(), bytes.size());
  const size_t padded = static_cast<size_t>(std::max<int64_t>(64, (t->byte_size() + 63) / 64 * 64));
  std::memset(static_cast<char*>(t->data()) + bytes.size(), 0, padded - bytes.size());
  return t;
}

absl::StatusOr<Tensor> Tensor::Adopt(const TensorType& type, absl::string_view bytes,
                                     std::shared_ptr<const void> owner) {
  absl::StatusOr<int64_t> elements = CheckedNumElements(type.shape);
  if (!elements.ok()) return elements.status();
  const int64_t size = *elements * DTypeSize(type.dtype);
  if (static_cast<int64_t>(bytes.size()) != size) {
    return absl::InvalidArgumentError(
        absl::StrCat(type.ToString(), " needs ", size, " bytes, got ", bytes.size()));
  }
  if (reinterpret_cast<uintptr_t>(bytes.data()) % 64 != 0) {
    return absl::InvalidArgumentError("adopted tensor bytes must be 64-byte aligned");
  }
  Tensor t;
  t.type_ = type;
  t.byte_size_ = size;
  // Constants are only ever read: kernels take them as inputs.
  t.data_ = std::unique_ptr<void, Free>(const_cast<char*>(bytes.data()),
                                        Free{false, std::move(owner)});
  return t;
}

}  // namespace kiln::runtime
