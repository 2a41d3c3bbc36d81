// Log-bucketed latency histogram (HdrHistogram-style): values are nanoseconds; each power of two is
// split into 128 linear sub-buckets, so a reported percentile is within 1/128 (0.8%) of the true
// value. Fixed size (about 58 KiB), no allocation while recording, mergeable.
#ifndef TS_LOADGEN_HISTOGRAM_H
#define TS_LOADGEN_HISTOGRAM_H

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

namespace loadgen {

class Histogram {
 public:
  static constexpr int kSubBits = 7;
  static constexpr uint32_t kSub = 1u << kSubBits;  // 128
  static constexpr uint32_t kBuckets = (64 - kSubBits + 1) * kSub;

  Histogram() : counts_(kBuckets, 0) {}

  static uint32_t index_of(uint64_t v) {
    if (v < 2 * kSub) return uint32_t(v);
    int msb = 63 - __builtin_clzll(v);
    int shift = msb - kSubBits;
    return uint32_t(shift + 1) * kSub + uint32_t((v >> shift) - kSub);
  }
  // Smallest value that maps to bucket i.
  static uint64_t lowest_of(uint32_t i) {
    if (i < 2 * kSub) return i;
    uint32_t shift = i / kSub - 1;
    return uint64_t(i % kSub + kSub) << shift;
  }
  // Largest value that maps to bucket i.
  static uint64_t highest_of(uint32_t i) {
    if (i < 2 * kSub) return i;
    uint32_t shift = i / kSub - 1;
    return lowest_of(i) + ((uint64_t(1) << shift) - 1);
  }

  void record(uint64_t v) {
    ++counts_[index_of(v)];
    ++total_;
    sum_ += v;
    if (v < min_) min_ = v;
    if (v > max_) max_ = v;
  }

  void merge(const Histogram &o) {
    for (uint32_t i = 0; i < kBuckets; ++i) counts_[i] += o.counts_[i];
    total_ += o.total_;
    sum_ += o.sum_;
    if (o.min_ < min_) min_ = o.min_;
    if (o.max_ > max_) max_ = o.max_;
  }

  void reset() {
    std::fill(counts_.begin(), counts_.end(), 0);
    total_ = sum_ = max_ = 0;
    min_ = UINT64_MAX;
  }

  uint64_t count() const { return total_; }
  uint64_t min() const { return total_ ? min_ : 0; }
  uint64_t max() const { return max_; }
  double mean() const { return total_ ? double(sum_) / double(total_) : 0.0; }

  // The value at quantile q (0..1]: the midpoint of the bucket holding the ceil(q * count)-th
  // smallest value, clamped to [min, max]; q = 1 gives the exact max. 0 when empty.
  uint64_t percentile(double q) const {
    if (total_ == 0) return 0;
    if (q >= 1.0) return max_;
    double want_d = q * double(total_);
    uint64_t want = uint64_t(want_d);
    if (double(want) < want_d) ++want;
    if (want < 1) want = 1;
    if (want > total_) want = total_;
    uint64_t seen = 0;
    for (uint32_t i = 0; i < kBuckets; ++i) {
      seen += counts_[i];
      if (seen >= want) {
        uint64_t lo = lowest_of(i), hi = highest_of(i);
        uint64_t v = lo + (hi - lo) / 2;
        if (v < min_) v = min_;
        if (v > max_) v = max_;
        return v;
      }
    }
    return max_;
  }

 private:
  std::vector<uint64_t> counts_;
  uint64_t total_ = 0, sum_ = 0, max_ = 0, min_ = UINT64_MAX;
};

}  // namespace loadgen
#endif
