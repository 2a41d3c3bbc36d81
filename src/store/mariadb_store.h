/* Internal to store/: the MariaDB-backed Store, split over mariadb_store.cc (tables, reads,
   batches) and mariadb_store_write.cc (writes). Includes server headers. */
#ifndef TABLESOCKET_STORE_MARIADB_STORE_H
#define TABLESOCKET_STORE_MARIADB_STORE_H

#include "store/server_incl.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/config.h"
#include "common/fingerprint_set.h"
#include "common/stats.h"
#include "store/store.h"

/* Defined in sql/sql_class.cc (used by InnoDB's purge threads); not declared in a header. */
MYSQL_THD create_thd();
void destroy_thd(MYSQL_THD thd);

namespace tablesocket {

/* Ends the statement-level state of a table's handler, as SQL does after every statement. */
void reset_handler(TABLE *t);
/* Whether n bytes at p are all 7-bit (below 0x80). */
bool is_ascii(const char *p, size_t n);

/* Result codes of Mariadb_store::modify_row besides handler errors (> 0). */
constexpr int kRowSkipped = -1;  // '-' would change the sign: the row is left as it is
constexpr int kBadValue = -2;    // a value SQL would reject; its message is in last_error_

struct Table_slot {
  std::string db, name;
  TABLE *table = nullptr;
  /* The TABLE_LIST the table was opened through: the server keeps pointing at it while the table is
     open (TABLE::pos_in_table_list, read by InnoDB's update_row and by ha_partition's scans), so it
     lives on the heap as long as the slot, not on open()'s stack. */
  std::unique_ptr<TABLE_LIST> table_list;
  MDL_request mdl_request;
  /* Of a table opened for writing that other tables' foreign keys reference: metadata locks on
     those tables, as SQL takes them for a write to it (a shared write lock where a cascade changes
     the referencing table, a shared read lock where it is only checked; recursively). DDL on such a
     table waits for them, so a cascade never lands in a copy ALTER TABLE is making. */
  std::deque<MDL_request> fk_locks;  // deque: an MDL_request is neither movable nor heap-allocatable
  bool ddl_waits() const;    // DDL waits for its metadata lock or one of fk_locks
  MYSQL_LOCK *lock = nullptr;
  bool for_write = false;
  /* A for_write slot opened with read locks: a read lock (LOCK TABLES READ, FLUSH ... FOR EXPORT,
     FTWRL) kept the write locks away when a read needed the table. */
  bool read_only_open = false;
  bool opened_for_write() const { return for_write && !read_only_open; }
  bool written = false;      // written in the current batch
  /* Rows the current batch inserted or changed (their positions): a read returning one of them
     may have seen a write not committed yet. Blind: a delete or a changed key (a read could miss
     a row) or too many rows to keep: every read of the table counts. Fingerprints: a read of
     another row with the same one counts too, which only makes its reply wait for the commit. */
  Fingerprint_set written_refs;
  bool written_blind = false;
  bool locked = false;       // locked in the current batch
  bool reading = false;      // a read statement is running on it (no write since start_stmt)
  bool in_use = false;       // slot allocated (else on the free list)
  uint64_t generation = 0;   // bumped on every (re)open
  uint32_t refs = 0;         // Open_index objects pointing here
  uint64_t unused_since_ms = 0;  // when refs last fell to 0 (closed kKeepUnusedMs later, or when DDL waits)
  /* Closed for a waiting lock: until then (monotonic ms) it is reopened for reads only (see
     yield_to_ddl). */
  uint64_t yielded_until_ms = 0;
};

/* The account a connection acts as: its security context and what it needs to rebuild it. */
class Mariadb_principal final : public Principal {
 public:
  Security_context sctx;
  std::string login_user;  // the name the client gave (sctx.user points here)
  std::string conn_host;   // the connection's host as MariaDB sees it (sctx.host points here)
  std::string conn_ip;     // "" for a unix socket (sctx.ip is then null)
  std::string role;        // the account's default role, activated at login ("" = none)
  bool valid = true;       // false once the account no longer exists
  uint64_t refreshed_ms = 0;

