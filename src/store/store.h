/* The storage seam. Protocol code talks to tables only through Store; only files in store/ include
   MariaDB server headers. One Store per worker thread: not thread-safe, never shared. */
#ifndef TABLESOCKET_STORE_STORE_H
#define TABLESOCKET_STORE_STORE_H

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/config.h"
#include "common/hourly_limits.h"
#include "common/query.h"

namespace tablesocket {

struct Counters;

enum class Store_errc : uint8_t {
  ok,
  table_open_failed,      // no such table, not a base table, or the engine refused
  table_busy,             // a metadata lock is not available now: park the request and retry
  row_locked,             // a row lock is held by another transaction: park the request and retry
  lock_queued,            // the request waits in InnoDB's lock queue on a session of its own (see
                          // Store::set_requester): park it, without timing out, and ask again
  lock_wait_timeout,      // (set by the session) a lock stayed unavailable for lock_wait_timeout_ms
  index_not_found,        // no such index (or it was dropped by DDL)
  column_not_found,       // no such column (or it was dropped by DDL)
  too_many_key_parts,     // more key values than the index has parts
  bad_in_column,          // IN key part out of range
  bad_filter_column,      // filter column out of range
  filter_on_blob,         // filters on BLOB/TEXT columns are not supported
  read_only,              // a write on the read-only listener
  lock_failed,            // table lock failed
  handler_error,          // the storage engine returned handler_error
  result_too_large,       // the reply would exceed max_output_buffer
  too_many_indexes,       // max_open_indexes reached on this connection
  too_many_columns,       // an open index lists more than kMaxIndexColumns columns (or filter columns)
  server_shutdown,
  too_many_values,        // more values than the open index has columns
  bad_merge,              // merge needs an IN list on key part 0 (the groups)
  bad_value,              // SQL would reject the value (strict sql_mode, NOT NULL, ...): see message
  server_read_only,       // the server runs with read_only
  commit_failed,          // the batch's commit failed: see message
  access_denied,          // the connection's account lacks a privilege, or a login failed: see message
  index_unusable,         // FULLTEXT, SPATIAL or hash-based (long UNIQUE) index: cannot serve key lookups
  bad_container_index,    // a memcached container's index is not UNIQUE on exactly its key column
  not_replicated,         // a write the server's replication would not carry (Galera): see message
};

struct Store_status {
  Store_errc errc = Store_errc::ok;
  int handler_error = 0;  // HA_ERR_* when errc == handler_error
  std::string_view message;  // server's text for bad_value/commit_failed; valid until the next call
  bool ok() const { return errc == Store_errc::ok; }
  static Store_status of(Store_errc e, int h = 0) { return Store_status{e, h, {}}; }
};

struct Peer;

/* A MariaDB account a connection acts as, with its privileges (a security context). Created by
   Store::login(), owned by the session; every Open_index opened for it points to it, so it must
   outlive them. Privilege decisions are cached per open index and per principal for
   Config::privilege_check_interval_ms, then taken again the way SQL takes them. */
class Principal {
 public:
  virtual ~Principal() = default;
  const std::string &user() const { return user_; }
  const std::string &host() const { return host_; }   // the account's host pattern ("%", "10.0.%", ...)
  std::string account() const { return "'" + user_ + "'@'" + host_ + "'"; }
  /* Connections limit of the account itself (MAX_USER_CONNECTIONS); 0 = none. */
  int64_t max_user_connections = 0;
  Hourly_limits hourly;  // MAX_QUERIES_PER_HOUR, MAX_UPDATES_PER_HOUR, MAX_CONNECTIONS_PER_HOUR

