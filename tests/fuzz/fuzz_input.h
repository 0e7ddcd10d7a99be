// The fuzzer's bytes read as a list of choices (the structured harnesses: recording_fuzzer.cpp,
// uff_fuzzer.cpp), taken from the front; zeros once they run out.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace sonopipe::fuzz {

class Input {
 public:
  Input(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  bool empty() const { return used_ >= size_; }
  std::uint8_t byte() { return used_ < size_ ? data_[used_++] : 0; }
  std::uint64_t number(int bytes) {
    std::uint64_t value = 0;
    for (int i = 0; i < bytes; ++i) value = value << 8 | byte();
    return value;
  }
  template <typename T>
  const T& pick(const std::vector<T>& choices) { return choices[byte() % choices.size()]; }
  std::string text(std::size_t max_length) {
    std::string out;
    const std::size_t length = byte() % (max_length + 1);
    for (std::size_t i = 0; i < length; ++i) out += static_cast<char>(byte());
    return out;
  }

 private:
  const std::uint8_t* data_;
  std::size_t size_, used_ = 0;
};

}  // namespace sonopipe::fuzz