  void set_account(const char *user, const char *host) { user_ = user; host_ = host && *host ? host : "%"; }
};


/* The store's commit thread: runs the commit of a batch that wrote, on that batch's THD, while
   the worker goes on with the next batch on the other one (see Mariadb_store::end_batch). One
   commit at a time. Only Mariadb_store uses it. */
/* A batch's backup locks, released after its commit: MDL_BACKUP_TRANS_DML, MDL_BACKUP_DML and,
   for a batch the worker commits itself, MDL_BACKUP_COMMIT (see Mariadb_store::commit_lock_). */
constexpr int kBackupLocks = 3;

class Commit_thread {
 public:
  ~Commit_thread() { stop(); }
  bool start(const char *name, std::string *error);
  void stop();
  /* Hands thd over to commit its transaction (then release backup_locks); the caller must not
     touch thd until done() is true. notify_fd, if >= 0, gets 1 written to it when it is done. */
  void submit(THD *thd, MDL_ticket *const backup_locks[kBackupLocks], bool wrote, int notify_fd);
  /* How long (ms, rounded up to whole seconds) a commit here waits for the backup lock a commit
     takes (held off by BACKUP STAGE BLOCK_COMMIT and FLUSH TABLES WITH READ LOCK), as an SQL
     COMMIT waits lock_wait_timeout: tablesocket_lock_wait_timeout, read at each wait. The worker
     goes on meanwhile: its open batch only stops taking writes (see Store::close_batch_to_writes).
     Set before start(). */
  void set_lock_wait(const Live<unsigned> *ms) { lock_wait_ms_ = ms; }
  bool done();                 // the submitted commit finished (or nothing was submitted)
  /* The submitted commit waits for the backup lock (BACKUP STAGE BLOCK_COMMIT, FLUSH TABLES WITH
     READ LOCK): possibly for long, unlike an fsync. */
  bool lock_waiting() const { return lock_waiting_.load(std::memory_order_relaxed); }
  /* The submitted commit holds the backup commit lock (taken at the hand-off, or by the commit
     thread), needs none, or has stopped waiting for it: from here on it waits for nothing another
     batch of the worker could hold. */
  bool lock_settled() const { return lock_settled_.load(std::memory_order_acquire); }
  /* The worker stops (UNINSTALL SONAME): a commit waiting for the backup lock is cut short (its
     THD killed, as shutdown does; the commit fails and its writers are closed unanswered) rather
     than hold the uninstall up for tablesocket_lock_wait_timeout. */
  void abort_lock_wait();
  bool wait();                 // waits until done(); returns whether its writes were lost
  /* Waits up to ms for the submitted commit; true if it is done. While this waits, the commit's
     end is told through the condition variable only (not the notify fd): a wait that succeeds
     leaves no wake-up behind for the worker's poll. */
  bool wait_for(unsigned ms);
 private:
  void run();
  std::mutex m_;
  std::condition_variable cv_;
  std::thread thread_;
  bool started_ = false, init_failed_ = false;
  bool stop_ = false, busy_ = false, lost_ = false;
  bool waiting_ = false;  // wait_for() is waiting: the commit's end needs no notify fd write
  THD *thd_ = nullptr;
  MDL_ticket *backup_locks_[kBackupLocks] = {};
  bool wrote_ = false;
  int notify_fd_ = -1;
  const Live<unsigned> *lock_wait_ms_ = nullptr;
  std::atomic<bool> lock_waiting_{false};
  std::atomic<bool> lock_settled_{true};
  std::string name_;
};

/* A request handed to the lock queue: a copy of it (its bytes owned here), the session that runs
   it (its own thread and store), and its outcome. */
struct Lane_job {
  const void *requester = nullptr;
  uint64_t fp = 0;
  uint8_t kind = 0;  // Mariadb_store::Lane_kind
  std::string db, table, index, columns, filter_columns;
  bool unique_on_first_column = false;
  Principal *principal = nullptr;  // the requester's; it stays parked (and alive) until the job ends
  std::deque<std::string> bytes;   // what the Datums below point into
  std::vector<Datum> keys, in_values, values;
  std::vector<Filter> filters;
  Find_request req;
  Modify_request mod;
  bool upsert = false;
  Kv_layout layout;
  Kv_request kv;
  uint64_t deadline_ms = 0;  // the request's tablesocket_lock_wait_timeout ends then
  int notify_fd = -1;
  /* The outcome, written by the job's thread before done. */
  Store_errc errc = Store_errc::ok;
  int handler_error = 0;
  std::string message;
  uint64_t modified = 0;
  Insert_result insert_result;
  Kv_result kv_result;
  Counters counters;  // the job's store counts here; added to the worker's with the outcome
  std::thread thread;
  std::mutex m;
  THD *thd = nullptr;  // the job's batch THD while it runs (m), for lane_stop()
  bool cancel = false;  // (m)
  bool timed_out = false;  // stopped by its requester at deadline_ms
  std::atomic<bool> done{false};

