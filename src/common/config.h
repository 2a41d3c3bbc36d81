/* Typed configuration, validated from the system variables at plugin init (plugin/ fills it).
   Every other layer reads limits from here; nothing keeps its own defaults. The Live<> fields are
   the dynamic system variables: SET GLOBAL stores the new value into the running server's
   Config, and the next request (or timer check) that reads the field uses it. */
#ifndef TABLESOCKET_COMMON_CONFIG_H
#define TABLESOCKET_COMMON_CONFIG_H

#include <sched.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/live.h"

namespace tablesocket {

struct Config {
  std::string address = "127.0.0.1";
  unsigned hs_port = 9998;      // read-only HandlerSocket listener; 0 = disabled
  unsigned hs_port_wr = 9999;   // read/write HandlerSocket listener; 0 = disabled
  unsigned mc_port = 11211;     // memcached listener; 0 = disabled
  std::string mc_socket;        // memcached on a unix socket too ("" = no)
  unsigned server_sql_port = 0;     // the server's own SQL listener (port, socket): never taken
  std::string server_sql_socket;
  std::string mc_config_schema = "innodb_memcache";  // where the containers table lives
  Live<unsigned> mc_max_range_rows = 1000;  // rows one range get (get @>k) returns at most
  Live<size_t> mc_max_value_size = 1 << 20; // largest memcached item value
  unsigned threads = 0;         // epoll worker threads; 0: default_worker_threads() (resolved at plugin init)
  unsigned backlog = 1024;
  Live<unsigned> max_connections = 10000;
  unsigned max_connections_per_host = 0;  // TCP connections from one client address; 0 = no limit
  Live<unsigned> idle_timeout_s = 600;        // HandlerSocket connections; a request's arrival on any; 0 = never
  Live<unsigned> mc_idle_timeout_s = 0;       // memcached connections (0 = never, as memcached)
  Live<size_t> max_request_size = 1 << 20;    // one request line
  Live<unsigned> max_tokens = 10000;          // tokens in one request line
  Live<unsigned> max_open_indexes = 1000;     // per connection
  Live<size_t> max_output_buffer = 16 << 20;  // unsent reply bytes per connection before the connection is closed
  Live<size_t> output_high_water = 1 << 20;   // stop executing a connection's requests above this
  Live<uint64_t> max_buffer_memory = uint64_t(1) << 30;  // all connections' buffers together
  Live<unsigned> max_requests_per_batch = 256;  // per connection per batch (fairness)
  Live<unsigned> max_batch_rows = 100000;       // rows a batch examines before the rest waits for the next batch
  Live<unsigned> max_turn_rows = 1000;          // rows one connection's requests examine before the others get a turn
  bool commit_overlap = true;             // commit a written batch on a commit thread while the next one runs
  Live<unsigned> commit_rejoin_wait_us = 100;   // a batch waits at most this long, from its first write, for the depth-1 writers a commit answered
  Live<unsigned> ddl_check_interval_ms = 20;  // how often an idle worker looks for DDL waiting on its tables
  Live<unsigned> lock_wait_timeout_ms = 50000;  // how long a request waits for a metadata or row lock before an error
  Live<unsigned> lock_queue_after_ms = 20;  // a write parked on a row lock this long waits in InnoDB's queue instead
  Live<unsigned> lock_queue_sessions = 4;   // per worker: sessions that wait in InnoDB's lock queue at once (0: none)
  std::string charset = "utf8mb4";        // character set of values sent and received
  std::string plain_secret;     // HandlerSocket-compatible `A 1 <secret>` on the read port ("" = none)
  std::string plain_secret_wr;  // the same on the read/write port

  /* Accounts and privileges (docs/security.md). */
  bool require_auth = false;         // unauthenticated connections may do nothing but log in
  std::string anonymous_account;     // 'user'@'host' unauthenticated connections act as ("" = none)
  bool allow_cleartext_passwords = false;  // cleartext logins over unencrypted TCP
  Live<unsigned> privilege_check_interval_ms = 1000;  // cached privilege decisions live at most this long
  Live<unsigned> max_user_connections = 0;  // per account, all protocols together; 0 = unlimited
  Live<unsigned> auth_log_interval_s = 10;  // failed logins are logged at most once per interval (with a count)
  Live<unsigned> login_timeout_s = 30;      // require_auth: seconds to log in before the connection is closed

  /* TLS (net/tls): empty paths fall back to the server's own ssl_cert/ssl_key/ssl_ca. */
  std::string ssl_cert, ssl_key, ssl_ca, ssl_capath, ssl_cipher, ssl_crl, ssl_crlpath;
  unsigned tls_versions = 0;  // the server's tls_version bits (4: TLS 1.2, 8: TLS 1.3); 0 = both
  bool require_tls = false;          // refuse TCP connections that do not start a TLS handshake
  Live<unsigned> tls_handshake_timeout_s = 10;  // a TLS handshake not completed this long after connect is closed
};

/* The default number of worker threads: one per CPU this process may run on (its affinity mask:
   taskset, a cgroup cpuset, numactl), at least 1 and at most 64. One worker per CPU keeps every
   connection's requests on a thread that is actually running; more workers than CPUs only add
   context switches and delay (a ready worker waits for a time slice). */
inline unsigned default_worker_threads() {
  cpu_set_t set;
  CPU_ZERO(&set);
  int n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 2;
  if (n < 1) n = 1;
  return unsigned(n > 64 ? 64 : n);
}

}  // namespace tablesocket
#endif
