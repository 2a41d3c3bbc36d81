/* A set of byte strings kept as 64-bit fingerprints, for "was this row written in this batch?":
   open addressing in one flat array, no allocation per insert (an unordered_set<std::string> cost
   a node, a hash of the string and a free per written row: ~650 instructions, callgrind). Two
   strings with the same fingerprint answer "yes" for each other; callers use it where a false
   "yes" is only conservative (a read of an unwritten row waits for a commit it did not need). */
#ifndef TABLESOCKET_COMMON_FINGERPRINT_SET_H
#define TABLESOCKET_COMMON_FINGERPRINT_SET_H

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace tablesocket {

class Fingerprint_set {
 public:
  /* Adds the n bytes at p. May allocate (the array doubles at half full); std::bad_alloc then. */
  void insert(const void *p, size_t n) {
    if ((size_ + 1) * 2 > slots_.size()) grow();
    if (place(slots_.data(), slots_.size() - 1, fingerprint(p, n))) ++size_;
  }
  bool contains(const void *p, size_t n) const {
    if (!size_) return false;
    const uint64_t f = fingerprint(p, n);
    const size_t mask = slots_.size() - 1;
    for (size_t i = size_t(f) & mask;; i = (i + 1) & mask) {
      if (slots_[i] == f) return true;
      if (!slots_[i]) return false;
    }
  }
  size_t size() const { return size_; }
  /* Empties the set; an array grown by one big batch is given back once batches are small. */
  void clear() {
    if (!size_) return;
    if (slots_.size() > 1024 && size_ * 16 < slots_.size()) {
      std::vector<uint64_t>().swap(slots_);
    } else {
      std::memset(slots_.data(), 0, slots_.size() * sizeof(uint64_t));
    }
    size_ = 0;
  }

  /* FNV-1a over the bytes, then a 64-bit finalizer (murmur3's fmix64) so that every bit of the
     fingerprint depends on every byte; 0 marks an empty slot, so it is never a fingerprint. */
  static uint64_t fingerprint(const void *p, size_t n) {
    const unsigned char *b = static_cast<const unsigned char *>(p);
    uint64_t h = 0xcbf29ce484222325ULL ^ n;
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ULL;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h ? h : 1;
  }

 private:
  static bool place(uint64_t *slots, size_t mask, uint64_t f) {
    for (size_t i = size_t(f) & mask;; i = (i + 1) & mask) {
      if (slots[i] == f) return false;
      if (!slots[i]) {
        slots[i] = f;
        return true;
      }
    }
  }
  void grow() {
    std::vector<uint64_t> bigger(slots_.empty() ? 64 : slots_.size() * 2, 0);
    for (uint64_t f : slots_)
      if (f) place(bigger.data(), bigger.size() - 1, f);
    slots_.swap(bigger);
  }

  std::vector<uint64_t> slots_;  // a power of two long, at most half full; 0 = empty
  size_t size_ = 0;
};

}  // namespace tablesocket

#endif
