// A typed, 64-byte aligned host tensor that owns its bytes.
#ifndef KILN_RUNTIME_TENSOR_H_
#define KILN_RUNTIME_TENSOR_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "compiler/ir/tensor_type.h"
#include "runtime/workspace_pool.h"

namespace kiln::runtime {

// Largest single tensor the runtime allocates (4 GiB).
inline constexpr int64_t kMaxTensorBytes = int64_t{1} << 32;

// Where tensors of 256 KB and more keep their bytes between owners. glibc
// maps each such block afresh (its mmap threshold rises only slowly), so
// every new output faulted its pages in again: the first 5-10 runs of the
// elementwise chain at batch 8 (a 6.4 MB output) took 10-20 ms instead of
// 0.1-0.4 ms. Kept blocks are handed to the next tensor of about their size
// (1 GiB kept at most).
WorkspacePool& TensorMemoryPool();

// Frees a tensor's bytes where they came from (outside Tensor, so that its
// member initialiser counts while Tensor is incomplete).
struct TensorFree {
  bool pooled = false;  // from TensorMemoryPool
  // Set for a tensor over bytes someone else owns (Tensor::Adopt): freeing
  // drops this reference instead.
  std::shared_ptr<const void> owner;
  void operator()(void* p) const;
};

class Tensor {
 public:
  Tensor() = default;
  Tensor(Tensor&&) = default;
  Tensor& operator=(Tensor&&) = default;

  // Zero-filled. ResourceExhausted above kMaxTensorBytes.
  static absl::StatusOr<Tensor> Allocate(const TensorType& type);
  // Uninitialised: for a buffer a kernel is about to write in full (zeroing a
  // large output would cost as much as the kernel that fills it).
  static absl::StatusOr<Tensor> AllocateUninitialized(const TensorType& type);
  // A copy of `bytes`; InvalidArgument when their size is not the type's.
  static absl::StatusOr<Tensor> FromBytes(const TensorType& type, absl::string_view bytes);
  // A tensor over `bytes` as they are, kept alive by `owner`, for bytes that
  // already look like a tensor's: 64-byte aligned, zero-padded to a multiple
  // of 64 and never written (a model's constants). InvalidArgument when their
  // size is not the type's or they are not aligned.
  static absl::StatusOr<Tensor> Adopt(const TensorType& type, absl::string_view bytes,
                                      std::shared_ptr<const void> owner);

  const TensorType& type() const { return type_; }
  int64_t byte_size() const { return byte_size_; }
  void* data() { return data_.get(); }
  const void* data() const { return data_.get(); }
  absl::string_view bytes() const {
    return absl::string_view(static_cast<const char*>(data_.get()), byte_size_);
  }

 private:
  using Free = TensorFree;
  TensorType type_;
  int64_t byte_size_ = 0;
  std::unique_ptr<void, Free> data_;
};

}  // namespace kiln::runtime

#endif  // KILN_RUNTIME_TENSOR_H_
