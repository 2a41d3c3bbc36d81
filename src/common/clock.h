/* Monotonic milliseconds, for timeouts (and nanoseconds, for waits shorter than a millisecond). */
#ifndef TABLESOCKET_COMMON_CLOCK_H
#define TABLESOCKET_COMMON_CLOCK_H

#include <cstdint>
#include <ctime>

namespace tablesocket {
inline uint64_t monotonic_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000 + uint64_t(ts.tv_nsec) / 1000000;
}
inline uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000 + uint64_t(ts.tv_nsec);
}
}  // namespace tablesocket
#endif
