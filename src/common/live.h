/* A setting that SET GLOBAL may change while the server runs: one writer (the system variable's
   update callback, which the server serialises) and any number of readers on the request path.
   A relaxed atomic is all that is needed: each value stands alone (a reader sees the old or the
   new one, never a mix), and costs what a plain load does. Reads convert implicitly, so
   `c.out.size() < cfg_.output_high_water` reads as before. */
#ifndef TABLESOCKET_COMMON_LIVE_H
#define TABLESOCKET_COMMON_LIVE_H

#include <atomic>

namespace tablesocket {

template <class T>
class Live {
 public:
  Live(T v = T()) : v_(v) {}  // NOLINT: implicit, as the plain field it replaces
  Live(const Live &o) : v_(o.get()) {}
  Live &operator=(const Live &o) {
    set(o.get());
    return *this;
  }
  Live &operator=(T v) {
    set(v);
    return *this;
  }
  T get() const { return v_.load(std::memory_order_relaxed); }
  operator T() const { return get(); }  // NOLINT: reads as the plain field did
  void set(T v) { v_.store(v, std::memory_order_relaxed); }

 private:
  std::atomic<T> v_;
};

}  // namespace tablesocket
#endif