 protected:
  std::string user_, host_;
};

enum class Login_method : uint8_t {
  native,       // mysql_native_password challenge-response: secret = 20-byte token for nonce
  cleartext,    // secret = the password (the session checks the connection is confidential)
  certificate,  // the peer's verified TLS client certificate; user = its CN
  mapped,       // no credentials: the account is named by configuration (tablesocket_anonymous_account)
};

struct Login_request {
  Login_method method = Login_method::native;
  std::string_view user;
  std::string_view host;    // mapped only: the account's host as configured
  std::string_view secret;
  const unsigned char *nonce = nullptr;  // native: the 20 bytes the client was challenged with
};

/* The most columns (and, separately, filter columns) an open index may list: MariaDB's own limit on
   the columns of a table (MAX_FIELDS), so only a list that repeats names can be longer. Checked
   before the names are copied. */
constexpr size_t kMaxIndexColumns = 4096;

/* What a client asked to open. Strings are only read during open_index(). */
struct Index_spec {
  std::string_view db, table, index;          // index: name, "PRIMARY", "" (= PRIMARY) or a number
  std::string_view columns, filter_columns;   // comma-separated lists
  bool for_write = false;
  /* memcached containers: the index must be UNIQUE with the first column as its only key part
     (a key names at most one row), or the open fails with bad_container_index. */
  bool unique_on_first_column = false;
  Principal *principal = nullptr;  // null: no privilege checks (no account, legacy behaviour)
};

/* A resolved open index, owned by one connection on one worker. Holds a reference on the worker's
   table slot; the slot may be closed and reopened under it (DDL), in which case names are resolved
   again on next use. Movable, not copyable; releases its reference when destroyed. */
class Store;
class Open_index {
 public:
  Open_index() = default;
  Open_index(Open_index &&o) noexcept { *this = std::move(o); }
  Open_index &operator=(Open_index &&o) noexcept;
  Open_index(const Open_index &) = delete;
  Open_index &operator=(const Open_index &) = delete;
  ~Open_index() { reset(); }
  void reset();
  bool valid() const { return store_ != nullptr; }
  size_t ncolumns() const { return column_names_.size(); }
  size_t nfilter_columns() const { return filter_names_.size(); }
  /* Heap this open index holds (its names and field numbers), for its connection's share of
     tablesocket_max_buffer_memory. An estimate: containers' own overheads are approximated. */
  size_t memory_bytes() const {
    auto names = [](const std::vector<std::string> &v) {
      size_t n = v.capacity() * sizeof(std::string);
      for (const std::string &s : v) n += s.capacity() >= sizeof(std::string) / 2 ? s.capacity() + 1 : 0;
      return n;
    };
    return sizeof(*this) + 64 + index_name_.capacity() + names(column_names_) + names(filter_names_) +
           names(denied_messages_) + (columns_.capacity() + filter_columns_.capacity()) * sizeof(uint16_t);
  }

