// Pieces shared by the event-loop engines of ts-loadgen: the byte-stream engine (runner.cc: hs,
// mc-text, mc-meta, resp) and the SQL engine (sql.cc: MariaDB prepared statements through
// libmariadb's non-blocking API).
#ifndef TS_LOADGEN_ENGINE_H
#define TS_LOADGEN_ENGINE_H

#include <sys/socket.h>
#include <time.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>

#include "config.h"
#include "histogram.h"

namespace loadgen {

// Set by SIGINT/SIGTERM: every loop stops at its next iteration.
extern std::atomic<bool> g_stop;

inline uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

inline void sleep_until_ns(uint64_t t) {
  timespec ts;
  ts.tv_sec = time_t(t / 1000000000ull);
  ts.tv_nsec = long(t % 1000000000ull);
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
    if (g_stop.load(std::memory_order_relaxed)) return;
  }
}

// The first few problems are printed, the rest only counted.
class Diag {
 public:
  explicit Diag(uint32_t budget) : budget_(budget) {}
  void report(const char *kind, const char *msg) {
    std::lock_guard<std::mutex> g(mu_);
    if (printed_ >= budget_) return;
    ++printed_;
    std::fprintf(stderr, "ts-loadgen: %s: %s\n", kind, msg);
    if (printed_ == budget_) std::fprintf(stderr, "ts-loadgen: (further problems are only counted)\n");
  }

 private:
  std::mutex mu_;
  uint32_t budget_;
  uint32_t printed_ = 0;
};

// A resolved loopback address.
struct Target {
  sockaddr_storage addr{};
  socklen_t len = 0;
  int family = 0;
  std::string text;     // "127.0.0.1:9998", "[::1]:9998"
  std::string address;  // "127.0.0.1", "::1"
  uint16_t port = 0;
};

struct Stats {
  uint64_t ops = 0;          // measured replies
  uint64_t all_replies = 0;  // including warm-up
  uint64_t ok = 0, misses = 0, errors = 0, mismatches = 0;
  uint64_t conn_errors = 0;  // connections lost (protocol errors, resets, stalls) - part of errors
  uint64_t reconnects = 0;   // --reconnect: connections closed and opened anew
  uint64_t reads = 0, writes = 0, bytes_in = 0, bytes_out = 0;
  uint64_t last_counted_ns = 0;
  Histogram hist;

  void merge(const Stats &o) {
    ops += o.ops;
    all_replies += o.all_replies;
    ok += o.ok;
    misses += o.misses;
    errors += o.errors;
    mismatches += o.mismatches;
    conn_errors += o.conn_errors;
    reconnects += o.reconnects;
    reads += o.reads;
    writes += o.writes;
    bytes_in += o.bytes_in;
    bytes_out += o.bytes_out;
    if (o.last_counted_ns > last_counted_ns) last_counted_ns = o.last_counted_ns;
    hist.merge(o.hist);
  }
};

struct Schedule {
  uint64_t t_start, t_measure, t_end;  // t_end: UINT64_MAX in count mode
  bool count_mode;
};

// One event-loop thread with its connections.
class Worker_base {
 public:
  virtual ~Worker_base() = default;
  // Opens (blocking, with any protocol set-up) connection number id and adds it to this worker.
  virtual bool add_connection(uint32_t id, const Target &t, std::string *err) = 0;
  // Runs until the schedule ends, the quota is done, every connection is lost, or g_stop.
  virtual void run() = 0;

  // Count mode: how many measured requests this worker issues. Load/insert: key sequence.
  void set_quota(uint64_t quota) { quota_ = quota; }
  void set_sequence(uint64_t first, uint64_t stride) {
    seq_next_ = first;
    seq_stride_ = stride;
  }
  const Stats &stats() const { return st_; }

  // Progress counter read by the main thread (relaxed).
  std::atomic<uint64_t> replies_seen{0};

 protected:
  uint64_t quota_ = 0;
  uint64_t issued_counted_ = 0;
  uint64_t seq_next_ = 1, seq_stride_ = 1;
  Stats st_;
};

// The SQL engine (sql.cc); nullptr with *err set when ts-loadgen was built without libmariadb.
std::unique_ptr<Worker_base> make_sql_worker(const Config &cfg, uint32_t index, const Schedule &sched, Diag &diag,
                                             std::string *err);
// Once per process, before the first SQL connection (mysql_library_init).
bool sql_library_init(std::string *err);
// Whether this build has the SQL engine.
bool sql_available();

}  // namespace loadgen
#endif
