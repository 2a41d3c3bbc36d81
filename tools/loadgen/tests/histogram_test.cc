#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "histogram.h"
#include "keygen.h"

using loadgen::Histogram;

TEST(Histogram, BucketsAreContiguousAndMonotonic) {
  for (uint32_t i = 0; i + 1 < Histogram::kBuckets; ++i) {
    ASSERT_EQ(Histogram::highest_of(i) + 1, Histogram::lowest_of(i + 1)) << i;
    ASSERT_EQ(Histogram::index_of(Histogram::lowest_of(i)), i);
    ASSERT_EQ(Histogram::index_of(Histogram::highest_of(i)), i);
  }
  EXPECT_EQ(Histogram::index_of(UINT64_MAX), Histogram::kBuckets - 1);
  EXPECT_EQ(Histogram::highest_of(Histogram::kBuckets - 1), UINT64_MAX);
}

TEST(Histogram, RelativeErrorBelowOnePercent) {
  for (uint64_t v : {255ull, 256ull, 1000ull, 12345ull, 999999ull, 123456789ull, 1ull << 40}) {
    uint32_t i = Histogram::index_of(v);
    uint64_t width = Histogram::highest_of(i) - Histogram::lowest_of(i) + 1;
    EXPECT_LE(double(width) / double(v), 1.0 / 128 + 1e-12) << v;
  }
}

TEST(Histogram, SmallValuesExact) {
  Histogram h;
  for (uint64_t v = 1; v <= 100; ++v) h.record(v);
  EXPECT_EQ(h.count(), 100u);
  EXPECT_EQ(h.percentile(0.5), 50u);
  EXPECT_EQ(h.percentile(0.99), 99u);
  EXPECT_EQ(h.percentile(1.0), 100u);
  EXPECT_EQ(h.min(), 1u);
  EXPECT_EQ(h.max(), 100u);
  EXPECT_DOUBLE_EQ(h.mean(), 50.5);
}

TEST(Histogram, PercentilesMatchExactWithinPrecision) {
  loadgen::Rng rng(42);
  std::vector<uint64_t> v;
  Histogram h;
  for (int i = 0; i < 200000; ++i) {
    // log-uniform between 1 us and 100 ms, in ns
    double x = 1000.0 * std::pow(100000.0, rng.unit());
    v.push_back(uint64_t(x));
    h.record(uint64_t(x));
  }
  std::sort(v.begin(), v.end());
  for (double q : {0.5, 0.9, 0.99, 0.999}) {
    uint64_t exact = v[size_t(std::ceil(q * double(v.size()))) - 1];
    double got = double(h.percentile(q));
    EXPECT_NEAR(got / double(exact), 1.0, 0.01) << "q=" << q;
  }
}

TEST(Histogram, MergeEqualsCombined) {
  Histogram a, b, c;
  for (uint64_t x = 1; x < 50000; x += 7) {
    (x % 2 ? a : b).record(x * 13);
    c.record(x * 13);
  }
  a.merge(b);
  EXPECT_EQ(a.count(), c.count());
  for (double q : {0.1, 0.5, 0.99, 0.9999}) EXPECT_EQ(a.percentile(q), c.percentile(q));
  EXPECT_EQ(a.min(), c.min());
  EXPECT_EQ(a.max(), c.max());
}

TEST(Histogram, Empty) {
  Histogram h;
  EXPECT_EQ(h.percentile(0.99), 0u);
  EXPECT_EQ(h.min(), 0u);
  EXPECT_EQ(h.max(), 0u);
}