  Datum own(const Datum &d) {
    if (d.is_null()) return Datum{};
    bytes.emplace_back(d.ptr, d.len);
    return Datum{bytes.back().data(), d.len};
  }
};

class Mariadb_store final : public Store {
 public:
  /* cfg outlives the store; its Live<> limits are read where they apply, so SET GLOBAL reaches a
     running store. commit_overlap: the worker's store follows cfg, a lock-queue session's never
     overlaps. */
  Mariadb_store(Counters &c, const Config &cfg, bool commit_overlap)
      : counters_(c), cfg_(cfg), commit_overlap_(commit_overlap) {}
  ~Mariadb_store() override;
  /* Attaches new THDs to the calling thread (and starts the commit thread); false (logged) if
     that fails. */
  bool attach(const char *thread_name, const char *charset);

  Store_status check_reload_privilege(Principal &p) override;
  Store_status login(const Peer &peer, const Login_request &req, std::unique_ptr<Principal> *out) override;
  Store_status open_index(const Index_spec &spec, Open_index &out) override;
  Store_status find(Open_index &idx, const Find_request &req, Row_sink &sink) override;
  Store_status table_size(Open_index &idx, Table_size *out) override;
  Store_status insert(Open_index &idx, const Datum *values, uint32_t n, bool upsert,
                      Insert_result *result) override;
  Store_status modify(Open_index &idx, const Find_request &req, const Modify_request &mod,
                      Row_sink &sink, uint64_t *modified) override;
  Store_status kv_write(Open_index &idx, const Kv_layout &layout, const Kv_request &req,
                        Kv_result *result) override;
  bool end_batch(bool nobody_waiting) override;
  void end_statements() override;
  void unlock_batch_tables();
  bool batch_lost_writes() const override { return batch_lost_writes_; }
  bool in_batch() const override { return in_batch_; }
  bool batch_wrote() const override { return in_batch_ && batch_wrote_; }
  bool commit_in_flight() const override { return in_flight_; }
  bool reap_commit(unsigned wait_ms, bool *lost) override;
  void renew_batch_budget() override;
  void set_commit_notify(int fd) override { notify_fd_ = fd; }
  void yield_to_ddl() override;
  bool killed() override;
  size_t open_table_count() const override { return open_tables_; }
  uint64_t reads_of_written_tables() const override { return reads_of_written_; }
  bool batch_budget_spent() const override { return rows_examined_ >= cfg_.max_batch_rows || batch_full_; }
  void begin_turn(uint64_t max_rows) override { turn_end_ = rows_examined_ + max_rows; }
  bool turn_spent() const override { return rows_examined_ >= turn_end_; }
  void close_batch_to_writes() override { if (in_batch_) writes_closed_ = true; }
  /* Until the commit thread holds the backup commit lock: one handed off without it (a backup
     held it at the hand-off) tries it only when it runs, and then waits. */
  bool commit_waits_for_lock() const override { return in_flight_ && !committer_->lock_settled(); }
  void abort_commit_wait() override { if (in_flight_) committer_->abort_lock_wait(); }
  uint64_t writes_refused_closed() const override { return writes_refused_closed_; }
  void set_requester(const void *who) override { requester_ = who; }
  void forget_requester(const void *who) override;
  void forget_current_requester() override {
    if (requester_) forget_requester(requester_);
  }
  void end_row_wait() override;
  bool write_committed() const override { return write_committed_; }
  bool take_queue_results() override {
    return lane_finished_.load(std::memory_order_relaxed) && lane_finished_.exchange(false, std::memory_order_acquire);
  }

 protected:
  void release_slot(uint32_t slot) override;

