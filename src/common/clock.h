/* Monotonic milliseconds, for timeouts. */
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
}  // namespace tablesocket
#endif
