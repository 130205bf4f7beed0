// The bytes of a constant: a string the importer handed over (weights moved
// out of the parsed model, never copied), or a 64-byte aligned block that
// lowering filled (packed weights), which the runtime runs from as it is
// instead of copying it into a tensor of its own.
#ifndef KILN_COMPILER_IR_CONSTANT_BYTES_H_
#define KILN_COMPILER_IR_CONSTANT_BYTES_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/strings/string_view.h"

namespace kiln {

// Reads like a std::string (data, size, [], substr, a string_view), so code
// that builds or reads constants does not care which storage it holds.
class ConstantBytes {
 public:
  // The alignment and rounding of Aligned blocks: the runtime's tensors'.
  static constexpr size_t kAlignment = 64;

  ConstantBytes() = default;
  ConstantBytes(std::string bytes) : string_(std::move(bytes)) {}  // NOLINT: reads as a string
  ConstantBytes(ConstantBytes&&) noexcept = default;
  ConstantBytes& operator=(ConstantBytes&&) noexcept = default;
  ConstantBytes(const ConstantBytes& other) { *this = other; }
  ConstantBytes& operator=(const ConstantBytes& other);

  // `size` bytes, uninitialised, at a kAlignment-aligned address; the
  // padding up to the next multiple of kAlignment is zero, as a tensor's is.
  static ConstantBytes Aligned(size_t size);

  // Whether the bytes sit in an Aligned block (a tensor may adopt them).
  bool aligned() const { return aligned_ != nullptr; }

  const char* data() const { return aligned_ ? aligned_.get() : string_.data(); }
  char* data() { return aligned_ ? aligned_.get() : string_.data(); }
  size_t size() const { return aligned_ ? aligned_size_ : string_.size(); }
  bool empty() const { return size() == 0; }
  char operator[](size_t i) const { return data()[i]; }
  absl::string_view view() const { return absl::string_view(data(), size()); }
  operator absl::string_view() const { return view(); }  // NOLINT: reads as a string
  std::string substr(size_t pos, size_t count) const {
    return std::string(view().substr(pos, count));
  }

  // These leave an Aligned block for a string (they change what was packed).
  void assign(const char* bytes, size_t count);
  void assign(size_t count, char c);
  void resize(size_t count);

  friend bool operator==(const ConstantBytes& a, const ConstantBytes& b) {
    return a.view() == b.view();
  }

 private:
  struct FreeAligned {
    void operator()(char* p) const;
  };
  std::string string_;
  std::unique_ptr<char[], FreeAligned> aligned_;
  size_t aligned_size_ = 0;
};

}  // namespace kiln

#endif  // KILN_COMPILER_IR_CONSTANT_BYTES_H_