 private:
  /* ---- tables (mariadb_store.cc) ---- */
  Store_status ensure_open(Table_slot &s, bool want_write);
  Store_status open_slot(Table_slot &s, bool write);
  /* The fk_locks of a slot whose table (t, just opened for writing) others reference: false when
     one is not available now (DDL holds or waits for it) or a table cannot be opened. */
  bool lock_fk_tables(Table_slot &s, TABLE *t, bool referenced);
  /* A table referencing another through a foreign key; writes: its ON DELETE/UPDATE changes it. */
  struct Fk_ref {
    std::string db, name;
    bool writes;
  };
  std::unordered_map<std::string, std::vector<Fk_ref>> fk_refs_;  // by slot_key(): what referenced it when last opened
  /* Adds f to refs, or makes the entry for its table a writing one: false when refs already
     had it (as writing, or f does not write). */
  static bool merge_ref(std::vector<Fk_ref> &refs, const Fk_ref &f);
  void release_fk_locks(Table_slot &s);
  /* open_table() on owner_ for a table whose metadata lock tl carries, kept out of
     owner_->open_tables (slots hold their tables themselves); true on error. */
  bool open_unlisted(TABLE_LIST &tl, Open_table_context &ot);
  Store_status ensure_locked(uint32_t slot_no);
  Store_status resolve(Table_slot &s, Open_index &idx);
  void close_slot(Table_slot &s);
  /* A write request that changes one row at most (an insert, or a modify with limit 1 and no IN
     list), and of which kind: such requests may share one statement (see Shared_write). */
  enum class Stmt_share : uint8_t { none, insert, modify };
  /* Opens, resolves and locks idx's table for one request and starts its statement, after checking
     that idx's principal (if any) holds the privileges (kPriv* bits) the request needs. A request
     of the shared write statement's slot, index and kind continues that statement; any other
     request ends it first. */
  Store_status prepare_request(Open_index &idx, enum_sql_command command, uint8_t privileges, TABLE **table,
                               Stmt_share share = Stmt_share::none);
  /* ---- accounts and privileges (mariadb_store_auth.cc) ---- */
  /* The account's context rebuilt (and whether it still exists) once per privilege_check_interval. */
  void refresh_principal(Mariadb_principal &p, uint64_t now);
  Store_status account_gone(const Mariadb_principal &p);
  Store_status deny(std::string message);
  Store_status denied_by_last_error();  // access_denied with last_error_ as its message
  /* (Re)builds p's security context from the ACL: false when no account matches any more. */
  bool rebuild_context(Mariadb_principal &p);
  Store_status deny_unknown(const Login_request &req, Mariadb_principal &p, const std::string &denied);
  Store_status deny_after_decoy_check(const Login_request &req, Mariadb_principal &p, const std::string &denied);
  /* Activates p's default role (p.role) in its context, as a SQL login does. */
  void apply_role(Mariadb_principal &p);
  Store_status read_account(const char *host, const char *user, std::string *json, bool *found);
  /* True when p holds want_bits on s's table (and, unless any_combination, on every column);
     with report, the server's denial message goes to last_error_. */
  bool table_privilege(Mariadb_principal &p, const Table_slot &s, uint64_t want_bits,
                       const std::vector<const char *> &columns, bool any_combination, bool report);
  /* Before a table is opened for p: access_denied unless p has some privilege on it (so a denied
     client cannot learn whether a table exists). */
  Store_status check_table_visible(Mariadb_principal &p, const Table_slot &s);
  Store_status authorize(Open_index &idx, uint8_t want);
  Store_status authorize_open(Open_index &idx);
 public:
  static uint8_t privileges_for(enum_sql_command command, const Modify_request *mod, const Kv_request *kv,
                                bool upsert);
 private:
  static void warn_rollback_on_timeout(THD *thd);
  /* SET SESSION innodb_lock_wait_timeout = seconds for thd (0: a locked row fails at once). */
  static bool set_row_lock_wait(THD *thd, unsigned seconds);
  static void set_no_wait_row_locks(THD *thd);
  void clear_diagnostics() { clear_diagnostics(thd_); }
  static void clear_diagnostics(THD *thd);
  /* Makes thd the calling (worker) thread's current THD. */
  void attach_thd(THD *thd);
  /* Sets up a new THD for this worker (no grants checks, binlogged, no row lock waits). */
  THD *new_thd(const char *thread_name);
  friend class Commit_thread;
  /* Ends thd's transaction with a commit (rolls back if the commit fails) and frees what its
     statements allocated; true when writes were lost (wrote and the commit failed). */
  /* refused: the commit did not start (why, for the log): the transaction is rolled back. */
  static bool commit_thd(THD *thd, bool wrote, MDL_ticket *const backup_locks[kBackupLocks],
                         const char *refused = nullptr);
  /* Whether this batch's commit may run on the commit thread: it wrote, and every table it
     used is InnoDB (other engines keep per-handler transaction state a commit touches). */
  bool can_hand_off() const;
  /* A commit might hang for long: the binary log's file system is nearly full (MariaDB then
     waits for space, retrying once a minute: checked every 100 ms), or a commit held the worker
     lately (a disk that stalls). The worker then never commits inline. */
  bool commit_may_hang();
  static constexpr uint64_t kBinlogSpaceLow = uint64_t(256) << 20;  // bytes free
  static constexpr uint64_t kSlowCommitMemoryMs = 10000;
  uint64_t slow_commit_until_ms_ = 0;
  uint64_t space_checked_ms_ = 0;
  bool binlog_space_low_ = false;
  /* Blocks until the handed-off commit (if any) finished, without taking its outcome. */
  void wait_commit_done();
  /* Makes owner_ the current THD for the scope (table opens and closes), then the batch's again. */
  class Owner_scope {
   public:
    explicit Owner_scope(Mariadb_store &st) : st_(st) { set_current_thd(st.owner_); }
    ~Owner_scope() { set_current_thd(st_.thd_); }
   private:
    Mariadb_store &st_;
  };

