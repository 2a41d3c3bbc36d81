/* Counters: one block per worker (no shared cache lines on the request path), summed on demand
   for SHOW STATUS. Relaxed atomics: readers only need eventually consistent totals. */
#ifndef TABLESOCKET_COMMON_STATS_H
#define TABLESOCKET_COMMON_STATS_H

#include <atomic>
#include <cstdint>

namespace tablesocket {

#define TABLESOCKET_COUNTERS(X)                                         \
  X(connections_total, "connections accepted")                          \
  X(connections_rejected, "connections refused over max_connections")   \
  X(connections_rejected_per_host, "connections refused over max_connections_per_host") \
  X(requests_open, "open_index (P) requests")                           \
  X(requests_find, "find requests")                                     \
  X(requests_insert, "insert requests")                                 \
  X(requests_modify, "find_modify requests")                            \
  X(requests_auth, "auth requests")                                     \
  X(requests_other, "other requests")                                   \
  X(errors, "requests answered with an error")                          \
  X(rows_read, "rows returned")                                         \
  X(rows_written, "rows inserted, updated or deleted")                  \
  X(batches, "batches executed (transactions that touched a table, one commit each; a request waiting for a lock is tried in one each time)") \
  X(commits_overlapped, "batch commits run on a commit thread while the worker ran the next batch") \
  X(table_opens, "table opens (including reopens after DDL)")           \
  X(table_yields, "tables closed to let DDL or FLUSH proceed")          \
  X(lock_waits, "requests parked waiting for a lock (a table's metadata lock or a row lock), each once")          \
  X(lock_queued, "writes that met a row lock for tablesocket_lock_queue_after and waited in InnoDB's lock queue on a session of their own") \
  X(protocol_errors, "connections closed for oversized or malformed input") \
  X(timeouts, "connections closed as idle")                             \
  X(auth_successes, "logins with a MariaDB account that succeeded")     \
  X(auth_failures, "logins (and shared-secret checks) that failed")     \
  X(access_denied, "requests refused for lack of a privilege")          \
  X(tls_connections, "TLS handshakes completed")                        \
  X(tls_handshake_failures, "TLS handshakes failed or timed out")       \
  X(tls_refused, "plaintext TCP connections refused by require_tls")      \
  X(buffer_memory_closes, "connections closed because all buffers together were over max_buffer_memory") \
  X(mc_cmd_get, "memcached keys asked for (get, gets, mg; a range counts its rows)") \
  X(mc_get_hits, "memcached keys found (live rows)")                   \
  X(mc_get_misses, "memcached keys not found or expired")              \
  X(mc_get_expired, "memcached keys asked for whose row had expired (also counted as misses)") \
  X(mc_cmd_set, "memcached storage commands (set, add, replace, append, prepend, cas, ms; binary too), stored or not") \
  X(mc_total_items, "memcached items stored (set, add, replace, append, prepend, cas, ms that stored)") \
  X(mc_cmd_touch, "memcached touches (touch, gat, gats, binary touch/gat, an mg with T that found its item)") \
  X(mc_touch_hits, "memcached touches of a live item")                  \
  X(mc_touch_misses, "memcached touches of a missing item")             \
  X(mc_cas_hits, "memcached compare-and-swap stores that matched")      \
  X(mc_cas_badval, "memcached compare-and-swap stores refused: the item changed") \
  X(mc_cas_misses, "memcached compare-and-swap stores of a missing item") \
  X(mc_delete_hits, "memcached deletes of a live item")                 \
  X(mc_delete_misses, "memcached deletes of a missing item")            \
  X(mc_incr_hits, "memcached increments of a live item")                \
  X(mc_incr_misses, "memcached increments of a missing item")           \
  X(mc_decr_hits, "memcached decrements of a live item")                \
  X(mc_decr_misses, "memcached decrements of a missing item")           \
  X(mc_cmd_flush, "memcached flush_all commands that flushed")          \
  X(mc_store_too_large, "memcached stores refused for the item size (tablesocket_mc_max_value_size)") \
  X(bytes_received, "bytes of requests received from clients (both protocols; decrypted bytes over TLS)") \
  X(bytes_sent, "bytes of replies sent to clients (both protocols; before TLS encryption)")

struct Counters {
#define TS_DECLARE_COUNTER(name, desc) std::atomic<uint64_t> name{0};
  TABLESOCKET_COUNTERS(TS_DECLARE_COUNTER)
#undef TS_DECLARE_COUNTER
  std::atomic<int64_t> connections{0};  // currently open
  std::atomic<int64_t> open_tables{0};  // currently held open by this worker

  /* Request executions, a parked request's retries and a streamed get's parts included: how the
     worker tells that a connection's turn ran a request (not a status variable). */
  std::atomic<uint64_t> executions{0};

  void add(std::atomic<uint64_t> &c, uint64_t n = 1) { c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed); }
  /* A request of kind `kind` (requests_find, ...) executes: counted once per request, not again
     when it runs again (retry: a parked request retried, a get going on with its next part). */
  void count_request(std::atomic<uint64_t> &kind, bool retry) {
    add(executions);
    if (!retry) add(kind);
  }
} __attribute__((aligned(64)));

/* Adds c's counts (and its current connections and open tables) to out. */
inline void add_counters(Counters &out, const Counters &c) {
#define TS_SUM(name, desc) out.name.fetch_add(c.name.load(std::memory_order_relaxed), std::memory_order_relaxed);
  TABLESOCKET_COUNTERS(TS_SUM)
#undef TS_SUM
  out.connections.fetch_add(c.connections.load(std::memory_order_relaxed), std::memory_order_relaxed);
  out.open_tables.fetch_add(c.open_tables.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

/* Every worker's counters summed: what a protocol's own statistics report
   (memcached's "stats"). The network layer's Server implements it. */
class Counters_source {
 public:
  virtual void sum_counters(Counters &out) const = 0;

 protected:
  ~Counters_source() = default;
};

}  // namespace tablesocket
#endif
