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
/* The same clock read at the kernel tick's resolution (a few ms): cheaper, for per-request checks
   of intervals of a second or so. Do not compare with monotonic_ms(): it may lag it by a tick. */
inline uint64_t coarse_monotonic_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return uint64_t(ts.tv_sec) * 1000 + uint64_t(ts.tv_nsec) / 1000000;
}
inline uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000 + uint64_t(ts.tv_nsec);
}
}  // namespace tablesocket
#endif
