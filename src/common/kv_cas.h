/* CAS values of key/value rows, shared by the memcached session and the store.

   memcached's CAS is a process-wide counter from 1, so its values stay small, and clients rely on
   that: meta-memcache keeps a CAS in 32 bits (a larger `c` reads as no CAS, and its CAS-protected
   set becomes a plain set), JavaScript clients in a double (exact to 2^53). tablesocket's values
   are small for the same reason:

   - a container with a cas column stores `next_kv_cas()` there on every write: a process-wide
     counter of even values that starts at the seconds since 2020-01-01 (2.2e8 late in 2026, so a
     restart rarely reissues the previous run's values, and 2^32 is two billion writes away).
     Rows outlive the process, so a write of an existing row stores the larger of the counter's
     value and the next even value above its cas (`kv_cas_after`): a row's cas only grows, and a
     token from an earlier version of it never matches it again, across restarts, failovers and
     restores too. The counter is not raised to such a value (one row SQL gave a huge cas would
     make every later value too large for 32-bit clients); so a key deleted and written again
     may, by chance, get the very value a client holds from its deleted version if that value was
     not the counter's own (issued before a restart, or by another server) — memcached itself
     forgets every item on a restart;
   - a row without a cas value (a container without a cas column, or a row SQL wrote with cas 0)
     gets `content_cas()`: a hash of its value and flags, 32 bits and odd, so `cas` succeeds
     exactly when the content is unchanged (the chance that changed content hashes alike is
     2^-31). Odd, so that no value the counter stores can equal it: a token a client got from
     the hash of a row SQL wrote cannot match a later version of that row (a tester advanced the
     counter to such a hash and a stale `cas` overwrote a newer write). */
#ifndef TABLESOCKET_COMMON_KV_CAS_H
#define TABLESOCKET_COMMON_KV_CAS_H

#include <atomic>
#include <cstdint>
#include <ctime>
#include <string_view>

namespace tablesocket {
inline uint64_t content_cas(std::string_view value, uint32_t flags) {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a, 64 bits, folded to 32
  for (unsigned char c : value) { h ^= c; h *= 1099511628211ULL; }
  for (int i = 0; i < 4; ++i) { h ^= (flags >> (8 * i)) & 0xff; h *= 1099511628211ULL; }
  return ((h ^ (h >> 32)) & 0xffffffffULL) | 1;  // odd: never a counter's value (nor 0)
}

/* The process-wide cas counter (one instance in the plugin: an inline function's static). */
inline std::atomic<uint64_t> &kv_cas_counter() {
  static std::atomic<uint64_t> counter{[] {
    constexpr time_t kEpoch = 1577836800;  // 2020-01-01T00:00:00Z
    const time_t now = time(nullptr);
    return uint64_t(now > kEpoch ? now - kEpoch : 2) & ~uint64_t(1);
  }()};
  return counter;
}

/* An even cas value no earlier call in this process returned. */
inline uint64_t next_kv_cas() { return kv_cas_counter().fetch_add(2, std::memory_order_relaxed) + 2; }

/* The cas for a write of a row whose cas column holds `old` (0: none), given `fresh` from
   next_kv_cas(): even and above `old`, so the row's cas only grows. */
inline uint64_t kv_cas_after(uint64_t old, uint64_t fresh) {
  return old < fresh || old >= UINT64_MAX - 1 ? fresh : (old + 2) & ~uint64_t(1);
}
}  // namespace tablesocket
#endif
