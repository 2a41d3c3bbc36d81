/* The CAS value of a key/value row whose container has no cas column: a 64-bit FNV-1a hash of
   the value and flags (its low 63 bits), so `cas` succeeds exactly when the row is unchanged since `gets`. The
   memcached session and the store must agree on it, hence one definition here. */
#ifndef TABLESOCKET_COMMON_KV_CAS_H
#define TABLESOCKET_COMMON_KV_CAS_H

#include <cstdint>
#include <string_view>

namespace tablesocket {
inline uint64_t content_cas(std::string_view value, uint32_t flags) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : value) { h ^= c; h *= 1099511628211ULL; }
  for (int i = 0; i < 4; ++i) { h ^= (flags >> (8 * i)) & 0xff; h *= 1099511628211ULL; }
  /* At most 2^63 - 1 (19 digits): libmemcached cannot send a 20-digit cas back, and clients with
     signed 64-bit integers would see a negative one. */
  h &= 0x7fffffffffffffffULL;
  return h ? h : 1;  // 0 is not a valid cas
}
}  // namespace tablesocket
#endif
