/* Plugin declaration: system variables (and the TLS reload one of them triggers), status variables,
   init/deinit. Nothing else lives here. */
#include <mysql/plugin.h>

#include <strings.h>

#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>

#include "common/config.h"
#include "common/stats.h"
#include "net/server.h"
#include "store/info_schema.h"
#include "store/server_log.h"
#include "store/server_settings.h"

namespace {

using tablesocket::Config;
using tablesocket::Counters;
using tablesocket::Server;

Server *g_server = nullptr;
/* Readers of g_server on other threads (SHOW STATUS, INFORMATION_SCHEMA) hold it shared; deinit
   takes it exclusively to take the server away before stopping it. */
std::shared_mutex g_server_lock;

/* ---- System variables ----------------------------------------------------------------------
   The PLUGIN_VAR_READONLY ones are read once into Config at init. The others are dynamic: SET
   GLOBAL stores the new value here and apply_live_settings() copies every dynamic one into the
   running server's Config (its Live<> fields), where the next request or timer check reads it. */
char *sv_address;
unsigned sv_hs_port, sv_hs_port_wr, sv_threads, sv_backlog, sv_max_connections, sv_idle_timeout;
unsigned sv_max_connections_per_host;
unsigned sv_max_request_size, sv_max_tokens, sv_max_open_indexes, sv_max_output_buffer;
unsigned long long sv_max_buffer_memory;
unsigned sv_output_high_water, sv_max_requests_per_batch, sv_max_batch_rows, sv_max_turn_rows, sv_ddl_check_interval, sv_lock_wait_timeout;
unsigned sv_commit_rejoin_wait;
unsigned sv_lock_queue_after, sv_lock_queue_sessions;
char *sv_plain_secret, *sv_plain_secret_wr, *sv_character_set;
unsigned sv_mc_port, sv_mc_max_range_rows, sv_mc_max_value_size, sv_mc_idle_timeout;
char *sv_mc_socket, *sv_mc_config_schema;
my_bool sv_require_auth, sv_allow_cleartext_passwords, sv_require_tls, sv_commit_overlap, sv_galera_writes;
char *sv_anonymous_account, *sv_ssl_cert, *sv_ssl_key, *sv_ssl_ca, *sv_ssl_capath, *sv_ssl_cipher;
char *sv_ssl_crl, *sv_ssl_crlpath;
my_bool sv_tls_reload;
unsigned sv_privilege_check_interval, sv_max_user_connections, sv_auth_log_interval, sv_login_timeout;
unsigned sv_tls_handshake_timeout;

const Config kDefaults;

/* The dynamic variables' values into c (at init, and after every SET GLOBAL of one of them). */
void apply_live_settings(Config &c) {
  c.mc_max_range_rows = sv_mc_max_range_rows;
  /* A value must fit one reply (tablesocket_max_output_buffer): none is stored that could not be
     read back. */
  c.mc_max_value_size = std::min<size_t>(sv_mc_max_value_size, std::max<size_t>(1024, sv_max_output_buffer - 4096));
  c.mc_idle_timeout_s = sv_mc_idle_timeout;
  c.max_connections = sv_max_connections;
  c.idle_timeout_s = sv_idle_timeout;
  c.max_request_size = sv_max_request_size;
  c.max_tokens = sv_max_tokens;
  c.max_open_indexes = sv_max_open_indexes;
  c.max_output_buffer = sv_max_output_buffer;
  /* Pausing a connection's requests above the most it may hold would never happen: it would be
     closed at max_output_buffer first. */
  c.output_high_water = std::min(sv_output_high_water, sv_max_output_buffer);
  c.max_buffer_memory = sv_max_buffer_memory;
  c.max_requests_per_batch = sv_max_requests_per_batch;
  c.max_batch_rows = sv_max_batch_rows;
  c.max_turn_rows = sv_max_turn_rows;
  c.commit_rejoin_wait_us = sv_commit_rejoin_wait;
  c.ddl_check_interval_ms = sv_ddl_check_interval;
  c.lock_wait_timeout_ms = sv_lock_wait_timeout;
  c.lock_queue_after_ms = sv_lock_queue_after;
  c.lock_queue_sessions = sv_lock_queue_sessions;
  c.privilege_check_interval_ms = sv_privilege_check_interval;
  c.max_user_connections = sv_max_user_connections;
  c.auth_log_interval_s = sv_auth_log_interval;
  c.login_timeout_s = sv_login_timeout;
  c.tls_handshake_timeout_s = sv_tls_handshake_timeout;
}

/* The server calls these with LOCK_global_system_variables held: one SET GLOBAL at a time. */
void refresh_live_settings() {
  std::shared_lock<std::shared_mutex> g(g_server_lock);
  if (g_server) apply_live_settings(g_server->live_config());
}
void update_live_uint(MYSQL_THD, struct st_mysql_sys_var *, void *var_ptr, const void *save) {
  *static_cast<unsigned *>(var_ptr) = *static_cast<const unsigned *>(save);
  refresh_live_settings();
}
void update_live_ull(MYSQL_THD, struct st_mysql_sys_var *, void *var_ptr, const void *save) {
  *static_cast<unsigned long long *>(var_ptr) = *static_cast<const unsigned long long *>(save);
  refresh_live_settings();
}

MYSQL_SYSVAR_STR(address, sv_address, PLUGIN_VAR_READONLY | PLUGIN_VAR_MEMALLOC,
                 "Address the tablesocket listeners bind to (an IPv4 or IPv6 literal or a host name). "
                 "Loopback by default; set it explicitly to accept remote clients.",
                 nullptr, nullptr, "127.0.0.1");
MYSQL_SYSVAR_UINT(hs_port, sv_hs_port, PLUGIN_VAR_READONLY,
                  "TCP port of the read-only HandlerSocket-protocol listener (HandlerSocket's "
                  "handlersocket_port). 0 disables it.",
                  nullptr, nullptr, kDefaults.hs_port, 0, 65535, 0);
MYSQL_SYSVAR_UINT(hs_port_wr, sv_hs_port_wr, PLUGIN_VAR_READONLY,
                  "TCP port of the read/write HandlerSocket-protocol listener (HandlerSocket's "
                  "handlersocket_port_wr). 0 disables it.",
                  nullptr, nullptr, kDefaults.hs_port_wr, 0, 65535, 0);
MYSQL_SYSVAR_UINT(mc_port, sv_mc_port, PLUGIN_VAR_READONLY,
                  "TCP port of the memcached-protocol listener (text, meta and binary commands), 11211 as MySQL's "
                  "InnoDB memcached plugin. 0 disables it.",
                  nullptr, nullptr, kDefaults.mc_port, 0, 65535, 0);
MYSQL_SYSVAR_STR(mc_socket, sv_mc_socket, PLUGIN_VAR_READONLY | PLUGIN_VAR_MEMALLOC,
                 "Path of a unix socket on which the memcached protocol is also served. Empty: none.",
                 nullptr, nullptr, "");
MYSQL_SYSVAR_STR(mc_config_schema, sv_mc_config_schema, PLUGIN_VAR_READONLY | PLUGIN_VAR_MEMALLOC,
                 "Database holding the memcached configuration tables (containers, config_options), "
                 "shaped like MySQL's innodb_memcache schema (see sql/memcached_schema.sql).",
                 nullptr, nullptr, "innodb_memcache");
MYSQL_SYSVAR_UINT(mc_max_range_rows, sv_mc_max_range_rows, PLUGIN_VAR_RQCMDARG,
                  "Most rows one memcached range get (get @>key, @<key, @>=a@<b) returns.",
                  nullptr, update_live_uint, kDefaults.mc_max_range_rows, 1, 1000000, 0);
MYSQL_SYSVAR_UINT(mc_max_value_size, sv_mc_max_value_size, PLUGIN_VAR_RQCMDARG,
                  "Largest memcached item value in bytes (memcached's -I). A larger set is refused "
                  "with SERVER_ERROR object too large for cache before its data is buffered. The "
                  "limit applied is at most tablesocket_max_output_buffer less 4 KiB (a value must "
                  "fit a reply); 'stats settings' shows it as item_size_max.",
                  nullptr, update_live_uint, unsigned(kDefaults.mc_max_value_size), 1024, 1U << 30, 0);
MYSQL_SYSVAR_UINT(mc_idle_timeout, sv_mc_idle_timeout, PLUGIN_VAR_RQCMDARG,
                  "Seconds a memcached connection may stay idle (no request, no pending reply) before "
                  "it is closed. 0 (the default): never, as memcached (whose clients keep pooled "
                  "connections and may not expect them closed). A request that takes longer than "
                  "tablesocket_idle_timeout to arrive still closes the connection.",
                  nullptr, update_live_uint, kDefaults.mc_idle_timeout_s, 0, 31536000, 0);
MYSQL_SYSVAR_UINT(threads, sv_threads, PLUGIN_VAR_READONLY,
                  "Number of epoll worker threads; each owns its connections, a THD and its open tables. "
                  "0 (the default): one per CPU the server may run on (its CPU affinity mask, so a "
                  "server pinned with taskset or a cgroup cpuset gets as many workers as CPUs), at "
                  "most 64; the variable then shows the number chosen.",
                  nullptr, nullptr, kDefaults.threads, 0, 256, 0);
MYSQL_SYSVAR_UINT(backlog, sv_backlog, PLUGIN_VAR_READONLY,
                  "listen() backlog of each listener.", nullptr, nullptr, kDefaults.backlog, 1, 65535, 0);
MYSQL_SYSVAR_UINT(max_connections, sv_max_connections, PLUGIN_VAR_RQCMDARG,
                  "Maximum number of simultaneous client connections over all tablesocket listeners. "
                  "A client over the limit gets '1\\t1\\ttoomanyconnections' and is closed.",
                  nullptr, update_live_uint, kDefaults.max_connections, 1, 1000000, 0);
MYSQL_SYSVAR_UINT(max_connections_per_host, sv_max_connections_per_host, PLUGIN_VAR_READONLY,
                  "Maximum number of simultaneous TCP connections from one client address, over all "
                  "tablesocket listeners, so that one host cannot take every one of "
                  "tablesocket_max_connections (unix-socket clients are not counted). A client over it "
                  "gets '1\\t1\\ttoomanyconnections' (memcached: 'ERROR Too many open "
                  "connections from this address') and is closed. 0 = no limit.",
                  nullptr, nullptr, kDefaults.max_connections_per_host, 0, 1000000, 0);
MYSQL_SYSVAR_UINT(idle_timeout, sv_idle_timeout, PLUGIN_VAR_RQCMDARG,
                  "Seconds a HandlerSocket connection may stay idle (no request, no pending reply) "
                  "before it is closed (memcached ones: tablesocket_mc_idle_timeout); also the longest "
                  "a request may take to arrive once its first byte has, on either protocol (a client "
                  "trickling a request in a byte at a time is closed too). 0 disables both.",
                  nullptr, update_live_uint, kDefaults.idle_timeout_s, 0, 31536000, 0);
MYSQL_SYSVAR_UINT(max_request_size, sv_max_request_size, PLUGIN_VAR_RQCMDARG,
                  "Maximum size in bytes of one request line: a HandlerSocket request, or a memcached "
                  "get/gets line (memcached's other command lines stop at 2048 bytes, as in memcached). "
                  "A longer line closes the connection (HandlerSocket answers an error first); "
                  "nothing is allocated for it beforehand.",
                  nullptr, update_live_uint, unsigned(kDefaults.max_request_size), 64, 1U << 30, 0);
MYSQL_SYSVAR_UINT(max_tokens, sv_max_tokens, PLUGIN_VAR_RQCMDARG,
                  "Maximum number of TAB-separated tokens (values, IN values, filters) in one request "
                  "line; bounds the per-request value arrays. Over it: error reply, then close.",
                  nullptr, update_live_uint, kDefaults.max_tokens, 8, 10000000, 0);
MYSQL_SYSVAR_UINT(max_open_indexes, sv_max_open_indexes, PLUGIN_VAR_RQCMDARG,
                  "Maximum number of index ids one connection may have open at once (P requests); a "
                  "memcached connection that has used more containers than this gives them up between "
                  "requests and reopens them on use.",
                  nullptr, update_live_uint, kDefaults.max_open_indexes, 1, 1000000, 0);
MYSQL_SYSVAR_UINT(max_output_buffer, sv_max_output_buffer, PLUGIN_VAR_RQCMDARG,
                  "Maximum bytes of replies held for one connection. A single reply larger than this "
                  "fails with '1\\t1\\ttoolarge'; a client that stops reading is closed at this size.",
                  nullptr, update_live_uint, unsigned(kDefaults.max_output_buffer), 4096, 1U << 31, 0);
MYSQL_SYSVAR_UINT(output_high_water, sv_output_high_water, PLUGIN_VAR_RQCMDARG,
                  "When a connection has this many unsent reply bytes, its further requests wait "
                  "until the client reads (a slow reader never holds up other clients).",
                  nullptr, update_live_uint, unsigned(kDefaults.output_high_water), 1024, 1U << 31, 0);
MYSQL_SYSVAR_ULONGLONG(max_buffer_memory, sv_max_buffer_memory, PLUGIN_VAR_RQCMDARG,
                  "Bytes the input and output buffers of all connections together may hold. When a "
                  "connection's buffers grow past 256 KiB while the total is over this limit, that "
                  "connection is closed (counted in Tablesocket_buffer_memory_closes), so that many "
                  "clients each sending most of a maximal request, or never reading their replies, "
                  "cannot exhaust the server's memory. Ordinary connections stay well under 256 KiB.",
                  nullptr, update_live_ull, kDefaults.max_buffer_memory, 16ULL << 20, ~0ULL, 0);
MYSQL_SYSVAR_UINT(max_requests_per_batch, sv_max_requests_per_batch, PLUGIN_VAR_RQCMDARG,
                  "Maximum pipelined requests executed from one connection in one batch, so that one "
                  "deep pipeline cannot starve the other connections of its worker.",
                  nullptr, update_live_uint, kDefaults.max_requests_per_batch, 1, 1000000, 0);
MYSQL_SYSVAR_UINT(max_batch_rows, sv_max_batch_rows, PLUGIN_VAR_RQCMDARG,
                  "Rows a worker's batch may examine (read from an index, whether returned, filtered "
                  "out or skipped by an offset) before the requests still waiting in it are deferred to "
                  "the next batch: the batch commits and DDL gets its turn. Bounds how long one client's "
                  "pipelined scans hold up the other clients of its worker; a single request is never "
                  "cut short.",
                  nullptr, update_live_uint, kDefaults.max_batch_rows, 100, 1U << 31, 0);
MYSQL_SYSVAR_UINT(max_turn_rows, sv_max_turn_rows, PLUGIN_VAR_RQCMDARG,
                  "Rows one connection's requests may examine (read from an index, whether returned, "
                  "filtered out or skipped by an offset) before the worker's other connections get "
                  "their turn; its remaining requests run on the worker's next pass. Bounds how long a "
                  "client pipelining scans delays the others to about one such turn; a single request is "
                  "never cut short.",
                  nullptr, update_live_uint, kDefaults.max_turn_rows, 1, 1U << 31, 0);
MYSQL_SYSVAR_BOOL(commit_overlap, sv_commit_overlap, PLUGIN_VAR_READONLY,
                  "ON: a worker hands the commit of a batch that wrote (InnoDB tables only) to its own "
                  "commit thread and runs the next batch meanwhile, on a second server session, so its "
                  "reads and its next writes do not wait for the previous commit's fsync (or binary "
                  "log sync); replies to the writes are still sent only once their commit is durable, "
                  "and batches still commit in order. OFF: the worker commits each batch itself before "
                  "it serves the next one.",
                  nullptr, nullptr, kDefaults.commit_overlap);
MYSQL_SYSVAR_UINT(commit_rejoin_wait, sv_commit_rejoin_wait, PLUGIN_VAR_RQCMDARG,
                  "Microseconds a batch that wrote waits at most, counted from its first write, "
                  "for the writers a commit just answered, each of whom sent one write and waited "
                  "for its answer (depth 1), to send their next write: they then share one commit "
                  "instead of splitting into two groups that take turns at the commit (half the rows "
                  "per fsync). It ends as soon as the last of them has written. Reads are served "
                  "meanwhile. 0: a batch waits for no one.",
                  nullptr, update_live_uint, kDefaults.commit_rejoin_wait_us, 0, 100000, 0);
MYSQL_SYSVAR_BOOL(galera_writes, sv_galera_writes, PLUGIN_VAR_READONLY,
                  "On a Galera cluster node (wsrep_on): OFF (the default) refuses writes with an error, "
                  "since they would otherwise commit on this node only; ON makes each batch that writes "
                  "a wsrep transaction, certified and replicated in the cluster's order, as an SQL "
                  "transaction is (new, experimental). Without Galera it has no effect.",
                  nullptr, nullptr, false);
MYSQL_SYSVAR_UINT(ddl_check_interval, sv_ddl_check_interval, PLUGIN_VAR_RQCMDARG,
                  "Milliseconds between checks for DDL or FLUSH TABLES waiting on a table a worker "
                  "holds open; the table is then closed so the DDL proceeds. Bounds the extra wait DDL "
                  "sees from tablesocket. Also bounds how long a batch that wrote stays open, taking more "
                  "requests, while the previous batch's commit runs (tablesocket_commit_overlap); after it, "
                  "the open batch takes no more writes (they wait for the next batch) until that "
                  "commit is done, and reads go on.",
                  nullptr, update_live_uint, kDefaults.ddl_check_interval_ms, 1, 1000, 0);
MYSQL_SYSVAR_UINT(lock_wait_timeout, sv_lock_wait_timeout, PLUGIN_VAR_RQCMDARG,
                  "Milliseconds a request waits for a metadata lock (DDL) or a row lock (another "
                  "transaction) before it fails with '1\\t1\\tlock_wait_timeout'. The waiting request "
                  "is retried every 1 to 8 milliseconds (a write on a row lock then waits in InnoDB's lock "
                  "queue, see tablesocket_lock_queue_after); its worker keeps serving other clients meanwhile. "
                  "Also how long a commit on the commit thread waits for the backup lock (BACKUP STAGE "
                  "BLOCK_COMMIT, FLUSH TABLES WITH READ LOCK), as SQL's COMMIT waits lock_wait_timeout; "
                  "a commit that waits longer fails and its writers are disconnected unanswered.",
                  nullptr, update_live_uint, kDefaults.lock_wait_timeout_ms, 1, 31536000, 0);
MYSQL_SYSVAR_UINT(lock_queue_after, sv_lock_queue_after, PLUGIN_VAR_RQCMDARG,
                  "Milliseconds a write waits for a row lock another transaction holds, retried by its "
                  "worker (which only ever tries the lock), before it is handed to a session of its own "
                  "that waits in InnoDB's lock queue as an SQL statement does: it then gets the row in "
                  "its turn behind SQL transactions that hand the row to each other back to back, which "
                  "retries never would. That session waits at most a second at a time (DDL on the "
                  "table waits for it about that long), commits the write on its own, and the request "
                  "is answered as usual. 0: at the first conflict.",
                  nullptr, update_live_uint, kDefaults.lock_queue_after_ms, 0, 3600000, 0);
MYSQL_SYSVAR_UINT(lock_queue_sessions, sv_lock_queue_sessions, PLUGIN_VAR_RQCMDARG,
                  "Per worker, how many writes may wait in InnoDB's lock queue at once, each on a "
                  "session and thread of its own (see tablesocket_lock_queue_after); more waiting "
                  "writes keep being retried by the worker. 0: never queue (retries only).",
                  nullptr, update_live_uint, kDefaults.lock_queue_sessions, 0, 256, 0);
MYSQL_SYSVAR_STR(character_set, sv_character_set, PLUGIN_VAR_READONLY | PLUGIN_VAR_MEMALLOC,
                 "Character set of the values clients send and receive (like character_set_client and "
                 "character_set_results of a SQL connection): values are converted to and from each "
                 "column's character set. 'binary' stores and returns bytes unchanged, as "
                 "HandlerSocket did.",
                 nullptr, nullptr, "utf8mb4");
/* Options only (my.cnf, the command line), not system variables: SHOW VARIABLES and
   information_schema would give the secret to every SQL account, and with it every table. */
MYSQL_SYSVAR_STR(plain_secret, sv_plain_secret, PLUGIN_VAR_READONLY | PLUGIN_VAR_MEMALLOC | PLUGIN_VAR_NOSYSVAR,
                 "HandlerSocket-compatible shared secret for the read port ('A 1 <secret>'), compared "
                 "in constant time. Empty: no authentication on that port. An option only (my.cnf): "
                 "not shown by SHOW VARIABLES.",
                 nullptr, nullptr, "");
MYSQL_SYSVAR_STR(plain_secret_wr, sv_plain_secret_wr, PLUGIN_VAR_READONLY | PLUGIN_VAR_MEMALLOC | PLUGIN_VAR_NOSYSVAR,
                 "HandlerSocket-compatible shared secret for the read/write port. Empty: none. An "
                 "option only (my.cnf): not shown by SHOW VARIABLES.",
                 nullptr, nullptr, "");

MYSQL_SYSVAR_BOOL(require_auth, sv_require_auth, PLUGIN_VAR_READONLY,
                  "When ON, a connection that has not logged in with a MariaDB account (HandlerSocket "
                  "'A 2'/'A 3'/'A 4', memcached ASCII authentication, or a TLS client certificate) may do "
                  "nothing but log in, unless tablesocket_anonymous_account maps it to an account. When "
                  "OFF, such connections act as tablesocket_anonymous_account if set, else without "
                  "privilege checks (HandlerSocket's behaviour).",
                  nullptr, nullptr, false);
MYSQL_SYSVAR_STR(anonymous_account, sv_anonymous_account, PLUGIN_VAR_READONLY | PLUGIN_VAR_MEMALLOC,
                 "An account ('user'@'host' or user@host) whose privileges connections that did not "
                 "log in get, e.g. to keep legacy clients working with restricted rights while "
                 "tablesocket_require_auth is ON. Empty: none.",
                 nullptr, nullptr, "");
MYSQL_SYSVAR_BOOL(allow_cleartext_passwords, sv_allow_cleartext_passwords, PLUGIN_VAR_READONLY,
                  "Allow logins that send the password itself (HandlerSocket 'A 4', memcached ASCII "
                  "authentication) over TCP connections without TLS. Off: such logins are refused "
                  "unless the connection uses TLS or a unix socket; the challenge-response login "
                  "('A 2' + 'A 3') is always allowed.",
                  nullptr, nullptr, false);
MYSQL_SYSVAR_UINT(privilege_check_interval, sv_privilege_check_interval, PLUGIN_VAR_RQCMDARG,
                  "Milliseconds a connection's privilege decision for an open index (and its account's "
                  "global privileges and roles) is reused before it is checked again; a REVOKE or "
                  "DROP USER reaches open connections within this bound.",
                  nullptr, update_live_uint, kDefaults.privilege_check_interval_ms, 0, 3600000, 0);
MYSQL_SYSVAR_UINT(max_user_connections, sv_max_user_connections, PLUGIN_VAR_RQCMDARG,
                  "Most connections one account may have logged in at once over all tablesocket "
                  "ports (the account's own MAX_USER_CONNECTIONS also applies). 0: no limit.",
                  nullptr, update_live_uint, kDefaults.max_user_connections, 0, 1000000, 0);
MYSQL_SYSVAR_UINT(auth_log_interval, sv_auth_log_interval, PLUGIN_VAR_RQCMDARG,
                  "Failed logins are written to the error log at most once per this many seconds, "
                  "with the number suppressed in between (Tablesocket_auth_failures counts all).",
                  nullptr, update_live_uint, kDefaults.auth_log_interval_s, 1, 86400, 0);
MYSQL_SYSVAR_UINT(login_timeout, sv_login_timeout, PLUGIN_VAR_RQCMDARG,
                  "With tablesocket_require_auth ON, seconds a connection may stay without logging in "
                  "(and without an anonymous account applying) before it is closed, so idle "
                  "unauthenticated connections cannot hold connection slots. 0: only "
                  "tablesocket_idle_timeout applies.",
                  nullptr, update_live_uint, kDefaults.login_timeout_s, 0, 86400, 0);
MYSQL_SYSVAR_STR(ssl_cert, sv_ssl_cert, PLUGIN_VAR_READONLY | PLUGIN_VAR_MEMALLOC,
                 "PEM certificate for TLS on tablesocket's TCP ports. Empty: the server's ssl_cert.",
                 nullptr, nullptr, "");
MYSQL_SYSVAR_STR(ssl_key, sv_ssl_key, PLUGIN_VAR_READONLY | PLUGIN_VAR_MEMALLOC,
                 "PEM private key for tablesocket_ssl_cert. Empty: the server's ssl_key.",
                 nullptr, nullptr, "");
MYSQL_SYSVAR_STR(ssl_ca, sv_ssl_ca, PLUGIN_VAR_READONLY | PLUGIN_VAR_MEMALLOC,
                 "PEM CA bundle client certificates are verified against. Empty: the server's ssl_ca.",
                 nullptr, nullptr, "");
MYSQL_SYSVAR_STR(ssl_capath, sv_ssl_capath, PLUGIN_VAR_READONLY | PLUGIN_VAR_MEMALLOC,
                 "Directory of CA certificates (c_rehash layout). Empty: the server's ssl_capath.",
                 nullptr, nullptr, "");
MYSQL_SYSVAR_STR(ssl_cipher, sv_ssl_cipher, PLUGIN_VAR_READONLY | PLUGIN_VAR_MEMALLOC,
                 "OpenSSL cipher list for TLS 1.2 and older. Empty: the server's ssl_cipher, else "
                 "OpenSSL's defaults.",
                 nullptr, nullptr, "");
MYSQL_SYSVAR_STR(ssl_crl, sv_ssl_crl, PLUGIN_VAR_READONLY | PLUGIN_VAR_MEMALLOC,
                 "PEM certificate revocation list(s) client certificates are checked against (every "
                 "certificate of the chain). Empty (with tablesocket_ssl_crlpath): the server's ssl_crl, "
                 "when the CA is the server's too.",
                 nullptr, nullptr, "");
MYSQL_SYSVAR_STR(ssl_crlpath, sv_ssl_crlpath, PLUGIN_VAR_READONLY | PLUGIN_VAR_MEMALLOC,
                 "Directory of certificate revocation lists (c_rehash layout). Empty (with "
                 "tablesocket_ssl_crl): the server's ssl_crlpath, when the CA is the server's too.",
                 nullptr, nullptr, "");
int check_tls_reload(MYSQL_THD, struct st_mysql_sys_var *, void *, struct st_mysql_value *);
void update_tls_reload(MYSQL_THD, struct st_mysql_sys_var *, void *, const void *) {}  // stays OFF
MYSQL_SYSVAR_BOOL(tls_reload, sv_tls_reload, PLUGIN_VAR_OPCMDARG | PLUGIN_VAR_NOCMDOPT,
                  "SET GLOBAL tablesocket_tls_reload = ON reads the TLS certificate, key, CA and CRL "
                  "files again: handshakes from then on use them, connections already encrypted keep "
                  "theirs. A file that cannot be used fails the SET with the reason and the previous "
                  "certificate stays in use. The server's FLUSH SSL does the same (within a second). "
                  "Always reads OFF.",
                  check_tls_reload, update_tls_reload, false);
MYSQL_SYSVAR_BOOL(require_tls, sv_require_tls, PLUGIN_VAR_READONLY,
                  "Refuse TCP connections that do not begin with a TLS handshake (unix sockets are "
                  "exempt). OFF: TLS is offered on every TCP port and detected from the first byte.",
                  nullptr, nullptr, false);

MYSQL_SYSVAR_UINT(tls_handshake_timeout, sv_tls_handshake_timeout, PLUGIN_VAR_RQCMDARG,
                  "Seconds a TCP connection has, from connect, to complete its TLS handshake; it is closed "
                  "after that (Tablesocket_tls_handshake_failures). With tablesocket_require_tls=ON, a "
                  "connection that sends nothing at all is closed after this time too.",
                  nullptr, update_live_uint, kDefaults.tls_handshake_timeout_s, 1, 3600, 0);

struct st_mysql_sys_var *system_variables[] = {
    MYSQL_SYSVAR(address), MYSQL_SYSVAR(hs_port), MYSQL_SYSVAR(hs_port_wr), MYSQL_SYSVAR(mc_port),
    MYSQL_SYSVAR(mc_socket), MYSQL_SYSVAR(mc_config_schema), MYSQL_SYSVAR(mc_max_range_rows),
    MYSQL_SYSVAR(mc_max_value_size), MYSQL_SYSVAR(mc_idle_timeout), MYSQL_SYSVAR(threads),
    MYSQL_SYSVAR(backlog), MYSQL_SYSVAR(max_connections), MYSQL_SYSVAR(max_connections_per_host), MYSQL_SYSVAR(idle_timeout),
    MYSQL_SYSVAR(max_request_size), MYSQL_SYSVAR(max_tokens), MYSQL_SYSVAR(max_open_indexes),
    MYSQL_SYSVAR(max_output_buffer), MYSQL_SYSVAR(output_high_water),
    MYSQL_SYSVAR(max_requests_per_batch), MYSQL_SYSVAR(max_batch_rows), MYSQL_SYSVAR(max_turn_rows), MYSQL_SYSVAR(commit_overlap), MYSQL_SYSVAR(commit_rejoin_wait), MYSQL_SYSVAR(galera_writes), MYSQL_SYSVAR(max_buffer_memory), MYSQL_SYSVAR(ddl_check_interval),
    MYSQL_SYSVAR(lock_wait_timeout), MYSQL_SYSVAR(lock_queue_after), MYSQL_SYSVAR(lock_queue_sessions), MYSQL_SYSVAR(character_set), MYSQL_SYSVAR(plain_secret),
    MYSQL_SYSVAR(plain_secret_wr), MYSQL_SYSVAR(require_auth), MYSQL_SYSVAR(anonymous_account),
    MYSQL_SYSVAR(allow_cleartext_passwords), MYSQL_SYSVAR(privilege_check_interval),
    MYSQL_SYSVAR(max_user_connections), MYSQL_SYSVAR(auth_log_interval), MYSQL_SYSVAR(login_timeout), MYSQL_SYSVAR(ssl_cert),
    MYSQL_SYSVAR(ssl_key), MYSQL_SYSVAR(ssl_ca), MYSQL_SYSVAR(ssl_capath), MYSQL_SYSVAR(ssl_cipher),
    MYSQL_SYSVAR(ssl_crl), MYSQL_SYSVAR(ssl_crlpath), MYSQL_SYSVAR(tls_reload),
    MYSQL_SYSVAR(require_tls), MYSQL_SYSVAR(tls_handshake_timeout),
    nullptr};

/* ---- Status variables: Tablesocket_<counter>, summed over workers on demand ----------------- */
struct Status_snapshot {
#define TS_COUNT(name, desc) +1
  static constexpr int kCounters = 0 TABLESOCKET_COUNTERS(TS_COUNT);
#undef TS_COUNT
  static constexpr int kEntries = kCounters + 2;
  st_mysql_show_var vars[kEntries + 1];
  long long values[kEntries];
};
static_assert(sizeof(Status_snapshot) <= SHOW_VAR_FUNC_BUFF_SIZE, "status snapshot must fit the show buffer");

int show_status(MYSQL_THD, st_mysql_show_var *var, void *buff, struct system_status_var *, enum enum_var_type) {
  Status_snapshot *s = new (buff) Status_snapshot;
  Counters sum;
  {
    std::shared_lock<std::shared_mutex> g(g_server_lock);
    if (g_server) g_server->sum_counters(sum);
  }
  int i = 0;
  auto put = [&](const char *name, long long v) {
    s->values[i] = v;
    s->vars[i].name = name;
    s->vars[i].value = &s->values[i];
    s->vars[i].type = SHOW_LONGLONG;
    ++i;
  };
#define TS_PUT(name, desc) put(#name, (long long)sum.name.load());
  TABLESOCKET_COUNTERS(TS_PUT)
#undef TS_PUT
  put("connections", (long long)sum.connections.load());
  put("open_tables", (long long)sum.open_tables.load());
  s->vars[i].name = nullptr;
  s->vars[i].value = nullptr;
  s->vars[i].type = SHOW_UNDEF;
  var->type = SHOW_ARRAY;
  var->value = s->vars;
  return 0;
}

st_mysql_show_var status_variables[] = {
    {"Tablesocket", reinterpret_cast<void *>(&show_status), SHOW_FUNC},
    {nullptr, nullptr, SHOW_UNDEF}};

/* ---- init / deinit -------------------------------------------------------------------------- */
Config config_from_sysvars() {
  Config c;
  c.address = sv_address ? sv_address : "";
  c.hs_port = sv_hs_port;
  c.hs_port_wr = sv_hs_port_wr;
  c.mc_port = sv_mc_port;
  c.mc_socket = sv_mc_socket ? sv_mc_socket : "";
  c.server_sql_port = tablesocket::server_sql_port();
  c.server_sql_socket = tablesocket::server_sql_socket();
  c.mc_config_schema = sv_mc_config_schema && *sv_mc_config_schema ? sv_mc_config_schema : "innodb_memcache";
  if (sv_threads == 0) sv_threads = tablesocket::default_worker_threads();
  c.threads = sv_threads;
  c.backlog = sv_backlog;
  c.max_connections_per_host = sv_max_connections_per_host;
  c.commit_overlap = sv_commit_overlap;
  tablesocket::set_galera_writes(sv_galera_writes);
  c.charset = sv_character_set && *sv_character_set ? sv_character_set : "utf8mb4";
  auto str = [](const char *v) { return std::string(v ? v : ""); };
  c.plain_secret = str(sv_plain_secret);
  c.plain_secret_wr = str(sv_plain_secret_wr);
  c.require_auth = sv_require_auth;
  c.anonymous_account = str(sv_anonymous_account);
  c.allow_cleartext_passwords = sv_allow_cleartext_passwords;
  c.ssl_cert = str(sv_ssl_cert);
  c.ssl_key = str(sv_ssl_key);
  c.ssl_ca = str(sv_ssl_ca);
  c.ssl_capath = str(sv_ssl_capath);
  c.ssl_cipher = str(sv_ssl_cipher);
  c.ssl_crl = str(sv_ssl_crl);
  c.ssl_crlpath = str(sv_ssl_crlpath);
  c.require_tls = sv_require_tls;
  apply_live_settings(c);
  return c;
}

/* Where tablesocket_ssl_* are empty, the server's own ssl_* apply, in pairs that belong together:
   certificate and key (tablesocket's pair if either is set, else the server's), CA file and CA
   directory likewise, the CRL file and directory only with the server's CA (another CA's CRLs
   would revoke nothing and fail every certificate), and the cipher list. The server's tls_version
   always applies. Returns where the certificate comes from, for the log. */
const char *apply_server_tls_defaults(Config &c) {
  const tablesocket::Server_tls_defaults d = tablesocket::server_tls_defaults();
  const char *origin = "tablesocket_ssl_cert and tablesocket_ssl_key";
  if (c.ssl_cert.empty() && c.ssl_key.empty()) {
    c.ssl_cert = d.cert;
    c.ssl_key = d.key;
    origin = "the server's ssl_cert and ssl_key";
  }
  if (c.ssl_ca.empty() && c.ssl_capath.empty()) {
    c.ssl_ca = d.ca;
    c.ssl_capath = d.capath;
    if (c.ssl_crl.empty() && c.ssl_crlpath.empty()) {
      c.ssl_crl = d.crl;
      c.ssl_crlpath = d.crlpath;
    }
  }
  if (c.ssl_cipher.empty()) c.ssl_cipher = d.cipher;
  c.tls_versions = d.versions;
  return origin;
}

/* Reads the TLS files again into `server` (tablesocket_tls_reload, FLUSH SSL). */
bool reload_tls(Server &server, std::string *error) {
  Config cfg = config_from_sysvars();
  const char *origin = apply_server_tls_defaults(cfg);
  if (cfg.ssl_cert.empty() && cfg.ssl_key.empty()) {
    *error = "no TLS certificate configured (tablesocket_ssl_cert, or the server's ssl_cert)";
    return false;
  }
  if (!server.reload_tls(Server::tls_settings(cfg), error)) return false;
  tablesocket::log_info("TLS certificate '%s' (from %s) reloaded: new handshakes use it",
                        (cfg.ssl_cert.empty() ? cfg.ssl_key : cfg.ssl_cert).c_str(), origin);
  return true;
}

int check_tls_reload(MYSQL_THD, struct st_mysql_sys_var *, void *save, struct st_mysql_value *value) {
  bool on = false;
  if (value->value_type(value) == MYSQL_VALUE_TYPE_STRING) {
    char buf[16];
    int len = sizeof buf;
    const char *s = value->val_str(value, buf, &len);
    on = s && (!strcasecmp(s, "ON") || !strcasecmp(s, "TRUE") || !strcmp(s, "1"));
  } else {
    long long v = 0;
    value->val_int(value, &v);
    on = v != 0;
  }
  *static_cast<my_bool *>(save) = false;
  if (!on) return 0;
  try {
    std::shared_lock<std::shared_mutex> g(g_server_lock);
    std::string error;
    if (!g_server) {
      error = "tablesocket is not running";
    } else if (reload_tls(*g_server, &error)) {
      return 0;
    }
    my_printf_error(1105 /* ER_UNKNOWN_ERROR */, "tablesocket: TLS not reloaded: %s", 0, error.c_str());
  } catch (const std::exception &e) {
    my_printf_error(1105, "tablesocket: TLS not reloaded: %s", 0, e.what());
  }
  return 1;
}

/* The server's tick: once the server's FLUSH SSL has replaced its TLS context, ours follows. A
   reload that fails (files caught halfway through a rotation after the server read them) is
   logged once and retried every tick for a minute, so the two do not stay apart until the next
   FLUSH SSL. */
struct Flush_ssl_follower {
  uintptr_t seen = 0;           // the server's TLS context we last followed
  unsigned retries_left = 0;    // ticks left to retry a failed reload
  void tick(Server &server) {
    const uintptr_t now = tablesocket::server_tls_generation();
    const bool changed = now != seen;
    if (!changed && !retries_left) return;
    seen = now;
    if (!now) return;
    std::string error;
    if (reload_tls(server, &error)) {
      retries_left = 0;
    } else if (changed) {
      retries_left = 60;
      tablesocket::log_error("TLS not reloaded after FLUSH SSL: %s (the previous certificate stays in use; "
                             "retried every second for a minute)", error.c_str());
    } else if (--retries_left == 0) {
      tablesocket::log_error("TLS still not reloaded a minute after FLUSH SSL: %s (the previous certificate "
                             "stays in use until the next FLUSH SSL or SET GLOBAL tablesocket_tls_reload)",
                             error.c_str());
    }
  }
};

int tablesocket_init(void *) {
  try {
    Config cfg = config_from_sysvars();
    const char *cert_origin = apply_server_tls_defaults(cfg);
    auto server = std::make_unique<Server>(cfg);
    server->set_tick([f = Flush_ssl_follower{tablesocket::server_tls_generation()}](Server &s) mutable { f.tick(s); });
    std::string error;
    /* Checked before anything listens (the workers attach only once the server runs): a
       character set the server does not know left every worker unable to start while the ports
       took connections nobody answered. */
    if (!tablesocket::known_character_set(cfg.charset.c_str())) {
      tablesocket::log_error("not started: unknown character set '%s' (tablesocket_character_set)", cfg.charset.c_str());
      return 1;
    }
    if (!server->start(&error)) {
      tablesocket::log_error("not started: %s", error.c_str());
      return 1;
    }
    {
      std::unique_lock<std::shared_mutex> g(g_server_lock);
      g_server = server.release();
    }
    refresh_live_settings();  // a SET GLOBAL that ran while the server was starting
    tablesocket::log_info("listening on %s: HandlerSocket read port %u, read/write port %u, memcached "
                          "port %u%s%s, %u workers",
                          cfg.address.c_str(), cfg.hs_port, cfg.hs_port_wr, cfg.mc_port,
                          cfg.mc_socket.empty() ? "" : " and ", cfg.mc_socket.c_str(), cfg.threads);
    if (!cfg.hs_port && !cfg.hs_port_wr && !cfg.mc_port && cfg.mc_socket.empty())
      tablesocket::log_warning("every listener is off (tablesocket_hs_port, _hs_port_wr and _mc_port 0, no "
                               "tablesocket_mc_socket): the plugin is active but no client can reach it");
    if (std::shared_ptr<const tablesocket::Tls_context> tls = g_server->tls_context()) {
      std::string what = std::string(cfg.require_tls ? "required" : "offered") + " on the TCP ports: certificate '" +
                         (cfg.ssl_cert.empty() ? cfg.ssl_key : cfg.ssl_cert) + "' (from " + cert_origin + ")";
      if (tls->verifies_clients())
        what += ", client certificates verified against '" + (cfg.ssl_ca.empty() ? cfg.ssl_capath : cfg.ssl_ca) + "'";
      tablesocket::log_info("TLS %s", what.c_str());
    } else {
      tablesocket::log_info("TLS not offered: no certificate (tablesocket_ssl_cert, or the server's ssl_cert)");
    }
    return 0;
  } catch (const std::exception &e) {
    tablesocket::log_error("not started: %s", e.what());
    return 1;
  } catch (...) {
    tablesocket::log_error("not started: unknown error");
    return 1;
  }
}

int tablesocket_deinit(void *) {
  try {
    Server *s;
    {
      std::unique_lock<std::shared_mutex> g(g_server_lock);
      s = g_server;
      g_server = nullptr;
    }
    if (s) {
      s->stop();
      delete s;
    }
  } catch (...) {
    tablesocket::log_error("error while stopping");
  }
  return 0;
}

struct st_mysql_daemon tablesocket_daemon = {MYSQL_DAEMON_INTERFACE_VERSION};

/* ---- INFORMATION_SCHEMA.TABLESOCKET_CONNECTIONS ---------------------------------------------- */
std::vector<tablesocket::Connection_info> connections_now() {
  std::shared_lock<std::shared_mutex> g(g_server_lock);
  if (!g_server) return {};
  return g_server->connections(1000);  // a worker in a batch longer than 1 s is left out
}

int connections_table_init(void *p) { return tablesocket::info_schema_connections_init(p, connections_now); }

struct st_mysql_information_schema connections_table = {MYSQL_INFORMATION_SCHEMA_INTERFACE_VERSION};

}  // namespace

maria_declare_plugin(tablesocket){
    MYSQL_DAEMON_PLUGIN,
    &tablesocket_daemon,
    "tablesocket",
    "tablesocket developers",
    "Fast NoSQL access to tables: HandlerSocket-compatible protocol served through the handler API",
    PLUGIN_LICENSE_GPL,
    tablesocket_init,
    tablesocket_deinit,
    0x0001,
    status_variables,
    system_variables,
    "0.1",
    MariaDB_PLUGIN_MATURITY_BETA,
},
{
    MYSQL_INFORMATION_SCHEMA_PLUGIN,
    &connections_table,
    "TABLESOCKET_CONNECTIONS",
    "tablesocket developers",
    "tablesocket's client connections: port, address, account, TLS, state, buffered bytes",
    PLUGIN_LICENSE_GPL,
    connections_table_init,
    nullptr,
    0x0001,
    nullptr,
    nullptr,
    "0.1",
    MariaDB_PLUGIN_MATURITY_BETA,
} maria_declare_plugin_end;