  /* ---- reads (mariadb_store.cc) ---- */
  /* Stores the request's key values (the in_index'th IN value at req.in_column) into the record and
     copies their key image into key_buf_. When a used key part indexes only a prefix of its column
     (KEY(c(10)), TEXT/BLOB keys), also keeps each full value for full_key_cmp() and sets
     key_has_prefix_parts_: the index then finds every row sharing the prefix. */
  /* Also sets key_names_no_row_ (whole_values: memcached keys and writes, see there). */
  bool build_integer_key(TABLE *t, KEY &k, const Find_request &req, uint32_t in_index, uint *key_len);
  void build_key(TABLE *t, KEY &k, const Find_request &req, uint32_t in_index, uint *key_len,
                 bool whole_values = false);
  /* SIGN(row in record[0] - requested key) in index order over the first nparts key parts, prefix
     parts compared on the whole column value with its collation (as SQL re-checks its WHERE). */
  int full_key_cmp(const KEY &k, uint nparts);
  /* key_buf_, grown to hold a key image of k. */
  uchar *key_buffer(const KEY &k) {
    if (key_buf_.size() < k.key_length + 8) key_buf_.resize(k.key_length + 8);
    return key_buf_.data();
  }
  /* A system-versioned table's history row (its row end is in the past): SQL does not show it
     unless asked FOR SYSTEM_TIME, and neither do we. */
  static bool history_row(TABLE *t) { return t->versioned() && !t->vers_end_field()->is_max(); }
  void emit_row(TABLE *t, const Open_index &idx, Row_sink &sink, bool omit_first = false);
  Store_status prepare_filters(TABLE *t, const Open_index &idx, const Find_request &req);
  int check_filters(TABLE *t, const Open_index &idx, const Find_request &req);
  /* The HandlerSocket scan loop shared by find and modify: visits matching rows, emitting them to
     sink (if any) and applying mod (if any) to each; *count gets the rows visited. */
  Store_status scan(Open_index &idx, const Find_request &req, Row_sink *sink, const Modify_request *mod,
                    uint64_t *count);

  /* ---- k-way merge over groups (mariadb_store_merge.cc) ---- */
  Store_status merge(Open_index &idx, const Find_request &req, Row_sink &sink, uint64_t *count);

  /* ---- key/value writes (mariadb_store_kv.cc) ---- */
  std::string kv_current_value(TABLE *t, const Open_index &idx, const Kv_layout &layout);
  Store_status kv_set_row(TABLE *t, const Open_index &idx, const Kv_layout &layout, const Kv_request &req,
                          std::string_view value, bool exists_physically);

  /* ---- the lock queue (mariadb_store_lane.cc) ---- */
  /* A write call as the worker's store was asked it (what Store::set_requester describes). */
  enum class Lane_kind : uint8_t { insert, modify, kv };
  struct Lane_call {
    Lane_kind kind;
    Open_index *idx;
    const Datum *values = nullptr;  // insert
    uint32_t nvalues = 0;
    bool upsert = false;
    const Find_request *req = nullptr;  // modify
    const Modify_request *mod = nullptr;
    const Kv_layout *layout = nullptr;  // kv
    const Kv_request *kv = nullptr;
    /* Where the outcome goes. */
    uint64_t *modified = nullptr;
    Insert_result *insert_result = nullptr;
    Kv_result *kv_result = nullptr;
  };
  /* The requester's queued request, if this call is it: true with *st its outcome, or lock_queued
     while it still waits. */
  bool lane_answer(const Lane_call &call, Store_status *st);
  /* After the worker tried the call itself: a row lock the requester has met for
     tablesocket_lock_queue_after hands the request to a lock-queue session (lock_queued). */
  Store_status after_attempt(const Lane_call &call, Store_status st);
  bool lane_submit(const Lane_call &call, uint64_t fp, uint64_t since_ms);
  static uint64_t fingerprint(const Lane_call &call, uint32_t slot);
  /* Runs on the job's own thread: the request on a store of its own, waiting for row locks. */
  void lane_run(Lane_job &job) const;
  /* Cancels the job (a write already committing finishes) and waits for its thread. */
  static void lane_stop(Lane_job &job);
  void reap_lanes();
  Store_status insert_here(Open_index &idx, const Datum *values, uint32_t n, bool upsert, Insert_result *result);
  Store_status modify_here(Open_index &idx, const Find_request &req, const Modify_request &mod, Row_sink &sink,
                           uint64_t *modified);
  Store_status kv_write_here(Open_index &idx, const Kv_layout &layout, const Kv_request &req, Kv_result *result);
  std::string charset_;
  const void *requester_ = nullptr;
  struct Row_wait {
    uint64_t fp;        // the request (fingerprint()) that met the lock
    uint64_t since_ms;  // first met it then
  };
  std::unordered_map<const void *, Row_wait> row_waits_;  // by requester
  std::vector<std::unique_ptr<Lane_job>> lane_jobs_;
  std::string lane_message_;  // the message of the outcome lane_answer() gave last
  bool write_committed_ = false;  // the last write call's outcome came from a job that committed
  mutable std::atomic<bool> lane_finished_{false};  // set by a job's thread (lane_run) when its outcome is there