 private:
  friend class Mariadb_store;
  Store *store_ = nullptr;
  uint32_t slot_ = 0;
  uint64_t generation_ = 0;        // slot generation the numbers below were resolved against
  bool for_write_ = false;
  bool unique_on_first_column_ = false;
  std::string index_name_;         // as resolved ("PRIMARY" for the primary key)
  uint32_t index_no_ = 0;
  uint32_t key_parts_ = 0;
  std::vector<std::string> column_names_, filter_names_;
  std::vector<uint16_t> columns_, filter_columns_;  // field numbers
  /* Privileges (see Mariadb_store::authorize): the principal, what it was found to have, and when. */
  Principal *principal_ = nullptr;
  uint8_t granted_ = 0, denied_ = 0;
  std::vector<std::string> denied_messages_;  // by privilege bit, once something was denied
  uint64_t privileges_checked_ms_ = 0;
};

/* merge_desc / merge_asc: the k-way merge ("timeline") over groups. The index's first key part is
   the group; in_values are the groups; keys[1..nkeys-1], if any, are an exclusive bound on the
   following key parts (keys[0] is ignored); rows come newest (desc) or oldest (asc) first in index
   order across all groups, at most limit of them. Touches about ngroups + limit index entries. */
enum class Find_op : uint8_t { eq, gt, ge, lt, le, last_prefix, merge_desc, merge_asc };

struct Find_request {
  Find_op op = Find_op::eq;
  const Datum *keys = nullptr;
  uint32_t nkeys = 0;  // 0 with ge: from the index's first row
  uint32_t limit = 1;
  uint32_t offset = 0;
  bool has_in = false;
  uint32_t in_column = 0;
  const Datum *in_values = nullptr;
  uint32_t nin_values = 0;
  const Filter *filters = nullptr;
  uint32_t nfilters = 0;
  /* false: the rows found are not counted in rows_read (the plugin's own reads of its
     configuration and accounts, and memcached lookups, which count the items they return). */
  bool counts_rows = true;
  /* true: the sink gets an empty value in place of the open index's first column, which is not
     read out of the row (a caller that knows it: a memcached lookup of one key, whose key column
     is the first; a number key's conversion to text was 4% of a get). */
  bool omits_first_column = false;
};

struct Modify_request {
  Modify_op op = Modify_op::none;
  bool returns_rows = false;      // reply with the rows as they were before the change
  const Datum *values = nullptr;  // for the first nvalues columns of the open index
  uint32_t nvalues = 0;
};

struct Insert_result {
  bool has_insert_id = false;  // the table has an AUTO_INCREMENT column
  uint64_t insert_id = 0;      // the value it generated for this row (0 if the client gave one)
};

/* Key/value semantics over an open index (the memcached front door). The open index's columns
   are, in order: the key, the value columns, then the optional flags, cas and expiry columns whose
   positions Kv_layout gives. The index must be unique on the key. */
struct Kv_layout {
  uint32_t nvalues = 1;  // value columns at positions 1..nvalues
  int flags = -1, cas = -1, expiry = -1;  // column positions, -1 when the container has none
  std::string separator = "|";            // joins several value columns into one value
};

/* invalidate (memcached's md I): the row stays, with a new CAS (the cas column; a container without
   one keeps its content hash) and, with set_expiry, a new expiry. */
enum class Kv_op : uint8_t { set, add, replace, append, prepend, cas, incr, decr, touch, remove, invalidate };
/* set .. cas: the request gives the item's data (memcached's store commands). */
constexpr bool stores_item(Kv_op op) { return op <= Kv_op::cas; }

struct Kv_request {
  Kv_op op = Kv_op::set;
  Datum key;
  Datum value;            // set/add/replace/append/prepend/cas: the item data
  uint32_t flags = 0;
  bool set_flags = true;  // false: keep the row's flags (append, prepend)
  int64_t expiry = 0;     // absolute unix time, 0 = never; for set/add/replace/cas/touch
  bool set_expiry = true; // false: keep the row's expiry (append, prepend, incr, decr)
  uint64_t cas = 0;       // cas: the value the client saw
  /* append/prepend/incr/decr/remove (memcached's binary protocol sends a CAS with any of them):
     when nonzero and the row is live, the write happens only if the row's CAS is this one
     (otherwise Kv_outcome::exists), checked under the row lock the write takes. */
  uint64_t expect_cas = 0;
  uint64_t delta = 0;     // incr/decr
  int64_t now = 0;        // unix time: rows with 0 < expiry <= now are absent
  uint64_t new_cas = 0;   // the cas to store for a changed row (unique per write)
  size_t max_value_size = SIZE_MAX;  // append/prepend/incr may not grow a value beyond this
};

enum class Kv_outcome : uint8_t { stored, not_stored, exists, not_found, deleted, touched, number, not_numeric,
                                  too_large };

struct Kv_result {
  Kv_outcome outcome = Kv_outcome::not_found;
  uint64_t number = 0;  // incr/decr: the new value
  bool longer = false;  // incr/decr: the new number has more digits than the value it replaced
  uint64_t cas = 0;     // the row's CAS after a change (the cas column, or the content hash)
  uint64_t previous_cas = 0;  // incr/decr: the row's CAS before it, as a client saw it
};

/* A table's row count and data size, as its engine keeps them (Store::table_size()). */
struct Table_size {
  uint64_t rows = 0;
  uint64_t bytes = 0;  // the data's size (InnoDB: its clustered index's pages)
};

/* Where rows go. The store calls begin(), then ncols values per row, then end(); or cancel() on
   failure after begin(). would_overflow() is checked after each row. */
class Row_sink {
 public:
  virtual ~Row_sink() = default;
  virtual void begin(size_t ncols) = 0;
  virtual void value(const char *p, size_t n) = 0;
  virtual void null() = 0;
  virtual void end() = 0;
  virtual void cancel() = 0;
  virtual bool would_overflow() const = 0;
};

/* For calls whose rows nobody reads (a modify that does not send back what it changed). */
class Discard_rows final : public Row_sink {
 public:
  void begin(size_t) override {}
  void value(const char *, size_t) override {}
  void null() override {}
  void end() override {}
  void cancel() override {}
  bool would_overflow() const override { return false; }
};

class Store {
 public:
  virtual ~Store() = default;
  /* Checks credentials and builds the account's security context. access_denied (with the
     reason in message, phrased for the client) when the login fails; table_busy: retry later. */
  virtual Store_status login(const Peer &peer, const Login_request &req, std::unique_ptr<Principal> *out) = 0;
  /* May the account zero the server-wide figures clients see (memcached's `stats reset`)? As SQL's
     FLUSH STATUS: the global RELOAD privilege; access_denied with SQL's message otherwise. */
  virtual Store_status check_reload_privilege(Principal &p) = 0;
  /* Resolves spec into out (replacing what out held). table_busy means "retry later". */
  virtual Store_status open_index(const Index_spec &spec, Open_index &out) = 0;
  virtual Store_status find(Open_index &idx, const Find_request &req, Row_sink &sink) = 0;
  /* Inserts one row: values for the first n columns of idx, real defaults for the rest. With
     upsert, a duplicate on a unique key updates that row's given columns instead. */
  virtual Store_status insert(Open_index &idx, const Datum *values, uint32_t n, bool upsert,
                              Insert_result *result) = 0;
  /* The table's row count and data size as its engine keeps them, without reading a row (SHOW
     TABLE STATUS's Rows and Data_length: exact for MyISAM, Aria and MEMORY; for InnoDB its running
     count, exact for a small table and an estimate for a large one). Needs the SELECT privilege. */
  virtual Store_status table_size(Open_index &idx, Table_size *out) = 0;
  /* Finds rows like find() and updates, increments, decrements or deletes them. With
     mod.returns_rows the pre-image rows go to sink, otherwise *modified counts the rows. */
  virtual Store_status modify(Open_index &idx, const Find_request &req, const Modify_request &mod,
                              Row_sink &sink, uint64_t *modified) = 0;
  /* One memcached-style write, atomically (one statement, the row locked while it is read). */
  virtual Store_status kv_write(Open_index &idx, const Kv_layout &layout, const Kv_request &req,
                                Kv_result *result) = 0;
  /* Ends the current batch: unlocks every table the batch used and commits (one durable commit
     for every write of the batch). Returns false when the commit is done (batch_lost_writes()
     tells how it went). Returns true when the commit was handed to the store's commit thread
     (commit overlap, a batch that wrote): the next batch can run at once, and reap_commit() gives
     the outcome once the commit is durable; replies to the batch's writes wait for it. One commit
     is in flight at a time: reap it (waiting) before ending another batch that wrote.
     nobody_waiting: no one waits to be served meanwhile (no reads lately), so when the backup
     commit lock is free at once a batch that wrote is committed before this returns, by the
     caller itself, rather than handed off: while it waits for its fsync the writers answered
     before it send their next writes, and they all meet in the next batch (one group, about half
     the commits and context switches of two groups taking turns). Where the commit may hang (the
     binary log's file system nearly full, a commit that held the caller lately) it runs on the
     commit thread and the caller waits up to kInlineCommitWaitMs; a commit that takes longer is
     left to run as a handed-off one (true is returned), so the worker serves whoever comes. */
  virtual bool end_batch(bool nobody_waiting) = 0;
  /* After end_batch() returned false: true when the batch's commit failed, so writes already
     answered as done in this batch were rolled back. The connections that wrote in it must be
     closed unanswered. */
  virtual bool batch_lost_writes() const = 0;
  /* The open batch goes on in the worker's next loop (its transaction stays open while the previous
     commit runs, or while it takes writes that arrived as it ran): its statements end here, tables
     unlocked, so the next loop's reads take a fresh snapshot - a request read then sees every
     write acknowledged before it was sent. */
  virtual void end_statements() = 0;
  /* A batch is open (something was locked since the last end_batch()). */
  virtual bool in_batch() const = 0;
  /* The current batch has written (its end_batch() may hand the commit off). */
  virtual bool batch_wrote() const = 0;
  virtual bool commit_in_flight() const = 0;
  /* The outcome of the commit end_batch() handed off: false while it runs (waiting for it up to
     wait_ms first; kWaitForever: until it is done); true once done, with *lost true when its
     writes were rolled back (their connections must be closed unanswered). */
  static constexpr unsigned kWaitForever = ~0u;
  /* How long a worker with nobody else to serve waits for its batch's commit (end_batch), and
     for the commit before a batch that spent its row budget (then renew_batch_budget()). */
  static constexpr unsigned kInlineCommitWaitMs = 100;
  virtual bool reap_commit(unsigned wait_ms, bool *lost) = 0;
  /* The open batch, which wrote, has spent its row budget but cannot end while the commit before
     it runs (and that commit takes long): it takes no more writes and gets a fresh row budget,
     so its reads go on rather than the worker wait for the commit. */
  virtual void renew_batch_budget() = 0;
  /* An eventfd the commit thread writes 1 to whenever a handed-off commit is done. */
  virtual void set_commit_notify(int fd) = 0;
  /* Between batches: closes tables that DDL or FLUSH TABLES is waiting for, and tables no open
     index refers to. Cheap when there is nothing to do. */
  virtual void yield_to_ddl() = 0;
  /* True once the current batch has examined more rows than Config::max_batch_rows: the worker
     then ends the batch (commits, lets DDL through) and runs the remaining requests in the next
     one, so one client's scans delay the others by about one request, not a pipeline of them. */
  virtual bool batch_budget_spent() const = 0;
  /* One connection's turn in a batch: it may examine about max_rows rows (its requests that began
     before then run to the end) before turn_spent() says to let the other connections go first. */
  virtual void begin_turn(uint64_t max_rows) = 0;
  virtual bool turn_spent() const = 0;
  /* The open batch takes no more writes: until it ends, a request that would write answers
     table_busy before it changes anything (its session parks it; it runs in a later batch). For a
     batch kept open behind a commit that takes long (one waiting at BACKUP STAGE BLOCK_COMMIT, a
     slow fsync): reads go on, writes wait, and the batch stays the size it was. */
  virtual void close_batch_to_writes() = 0;
  /* The commit in flight waits for a lock (a backup stage), not for its fsync: it may take long.
     Meanwhile no batch takes writes (refused as after close_batch_to_writes()). */
  virtual bool commit_waits_for_lock() const = 0;
  /* The worker is stopping: a commit in flight that waits for a lock gives up now. */
  virtual void abort_commit_wait() = 0;
  /* Counts the writes refused that way: a request that meets it waits for the batch to end. */
  virtual uint64_t writes_refused_closed() const = 0;
  /* Counts reads that may have seen the current batch's writes, not committed yet (by any
     connection, in an earlier request): reads that returned a row the batch inserted or changed,
     or read a table in which it deleted a row or changed a key. The worker holds such a reader's
     replies until the batch's commit is done, as a writer's, so no client sees a write that is
     then rolled back (a failed commit, a lost Galera certification). */
  virtual uint64_t reads_of_written_tables() const = 0;
  /* Who the next requests are from (a connection; nullptr: nobody in particular). A write of
     one requester that keeps meeting a row lock for tablesocket_lock_queue_after is run again on
     a session of its own that waits in InnoDB's lock queue, as an SQL statement would (retries
     from the worker only ever try the lock, and lose every time to SQL transactions that hand the
     row to each other): meanwhile the store answers that requester's same call lock_queued, and
     once that session has committed (or failed), the call gets its outcome. A requester retries
     a parked request before anything else, so its next write call is that request. */
  virtual void set_requester(const void *who) = 0;
  /* The requester is gone (its connection closed): its queued request, if any, is cancelled
     (waits at most for the commit it may be in). */
  virtual void forget_requester(const void *who) = 0;
  /* The current requester's account changed (a new login): its queued request, if any, is
     cancelled as if it had closed — the queued copy acts as the old account, which is going. */
  virtual void forget_current_requester() = 0;
  /* The current requester's request that met a row lock was answered: the next one that meets
     one (even the same request again) waits from its own start. */
  virtual void end_row_wait() = 0;
  /* The outcome the last insert(), modify() or kv_write() returned is that of a queued request,
     committed by its own session: the write is durable already and not part of the batch (its
     reply need not wait for the batch's commit, nor be withheld if that commit fails). */
  virtual bool write_committed() const = 0;
  /* True (once) when a queued request's outcome has arrived since the last call: its requester,
     parked, may ask again now rather than at its next retry. */
  virtual bool take_queue_results() = 0;
  /* True when the server asked this worker's thread to stop (shutdown). */
  virtual bool killed() = 0;
  /* What a request's failure tells its client: an engine error while the server stops (the
     worker's killed thread makes InnoDB answer "interrupted", error 188) is the shutdown. */
  Store_status as_reported(const Store_status &st) {
    return st.errc == Store_errc::handler_error && killed() ? Store_status::of(Store_errc::server_shutdown) : st;
  }
  virtual size_t open_table_count() const = 0;

