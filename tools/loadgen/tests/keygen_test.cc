#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "keygen.h"

using namespace loadgen;

TEST(Rng, DeterministicBySeed) {
  Rng a(7), b(7), c(8);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    uint64_t x = a.next();
    EXPECT_EQ(x, b.next());
    differs |= x != c.next();
  }
  EXPECT_TRUE(differs);
}

TEST(Rng, BelowInRangeAndUniform) {
  Rng r(1);
  std::vector<int> hits(10);
  for (int i = 0; i < 100000; ++i) {
    uint64_t x = r.below(10);
    ASSERT_LT(x, 10u);
    ++hits[x];
  }
  for (int h : hits) EXPECT_NEAR(h, 10000, 500);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(r.below(1), 0u);
}

TEST(KeyChooser, UniformCoversRange) {
  Key_chooser k(Dist::uniform, 100, 0.99, false, 3);
  std::vector<int> seen(101);
  for (int i = 0; i < 20000; ++i) {
    uint64_t x = k.next();
    ASSERT_GE(x, 1u);
    ASSERT_LE(x, 100u);
    ++seen[x];
  }
  for (int i = 1; i <= 100; ++i) EXPECT_GT(seen[i], 100) << i;
}

// Frequencies of the first ranks follow 1/k^theta / H(n, theta).
void check_zipf(uint64_t n, double theta) {
  Key_chooser k(Dist::zipf, n, theta, false, 11);
  const int samples = 400000;
  std::vector<int> top(6);
  for (int i = 0; i < samples; ++i) {
    uint64_t x = k.next();
    ASSERT_GE(x, 1u);
    ASSERT_LE(x, n);
    if (x <= 5) ++top[x];
  }
  double hn = 0;
  for (uint64_t i = 1; i <= n; ++i) hn += 1.0 / std::pow(double(i), theta);
  for (int r = 1; r <= 5; ++r) {
    double want = samples / std::pow(double(r), theta) / hn;
    EXPECT_NEAR(top[r], want, 5 * std::sqrt(want) + 0.01 * want) << "n=" << n << " theta=" << theta << " rank " << r;
  }
}

TEST(Zipf, MatchesTheory) {
  check_zipf(1000, 0.99);
  check_zipf(1000, 1.0);
  check_zipf(100000, 0.99);
  check_zipf(50, 0.5);
  check_zipf(1000, 1.5);
}

TEST(Zipf, SingleKey) {
  Key_chooser k(Dist::zipf, 1, 0.99, false, 5);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(k.next(), 1u);
}

TEST(Zipf, ScrambledStaysInRangeAndDeterministic) {
  Key_chooser a(Dist::zipf, 1000, 0.99, true, 9), b(Dist::zipf, 1000, 0.99, true, 9);
  int ones = 0;
  for (int i = 0; i < 10000; ++i) {
    uint64_t x = a.next();
    ASSERT_EQ(x, b.next());
    ASSERT_GE(x, 1u);
    ASSERT_LE(x, 1000u);
    ones += x == 1;
  }
  EXPECT_LT(ones, 1000);  // rank 1 (~13% of samples) no longer lands on key 1
}
