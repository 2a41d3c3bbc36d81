/* Growable byte buffer used for connection input and output.
   Owns its storage; data() stays valid until the next mutating call. Never allocates more than the
   caller asks for through append()/reserve(): limits are enforced by callers before they append. */
#ifndef TABLESOCKET_COMMON_BYTE_BUFFER_H
#define TABLESOCKET_COMMON_BYTE_BUFFER_H

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string_view>

namespace tablesocket {

class Byte_buffer {
 public:
  Byte_buffer() = default;
  Byte_buffer(const Byte_buffer &) = delete;
  Byte_buffer &operator=(const Byte_buffer &) = delete;
  Byte_buffer(Byte_buffer &&o) noexcept : buf_(o.buf_), begin_(o.begin_), end_(o.end_), cap_(o.cap_) {
    o.buf_ = nullptr; o.begin_ = o.end_ = o.cap_ = 0;
  }
  ~Byte_buffer() { std::free(buf_); }

  char *data() { return buf_ + begin_; }
  const char *data() const { return buf_ + begin_; }
  size_t size() const { return end_ - begin_; }
  bool empty() const { return end_ == begin_; }
  std::string_view view() const { return {data(), size()}; }
  /* Bytes allocated (for memory accounting). */
  size_t capacity() const { return cap_; }

  /* Returns a pointer to at least n writable bytes at the end; commit with wrote(). */
  char *prepare(size_t n) {
    if (cap_ - end_ < n) grow(n);
    return buf_ + end_;
  }
  void wrote(size_t n) { end_ += n; }

  void append(const void *p, size_t n) {
    std::memcpy(prepare(n), p, n);
    end_ += n;
  }
  void append(std::string_view s) { append(s.data(), s.size()); }
  void push_back(char c) {
    *prepare(1) = c;
    ++end_;
  }
  /* Appends the decimal form of v. */
  void append_uint(uint64_t v) {
    char tmp[20];
    int i = 20;
    do { tmp[--i] = char('0' + v % 10); v /= 10; } while (v);
    append(tmp + i, 20 - i);
  }
  /* Drops n bytes from the front. */
  void consume(size_t n) {
    begin_ += n;
    if (begin_ == end_) begin_ = end_ = 0;
  }
  /* Truncates to n bytes (n <= size()). */
  void resize(size_t n) { end_ = begin_ + n; }
  void clear() { begin_ = end_ = 0; }
  /* Frees storage when the buffer is empty and holds more than keep bytes (after a large reply). */
  void shrink_if_idle(size_t keep) {
    if (empty() && cap_ > keep) { std::free(buf_); buf_ = nullptr; cap_ = 0; begin_ = end_ = 0; }
  }

 private:
  void grow(size_t n) {
    size_t used = end_ - begin_;
    if (begin_ > 0 && cap_ - used >= n && begin_ >= used) {
      /* Compact instead of growing when at least half the buffer is consumed. */
      std::memmove(buf_, buf_ + begin_, used);
      begin_ = 0; end_ = used;
      return;
    }
    size_t want = used + n;
    size_t ncap = cap_ ? cap_ : 256;
    while (ncap < want) ncap *= 2;
    char *nb = static_cast<char *>(std::malloc(ncap));
    if (!nb) throw std::bad_alloc();
    if (used) std::memcpy(nb, buf_ + begin_, used);
    std::free(buf_);
    buf_ = nb; cap_ = ncap; begin_ = 0; end_ = used;
  }

  char *buf_ = nullptr;
  size_t begin_ = 0, end_ = 0, cap_ = 0;
};

}  // namespace tablesocket
#endif