  /* ---- writes (mariadb_store_write.cc) ---- */
  Store_status begin_write(Table_slot &s, const Open_index &idx);
  /* Ends a write request: keeps (ok) or undoes its changes. False if keeping failed. A one-row
     request (share) on a table where that is safe leaves its statement open for the next one. */
  bool end_write(Table_slot &s, bool ok);
  /* Consecutive one-row writes of one kind through one index of one InnoDB table, in one batch,
     share a statement, as the rows of a multi-row INSERT or UPDATE do: the statement start and end
     (InnoDB's table lock check, row template, the server's statement commit and handler reset)
     are paid once, not per request. Each request still fails alone: InnoDB undoes a failed row
     operation itself (to its own savepoint, or the whole transaction for a deadlock, which the
     batch already handles), so a failed request leaves the statement's earlier rows in place. Not
     where a statement commit does more (Galera's write set, a second handler for long UNIQUEs,
     system versioning, FULLTEXT, partitions, other engines, the session-dependent DEFAULTs that
     need the table's database current): see statement_sharable(). With the binary log on, the
     statement's rows wait in one pending row event and reach the batch's binary log cache when
     it ends: only while they certainly fit the cache's memory (binlog_sharing_room()), where
     writing them cannot fail (past it the cache spills to a file in tmpdir, which can, and then
     every row of the statement would be undone, not the one request that did not fit). */
  struct Shared_write {
    int64_t slot = -1;  // none open
    uint32_t index = 0;
    Stmt_share kind = Stmt_share::none;
  };
  Shared_write shared_write_;
  Shared_write request_share_;     // the current request's slot, index and kind (prepare_request)
  bool continues_shared_ = false;  // the current request runs in shared_write_'s statement
  uint64_t rows_changed_before_ = 0;  // the table handler's rows_changed as the request started
  bool statement_sharable(TABLE *t) const;
  /* Binary log on: an upper bound of the bytes this batch's rows put in its binary log cache, as
     long as every write of the batch was a one-row write of a table without BLOB/TEXT columns
     (kBinlogUnbounded from any other write on). */
  static constexpr uint64_t kBinlogUnbounded = ~uint64_t(0);
  uint64_t batch_binlog_bytes_ = 0;
  uint64_t binlog_cache_floor_ = ~uint64_t(0);  // the least binlog_cache_size/max_binlog_cache_size seen
  bool binlog_on() const;
  /* After a write request: adds its rows to batch_binlog_bytes_. */
  void count_binlog_bytes(TABLE *t, bool continued);
  /* A shared statement on t may take one more row (or start with this one): the batch's binary log
     cache stays in memory with any row of t and the statement's own events. */
  bool binlog_sharing_room(TABLE *t, bool starting) const;
  void end_shared_write();          // commits the open shared statement's rows (their requests answered)
  void shared_statement_failed();   // ending it failed: the batch's answered writes are lost
  Store_status store_value(Field *f, const Datum &v);
  Store_status failed_write(Table_slot &s, int handler_error);
  Store_status commit_failed();
  enum class Arith { stored, sign_flip, failed };
  Arith add_to_field(Field *f, const Datum &v, bool subtract);
  Store_status lock_failed();
  Store_status scan_failed(int handler_error);  // a scan's handler error (a recreated table: run it again)
  bool binlog_cache_full();
  /* The statement failed for max_binlog_cache_size or max_binlog_stmt_cache_size. */
  bool binlog_cache_error() const;
  /* Galera (mariadb_store_galera.cc): a batch that writes is a wsrep transaction of its THD. */
  Store_status galera_check_ready();
  Store_status galera_begin_write();
  Store_status galera_refusal(const char *why);
  static void galera_end_command(THD *thd);
  static bool galera_replicating(THD *thd);
  bool galera_take_table_locks();
  std::deque<MDL_request> galera_mdl_;  // the batch THD's table locks for a replicated commit
  static void galera_close(THD *thd);
  /* The code failed_write() takes for a status from a nested step (0 when it succeeded). */
  static int write_error_code(const Store_status &st);
  /* True (message in last_error_) when an insert leaves out a column that needs a value. */
  bool missing_required_values(TABLE *t, bool raise = true);
  /* A unique key all of whose columns the current insert gives, or MAX_KEY. */
  uint given_unique_key(TABLE *t) const;
  Store_status update_existing(TABLE *t, const Open_index &idx, const Datum *values, uint32_t n,
                               Insert_result *result);
  Store_status upsert_existing(TABLE *t, const Open_index &idx, const Datum *values, uint32_t n,
                               int dup_error, Insert_result *result);
  int modify_row(TABLE *t, const Open_index &idx, const Modify_request &mod);
  /* Every row written goes through one of these three, which do what SQL does around the engine's
     call: refuse a table whose triggers would be skipped, check CHECK constraints, keep a
     system-versioned table's history. 0, a handler error, or kBadValue (message in last_error_).
     write_new_row: record[0] is the row. write_changed_row: record[1] is the row as read, record[0]
     as it becomes (unchanged counts as done). remove_row: record[0] is the row as read. */
  int write_new_row(TABLE *t);
  int write_changed_row(TABLE *t);
  int remove_row(TABLE *t);
  /* kBadValue with the server's message when t has triggers for event (they would not run). */
  int refuse_triggers(TABLE *t, int event);
  int row_rejected();  // kBadValue, last_error_ = the server's message (or a generic one)
  /* errc carrying last_error_ as its message. */
  Store_status with_last_error(Store_errc errc) const {
    Store_status st = Store_status::of(errc);
    st.message = last_error_;
    return st;
  }
  Store_status bad_value_status() const { return with_last_error(Store_errc::bad_value); }
  /* True, with last_error_ = the server's message, when the statement raised an error. */
  bool take_stmt_error() {
    if (!thd_->is_error()) return false;
    last_error_ = thd_->get_stmt_da()->message();
    return true;
  }
  Store_status rejected_status() {  // row_rejected() as a status
    row_rejected();
    return bad_value_status();
  }
  /* What SQL computes for a row between filling its given columns and writing it: a new row's
     defaults and generated columns (complete_new_row; a DEFAULT calling NEXTVAL() is refused),
     a changed row's ON UPDATE defaults and generated columns (complete_changed_row). 0 or
     kBadValue (message in last_error_). */
  int complete_new_row(TABLE *t);
  int complete_changed_row(TABLE *t);
  /* True (message in last_error_) when a column this insert leaves out has a DEFAULT calling
     NEXTVAL(): the sequence is another table, which SQL opens and locks with the statement and a
     worker cannot; evaluating it without that crashes the server. */
  bool default_needs_a_sequence(TABLE *t);
  bool halloween_risk(TABLE *t, const Open_index &idx, const Modify_request &mod) const;
  /* Deleting the row under an index cursor loses the cursor's place (MEMORY's B-tree indexes step
     from the deleted key again and land on the wrong row): deletes collect positions first. */
  static bool deletes_lose_place(TABLE *t);

