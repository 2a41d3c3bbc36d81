// Growable byte buffer for connection input/output. Allocates only when it must grow, so after the
// first few requests a connection's buffers never allocate again.
#ifndef TS_LOADGEN_BUFFER_H
#define TS_LOADGEN_BUFFER_H

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string_view>

namespace loadgen {

class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t cap) { reserve(cap); }
  Buffer(const Buffer &) = delete;
  Buffer &operator=(const Buffer &) = delete;
  Buffer(Buffer &&o) noexcept : p_(o.p_), begin_(o.begin_), end_(o.end_), cap_(o.cap_) {
    o.p_ = nullptr;
    o.begin_ = o.end_ = o.cap_ = 0;
  }
  Buffer &operator=(Buffer &&o) noexcept {
    if (this != &o) {
      std::free(p_);
      p_ = o.p_; begin_ = o.begin_; end_ = o.end_; cap_ = o.cap_;
      o.p_ = nullptr;
      o.begin_ = o.end_ = o.cap_ = 0;
    }
    return *this;
  }
  ~Buffer() { std::free(p_); }

  char *data() { return p_ + begin_; }
  const char *data() const { return p_ + begin_; }
  size_t size() const { return end_ - begin_; }
  bool empty() const { return end_ == begin_; }
  std::string_view view() const { return {data(), size()}; }
  size_t capacity() const { return cap_; }

  // Free bytes at the end after moving the live bytes to the front if that helps.
  size_t tail_room() const { return cap_ - end_; }
  char *tail() { return p_ + end_; }
  void wrote(size_t n) { end_ += n; }

  // Makes at least n bytes writable at the end (compacting first, growing only if needed).
  char *prepare(size_t n) {
    if (cap_ - end_ < n) make_room(n);
    return p_ + end_;
  }

  void append(const void *s, size_t n) {
    std::memcpy(prepare(n), s, n);
    end_ += n;
  }
  void append(std::string_view s) { append(s.data(), s.size()); }
  void push_back(char c) {
    *prepare(1) = c;
    ++end_;
  }
  void append_uint(uint64_t v) {
    char tmp[20];
    int i = 20;
    do {
      tmp[--i] = char('0' + v % 10);
      v /= 10;
    } while (v);
    append(tmp + i, size_t(20 - i));
  }

  void consume(size_t n) {
    begin_ += n;
    if (begin_ == end_) begin_ = end_ = 0;
  }
  void clear() { begin_ = end_ = 0; }
  void reserve(size_t n) {
    if (cap_ < n) regrow(n);
  }

 private:
  void make_room(size_t n) {
    size_t used = end_ - begin_;
    if (begin_ > 0 && cap_ - used >= n) {
      std::memmove(p_, p_ + begin_, used);
      begin_ = 0;
      end_ = used;
      return;
    }
    size_t want = used + n;
    size_t ncap = cap_ ? cap_ : 256;
    while (ncap < want) ncap *= 2;
    regrow(ncap);
  }
  void regrow(size_t ncap) {
    size_t used = end_ - begin_;
    char *np = static_cast<char *>(std::malloc(ncap));
    if (!np) throw std::bad_alloc();
    if (used) std::memcpy(np, p_ + begin_, used);
    std::free(p_);
    p_ = np;
    begin_ = 0;
    end_ = used;
    cap_ = ncap;
  }

  char *p_ = nullptr;
  size_t begin_ = 0, end_ = 0, cap_ = 0;
};

// Decimal form of v into out (at least 20 bytes); returns the length.
inline size_t format_uint(char *out, uint64_t v) {
  char tmp[20];
  int i = 20;
  do {
    tmp[--i] = char('0' + v % 10);
    v /= 10;
  } while (v);
  size_t n = size_t(20 - i);
  std::memcpy(out, tmp + i, n);
  return n;
}

}  // namespace loadgen
#endif
