// Seeded random key choice: uniform or Zipfian over 1..K.
#ifndef TS_LOADGEN_KEYGEN_H
#define TS_LOADGEN_KEYGEN_H

#include <cmath>
#include <cstdint>

namespace loadgen {

inline uint64_t splitmix64(uint64_t &x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// xoshiro256** (Blackman & Vigna), seeded through splitmix64.
class Rng {
 public:
  explicit Rng(uint64_t seed = 1) {
    for (auto &w : s_) w = splitmix64(seed);
  }
  uint64_t next() {
    uint64_t r = rotl(s_[1] * 5, 7) * 9;
    uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return r;
  }
  // Uniform in [0, n), n >= 1 (Lemire's multiply-shift with rejection: unbiased).
  uint64_t below(uint64_t n) {
    __uint128_t m = __uint128_t(next()) * n;
    uint64_t lo = uint64_t(m);
    if (lo < n) {
      uint64_t t = (0 - n) % n;
      while (lo < t) {
        m = __uint128_t(next()) * n;
        lo = uint64_t(m);
      }
    }
    return uint64_t(m >> 64);
  }
  // Uniform in [0, 1).
  double unit() { return double(next() >> 11) * (1.0 / 9007199254740992.0); }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

// Zipf distribution over ranks 1..n with P(k) proportional to 1 / k^theta, theta > 0 (1.0 allowed),
// by rejection-inversion (W. Hormann, G. Derflinger, "Rejection-inversion to generate variates from
// monotone discrete distributions", 1996): O(1) set-up and expected O(1) per sample for any n.
class Zipf {
 public:
  Zipf(uint64_t n, double theta) : n_(double(n)), n_int_(n), e_(theta) {
    h_x1_ = h_integral(1.5) - 1.0;
    h_n_ = h_integral(n_ + 0.5);
    s_ = 2.0 - h_integral_inverse(h_integral(2.5) - h(2.0));
  }
  uint64_t sample(Rng &rng) {
    for (;;) {
      double u = h_n_ + rng.unit() * (h_x1_ - h_n_);
      double x = h_integral_inverse(u);
      double kd = std::floor(x + 0.5);
      if (kd < 1.0) kd = 1.0;
      if (kd > n_) kd = n_;
      if (kd - x <= s_ || u >= h_integral(kd + 0.5) - h(kd)) {
        uint64_t k = uint64_t(kd);
        return k < 1 ? 1 : (k > n_int_ ? n_int_ : k);
      }
    }
  }

 private:
  double h(double x) const { return std::exp(-e_ * std::log(x)); }
  double h_integral(double x) const {
    double lx = std::log(x);
    return helper2((1.0 - e_) * lx) * lx;
  }
  double h_integral_inverse(double x) const {
    double t = x * (1.0 - e_);
    if (t < -1.0) t = -1.0;  // numerical guard
    return std::exp(helper1(t) * x);
  }
  // log1p(x)/x and expm1(x)/x, continuous at 0.
  static double helper1(double x) {
    return std::fabs(x) > 1e-8 ? std::log1p(x) / x : 1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x));
  }
  static double helper2(double x) {
    return std::fabs(x) > 1e-8 ? std::expm1(x) / x : 1.0 + x * 0.5 * (1.0 + x * (1.0 / 3.0) * (1.0 + 0.25 * x));
  }

  double n_;
  uint64_t n_int_;
  double e_;
  double h_x1_, h_n_, s_;
};

enum class Dist : uint8_t { uniform, zipf };

// Picks keys in 1..keys. With zipf, rank 1 is the hottest key unless scramble is set, which maps
// ranks to keys by a fixed hash (YCSB's "scrambled zipfian"), spreading hot keys over the range.
class Key_chooser {
 public:
  Key_chooser(Dist d, uint64_t keys, double theta, bool scramble, uint64_t seed)
      : dist_(d), keys_(keys), scramble_(scramble), rng_(seed), zipf_(keys, theta > 0 ? theta : 0.99) {}
  uint64_t next() {
    if (dist_ == Dist::uniform) return 1 + rng_.below(keys_);
    uint64_t r = zipf_.sample(rng_);
    if (!scramble_) return r;
    uint64_t x = r * 0x9e3779b97f4a7c15ull;
    return 1 + splitmix64(x) % keys_;
  }
  Rng &rng() { return rng_; }

 private:
  Dist dist_;
  uint64_t keys_;
  bool scramble_;
  Rng rng_;
  Zipf zipf_;
};

}  // namespace loadgen
#endif