  Counters &counters_;
  const Config &cfg_;
  /* How long a slot closed for a waiting lock stays closed to writes (Table_slot::yielded_until_ms):
     longer than a check interval, so that every worker has given the table up at once. */
  uint64_t yield_backoff_ms() const { return 2 * uint64_t(cfg_.ddl_check_interval_ms) + 5; }
  /* How long a table no open index refers to stays open (Table_slot::unused_since_ms). */
  static constexpr uint64_t kKeepUnusedMs = 1000;
  uint64_t turn_end_ = ~uint64_t(0);  // rows_examined_ at which the current connection's turn ends
  uint64_t rows_examined_ = 0;  // in the current batch (index reads, whatever became of the row)
  /* THDs. owner_ opens and closes the tables and holds their metadata locks; a batch runs on
     thd_, one of batch_thds_: with commit overlap, a batch that wrote is committed on the other
     thread with its THD while the next batch runs on the other THD. Tables are lent to the
     batch THD (TABLE::in_use) while it locks them. */
  THD *owner_ = nullptr;
  THD *thd_ = nullptr;
  THD *batch_thds_[2] = {nullptr, nullptr};
  unsigned cur_ = 0;
  bool batch_isolation_set_ = false;  // store_lock() gave this batch's trx the session's isolation
  void *worker_stack_ = nullptr;
  std::string batch_info_;     // the batch THDs' PROCESSLIST state
  bool commit_overlap_ = true;
  /* close_batch_to_writes(): the open batch takes no more writes (until end_batch()). */
  bool writes_closed_ = false;
  uint64_t writes_refused_closed_ = 0;
  bool in_flight_ = false;     // a batch's commit runs on committer_
  int notify_fd_ = -1;
  std::unique_ptr<Commit_thread> committer_;
  bool thread_inited_ = false;
  CHARSET_INFO *client_cs_ = &my_charset_bin;
  bool client_ascii_based_ = false;  // client_cs_ reads 7-bit bytes as ASCII (my_charset_is_ascii_based)