 protected:
  friend class Open_index;
  virtual void release_slot(uint32_t slot) = 0;
};

inline Open_index &Open_index::operator=(Open_index &&o) noexcept {
  if (this != &o) {
    reset();
    store_ = o.store_; slot_ = o.slot_; generation_ = o.generation_; for_write_ = o.for_write_;
    unique_on_first_column_ = o.unique_on_first_column_;
    index_name_ = std::move(o.index_name_); index_no_ = o.index_no_; key_parts_ = o.key_parts_;
    column_names_ = std::move(o.column_names_); filter_names_ = std::move(o.filter_names_);
    columns_ = std::move(o.columns_); filter_columns_ = std::move(o.filter_columns_);
    principal_ = o.principal_; granted_ = o.granted_; denied_ = o.denied_;
    denied_messages_ = std::move(o.denied_messages_);
    privileges_checked_ms_ = o.privileges_checked_ms_;
    o.store_ = nullptr;
  }
  return *this;
}
inline void Open_index::reset() {
  if (store_) { store_->release_slot(slot_); store_ = nullptr; }
}

/* Blocks until the server has finished starting up (plugins loaded at startup are initialised
   before InnoDB recovery and the binlog are ready). Returns false if stop became true first. */
bool wait_for_server_start(const std::atomic<bool> &stop);

/* tablesocket_galera_writes: on a Galera node, replicate writes (true) or refuse them (false). */
void set_galera_writes(bool on);

/* Creates the MariaDB-backed store for the calling worker thread (attaches a THD to it), with
   cfg's character set, commit overlap and limits (cfg must outlive it: its Live<> limits are read
   as they apply). Returns nullptr and logs when the thread cannot be set up. */
std::unique_ptr<Store> make_mariadb_store(Counters &counters, const char *thread_name, const Config &cfg);

}  // namespace tablesocket
#endif