  std::deque<Table_slot> slots_;  // deque: slots never move (MDL_request is not movable)
  std::vector<uint32_t> free_slots_;
  std::unordered_map<std::string, uint32_t> by_name_;
  std::vector<uint32_t> locked_slots_;
  size_t open_tables_ = 0;

  /* the batch: one transaction; each write request is one statement inside it */
  bool in_batch_ = false;
  bool batch_wrote_ = false;
  bool batch_lost_writes_ = false;
  bool batch_other_engines_ = false;  // a table of another engine than InnoDB took part
  /* A request waits for the next batch: this one's binary log cache (max_binlog_cache_size) or
     write set (wsrep_max_ws_rows) has no room for it. */
  bool batch_full_ = false;
  std::vector<uint32_t> written_slots_;  // slots written in the current batch
  uint64_t reads_of_written_ = 0;
  Table_slot *write_slot_ = nullptr;  // the slot the current write statement writes
  bool batch_blind_ = false;          // a write may have cascaded into other tables: every read counts
  void note_written_row(TABLE *t);
  void note_blind_write() { if (write_slot_) write_slot_->written_blind = true; }
  bool retry_next_batch_ = false;     // end_write(): the failed statement is to run in the next batch
  /* While the batch writes: MDL_BACKUP_TRANS_DML [0] (online-backup engines), MDL_BACKUP_DML [1]
     (the others); FTWRL and BACKUP STAGE wait for them. Released after the commit. */
  MDL_request backup_locks_[2];
  /* MDL_BACKUP_COMMIT, tried at the first write of a batch the worker commits itself (a table of
     another engine than InnoDB, whose statements take it at their own commit since the engine
     cannot roll back; commit overlap OFF; Galera) and held until that commit (as
     thd->backup_commit_lock, which ha_commit_trans() then uses instead of waiting for it): a
     backup at BLOCK_COMMIT parks the request before it writes anything, rather than stop the
     worker at the commit (2 s) and fail a write the engine kept. */
  MDL_request commit_lock_;
  bool batch_commits_here() const;  // the worker commits this batch itself, not the commit thread
  Store_status take_commit_lock();
  bool statement_db_set_ = false;  // a write statement made its table's database current
  std::string last_error_;

  std::vector<uchar> key_buf_, filter_buf_, refs_;
  std::vector<std::string> full_key_values_;  // by key part: the value asked for (prefix parts only)
  bool key_has_prefix_parts_ = false;         // set by build_key()
  /* Set by build_key(): an exact match (=, an IN value, L's prefix, a memcached key) on the key
     finds no row, because storing it into its column lost what the match depends on: a character
     the column's character set lacks or an invalid byte sequence (the image holds '?' there, which
     HandlerSocket, storing raw bytes, never matched; SQL refuses or matches nothing); with
     whole_values (memcached keys, writes) any loss: cut, rounded, clamped, an impossible date (SQL's
     UPDATE and DELETE change nothing then). Reads keep HandlerSocket's clamping, which its own
     regression suite checks. */
  bool key_names_no_row_ = false;
  /* What storing a key value into its column lost, ordered by weight. */
  enum class Key_loss : uint8_t { none, converted, unrepresentable };
  /* From the conditions the store raised after the first `before`. */
  Key_loss key_loss(Field *f, ulong before) const;
  /* Integer columns: a string with a fraction is stored rounded without a condition. */
  /* A column whose values never end in a space (numbers, temporals, ENUM): a key's trailing
     spaces are dropped before it is stored. */
  static bool ignores_trailing_spaces(const Field *f);
  static bool rounds_silently(const Field *f);
  std::vector<uint32_t> filter_offsets_;
  char val_buf_[MAX_FIELD_WIDTH];
  String conv_buf_;
};


}  // namespace tablesocket
#endif
