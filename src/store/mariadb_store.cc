/* Store backed by MariaDB's handler API: tables, batches and reads. Writes are in
   mariadb_store_write.cc. One instance per worker thread; owns that thread's THDs (the owner of
   the tables, two that batches alternate on) and its commit thread.

   Tables stay open across batches, the way SQL HANDLER keeps them: each slot holds a TABLE, an
   explicit-duration MDL ticket (the owner's) and a reusable MYSQL_LOCK. A batch is one
   transaction: it locks the slots it touches (lent to the batch's THD), every request is a
   statement inside it, and end_batch() unlocks and commits once, on the commit thread when commit
   overlap is on and the batch wrote only InnoDB tables. Between batches yield_to_ddl() closes
   every slot whose metadata lock some DDL (ALTER, RENAME, DROP, TRUNCATE) is waiting for, or whose
   share FLUSH TABLES marked old, so DDL waits at most one batch. Locks are only ever *tried* on a worker thread (metadata locks with
   try_acquire_lock, row locks with innodb_lock_wait_timeout=0): a busy table or row parks one
   request, never the worker. */
#include "store/mariadb_store.h"

#include "common/clock.h"
#include "common/names.h"

#include <sys/statvfs.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "set_var.h"

namespace tablesocket {
namespace {

std::string slot_key(std::string_view db, std::string_view table) {
  std::string k;
  k.reserve(db.size() + table.size() + 1);
  k.append(db).push_back('\0');
  k.append(table);
  return k;
}

/* An optional sign and decimal digits, nothing else: what an integer column stores as written
   (or, out of its range, with a warning). */
bool is_integer_literal(const Datum &v) {
  size_t i = v.len && (v.ptr[0] == '-' || v.ptr[0] == '+') ? 1 : 0;
  if (i == v.len) return false;
  for (; i < v.len; ++i)
    if (v.ptr[i] < '0' || v.ptr[i] > '9') return false;
  return true;
}

/* Up to 18 decimal digits, nothing else (no sign: SQL's reading of those is left to the server):
   their value, which no 64-bit integer overflows. */
bool small_digits(const Datum &v, uint64_t *out) {
  if (v.len == 0 || v.len > 18) return false;
  uint64_t n = 0;
  for (size_t i = 0; i < v.len; ++i) {
    const unsigned d = unsigned(v.ptr[i]) - '0';
    if (d > 9) return false;
    n = n * 10 + d;
  }
  *out = n;
  return true;
}

/* Splits a comma-separated list into names (an empty list gives no names; an empty name fails). */
bool split_names(std::string_view s, std::vector<std::string> &out) {
  out.clear();
  if (s.empty()) return true;
  size_t start = 0;
  while (true) {
    size_t comma = s.find(',', start);
    std::string_view part = s.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    if (part.empty()) return false;
    out.emplace_back(part);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return true;
}

}  // namespace

/* Every byte below 0x80, eight bytes at a time: a get checks each text column it returns, a write each text value. (The
   server's my_string_repertoire() answers the same a byte at a time, with a call and charset
   checks: ~100 instructions per column here against ~20, counted with callgrind.) */
bool is_ascii(const char *p, size_t n) {
  uint64_t any = 0;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, p + i, 8);
    any |= w;
  }
  for (; i < n; ++i) any |= uint8_t(p[i]);
  return !(any & 0x8080808080808080ULL);
}

/* The worker's THDs live as long as the plugin, where an SQL session takes the server's settings
   when it connects: so each batch takes, at its start, those SET GLOBAL changes that decide what
   its writes store and log, as a new SQL session would: sql_mode, time_zone (TIMESTAMP values),
   auto_increment_increment / _offset (multi-primary setups), server_id, gtid_domain_id and
   binlog_row_image (its binary log events). (Word-sized reads, as SQL's own reads of them.) */
static void take_global_settings(THD *thd) {
  const system_variables &g = global_system_variables;
  thd->variables.sql_mode = g.sql_mode;
  thd->variables.time_zone = g.time_zone;
  thd->variables.auto_increment_increment = g.auto_increment_increment;
  thd->variables.auto_increment_offset = g.auto_increment_offset;
  thd->variables.server_id = g.server_id;
  thd->variables.gtid_domain_id = g.gtid_domain_id;
  thd->variables.binlog_row_image = g.binlog_row_image;
}

THD *Mariadb_store::new_thd(const char *thread_name) {
  THD *thd = create_thd();  // registers in server_threads: visible in SHOW PROCESSLIST, killed at shutdown
  if (!thd) return nullptr;
  thd->thread_stack = static_cast<char *>(worker_stack_);
  thd->store_globals();
  thd->security_ctx->skip_grants();
  thd->proc_info = thread_name;
  thd->variables.option_bits |= OPTION_BIN_LOG;
  /* Metadata, table-level and row locks are only tried, never waited for (ensure_locked), and so
     is the backup commit lock of a batch the worker commits itself (begin_write, commit_lock_); the
     commit thread waits tablesocket_lock_wait_timeout for its own. A bound for anything left. */
  thd->variables.lock_wait_timeout = 2;
  /* Each request is a statement of its own, like an autocommit one: its reads see what was
     committed when it ran. A batch is one transaction of many clients' requests, and may stay open
     into the worker's next loop (commit overlap): at REPEATABLE READ its first read's snapshot
     would serve requests that arrived later, missing writes acknowledged meanwhile. So batches run
     at READ COMMITTED at most (end_statements() ends a loop's statements); a lower server level
     is kept. Per statement the difference is REPEATABLE READ's gap locks, which no single request
     needs. */
  if (thd->variables.tx_isolation > ISO_READ_COMMITTED) thd->variables.tx_isolation = ISO_READ_COMMITTED;
  thd->tx_isolation = enum_tx_isolation(thd->variables.tx_isolation);
  /* The server's default access mode (tx_read_only) is followed by begin_write(), which
     refuses writes while it is ON; the sessions themselves stay read-write (InnoDB must never see
     a write in a read-only transaction). */
  thd->variables.tx_read_only = false;
  thd->tx_read_only = false;
  /* Writes are logged as row events whatever the server's binlog_format (begin_write); the session
     says so too, which InnoDB checks before it writes at READ COMMITTED. */
  thd->variables.binlog_format = BINLOG_FORMAT_ROW;
  lex_start(thd);
  set_no_wait_row_locks(thd);
  return thd;
}

bool Mariadb_store::attach(const char *thread_name, const char *charset) {
  if (my_thread_init()) {
    sql_print_error("tablesocket: my_thread_init failed for %s", thread_name);
    return false;
  }
  thread_inited_ = true;
  char stack_anchor;
  worker_stack_ = &stack_anchor;  // near the top of this thread's stack, as THD::thread_stack wants
  batch_info_ = std::string(thread_name) + " batches";
  owner_ = new_thd(thread_name);
  if (owner_) warn_rollback_on_timeout(owner_);
  if (owner_) batch_thds_[0] = new_thd(batch_info_.c_str());
  if (owner_ && batch_thds_[0] && commit_overlap_) batch_thds_[1] = new_thd(batch_info_.c_str());
  if (!owner_ || !batch_thds_[0] || (commit_overlap_ && !batch_thds_[1])) {
    sql_print_error("tablesocket: cannot create a THD for %s", thread_name);
    return false;
  }
  charset_ = charset;
  client_cs_ = get_charset_by_csname(charset, MY_CS_PRIMARY, MYF(0));
  if (!client_cs_) {
    sql_print_error("tablesocket: unknown character set '%s'", charset);
    return false;
  }
  client_ascii_based_ = my_charset_is_ascii_based(client_cs_);
  if (commit_overlap_) {
    std::string error;
    committer_ = std::make_unique<Commit_thread>();
    committer_->set_lock_wait(&cfg_.lock_wait_timeout_ms);
    if (!committer_->start(thread_name, &error)) {
      sql_print_error("tablesocket: cannot start the commit thread of %s: %s", thread_name, error.c_str());
      committer_.reset();
      return false;
    }
  }
  thd_ = batch_thds_[0];
  attach_thd(thd_);
  return true;
}

void Mariadb_store::attach_thd(THD *thd) {
  thd->thread_stack = static_cast<char *>(worker_stack_);
  thd->store_globals();
}

void Mariadb_store::warn_rollback_on_timeout(THD *thd) {
  /* With innodb_rollback_on_timeout a lock wait timeout rolls back the whole transaction, not the
     statement: a write that meets a locked row (tried without waiting, see below) would take the
     other writes of its batch with it, whose clients are then disconnected unanswered. */
  static const char name[] = "innodb_rollback_on_timeout";
  static std::atomic<bool> warned{false};
  sys_var *var = find_sys_var(thd, name, sizeof name - 1, true);
  if (!var) return;  // InnoDB not loaded: a my_bool otherwise
  static const LEX_CSTRING no_base = {nullptr, 0};
  const uchar *v = var->value_ptr(thd, OPT_GLOBAL, &no_base);
  if (v && *reinterpret_cast<const my_bool *>(v) && !warned.exchange(true))
    sql_print_warning("tablesocket: innodb_rollback_on_timeout is ON: a write that meets a row "
                      "locked by another transaction rolls back its whole batch, and the other "
                      "clients that wrote in that batch are disconnected unanswered. Run with "
                      "innodb_rollback_on_timeout=OFF (the default) for per-request failures.");
}

bool Mariadb_store::set_row_lock_wait(THD *thd, unsigned seconds) {
  static const char name[] = "innodb_lock_wait_timeout";
  sys_var *var = find_sys_var(thd, name, sizeof name - 1, false);
  bool ok = false;
  if (var) {
    Item *value = new (thd->mem_root) Item_uint(thd, ulonglong(seconds));
    LEX_CSTRING no_base = {nullptr, 0};
    set_var sv(thd, OPT_SESSION, var, &no_base, value);
    ok = value && !sv.check(thd) && !sv.update(thd);
  }
  clear_diagnostics(thd);
  return ok;
}

void Mariadb_store::set_no_wait_row_locks(THD *thd) {
  /* A row lock held by someone else fails at once (HA_ERR_LOCK_WAIT_TIMEOUT, statement rolled
     back) and the request is retried later, or queued for the lock on a session of its own. */
  if (!set_row_lock_wait(thd, 0))
    sql_print_warning("tablesocket: cannot set innodb_lock_wait_timeout=0 for a worker; a row lock "
                      "wait will hold up the other clients of that worker");
}

Mariadb_store::~Mariadb_store() {
  for (auto &job : lane_jobs_) {
    lane_stop(*job);
  }
  lane_jobs_.clear();
  if (thd_) {
    end_batch(false);
    bool lost;
    if (in_flight_) reap_commit(kWaitForever, &lost);
    if (committer_) committer_->stop();
    attach_thd(owner_);
    for (auto &s : slots_)
      if (s.table) close_slot(s);
  }
  /* Each THD is destroyed as the current THD of this, the thread that created it. */
  for (THD *t : {batch_thds_[1], batch_thds_[0], owner_}) {
    if (!t) continue;
    attach_thd(t);
    galera_close(t);
    destroy_thd(t);
    set_current_thd(nullptr);
  }
  thd_ = owner_ = batch_thds_[0] = batch_thds_[1] = nullptr;
  if (thread_inited_) my_thread_end();
}

bool Mariadb_store::killed() {
  /* The THDs at home on this thread (a committing one is the commit thread's business). */
  bool stop = false;
  for (THD *t : {owner_, thd_}) {
    killed_state k = t->killed;
    if (k == NOT_KILLED) continue;
    if (k >= KILL_SYSTEM_THREAD && k <= KILL_SERVER_HARD) stop = true;
    /* KILL <id> from a user: there is no statement to abort between batches; keep serving. */
    else t->reset_killed();
  }
  return stop;
}

void Mariadb_store::clear_diagnostics(THD *thd) {
  thd->clear_error();
  thd->get_stmt_da()->reset_diagnostics_area();
  thd->get_stmt_da()->clear_warning_info(thd->query_id);
}

bool Mariadb_store::open_unlisted(TABLE_LIST &tl, Open_table_context &ot) {
  TABLE *saved = owner_->open_tables;
  owner_->set_open_tables(nullptr);
  const bool err = open_table(owner_, &tl, &ot);
  owner_->set_open_tables(saved);
  return err;
}

Store_status Mariadb_store::ensure_open(Table_slot &s, bool want_write) {
  if (s.table) {
    if (!(want_write && s.read_only_open)) return {};
    /* Opened for reading while a write lock was not to be had: a write needs it reopened. */
    if (s.locked) return Store_status::of(Store_errc::table_busy);
    close_slot(s);
  }
  if (killed()) return Store_status::of(Store_errc::server_shutdown);
  /* Given up for a waiting lock a moment ago (yield_to_ddl): not reopened for writing yet. */
  if (s.yielded_until_ms && monotonic_ms() >= s.yielded_until_ms) s.yielded_until_ms = 0;
  Store_status st = s.for_write && s.yielded_until_ms ? Store_status::of(Store_errc::table_busy)
                                                       : open_slot(s, s.for_write);
  if (st.errc == Store_errc::table_busy && s.for_write && !want_write) {
    /* A table written through this worker, now under a read lock that lets readers in and keeps
       writers out (LOCK TABLES ... READ, FLUSH TABLES ... FOR EXPORT, FLUSH TABLES WITH READ
       LOCK), or waited for by one: opened for reading, as SQL's SELECT opens it, so reads go on;
       the next write reopens it for writing (and waits, as SQL's would, until the lock is gone). */
    st = open_slot(s, false);
    if (st.ok()) s.read_only_open = true;
  }
  return st;
}

Store_status Mariadb_store::open_slot(Table_slot &s, bool write) {
  s.read_only_open = false;
  /* Tables belong to owner_ (its metadata locks, its open), which stays on this thread while batch
     THDs go to the commit thread and back; errors raised meanwhile land in its diagnostics. */
  Owner_scope as_owner(*this);
  owner_->lex->sql_command = thd_->lex->sql_command;  // what store_lock() takes the lock type from
  const enum_mdl_type mdl_type = write ? MDL_SHARED_WRITE : MDL_SHARED_READ;
  MDL_REQUEST_INIT(&s.mdl_request, MDL_key::TABLE, s.db.c_str(), s.name.c_str(), mdl_type, MDL_EXPLICIT);
  if (owner_->mdl_context.try_acquire_lock(&s.mdl_request)) {
    clear_diagnostics(owner_);
    return Store_status::of(Store_errc::table_open_failed);
  }
  if (!s.mdl_request.ticket) return Store_status::of(Store_errc::table_busy);  // DDL holds or waits for it

  LEX_CSTRING db = {s.db.c_str(), s.db.size()};
  LEX_CSTRING name = {s.name.c_str(), s.name.size()};
  const thr_lock_type lock_type = write ? TL_WRITE : TL_READ;
  if (!s.table_list) s.table_list.reset(new TABLE_LIST);
  TABLE_LIST &tl = *s.table_list;
  tl.init_one_table(&db, &name, &name, lock_type);
  tl.mdl_request.ticket = s.mdl_request.ticket;
  tl.required_type = TABLE_TYPE_NORMAL;  // views and sequences are refused here, not crashed on
  Open_table_context ot(owner_, MYSQL_OPEN_HAS_MDL_LOCK);
  bool err = open_unlisted(tl, ot);
  TABLE *t = tl.table;
  if (t) {
    /* The names it points at must outlive this call too: the share's own (the slot may move). */
    tl.db = t->s->db;
    tl.table_name = t->s->table_name;
    tl.alias = t->s->table_name;
  }
  auto give_up = [&](Store_errc e) {
    clear_diagnostics(owner_);
    if (t) {
      t->open_by_handler = 0;
      close_thread_table(owner_, &t);
    }
    owner_->mdl_context.release_lock(s.mdl_request.ticket);
    s.mdl_request.ticket = nullptr;
    return Store_status::of(e);
  };
  if (err || !t) {
    bool retry = ot.can_recover_from_failed_open();
    t = nullptr;
    return give_up(retry ? Store_errc::table_busy : Store_errc::table_open_failed);
  }
  /* Only ordinary user tables with at least one index are served (not system or temporary tables). */
  if (t->s->tmp_table != NO_TMP_TABLE || t->s->table_category != TABLE_CATEGORY_USER || !t->s->keys)
    return give_up(Store_errc::table_open_failed);
  const bool referenced = write && t->file->referenced_by_foreign_key();
  if (write && (referenced || fk_refs_.count(slot_key(s.db, s.name))) && !lock_fk_tables(s, t, referenced)) {
    release_fk_locks(s);
    return give_up(Store_errc::table_busy);
  }
  t->reginfo.lock_type = lock_type;
  t->use_all_columns();
  /* A row event's after image has every column; its before image is what binlog_row_image asks
     for (every column with FULL, the primary key with MINIMAL, no BLOBs with NOBLOB), as SQL's. */
  t->rpl_write_set = t->write_set;
  t->open_by_handler = 1;
  t->next = nullptr;
  s.lock = get_lock_data(owner_, &t, 1, GET_LOCK_STORE_LOCKS);
  if (!s.lock) return give_up(Store_errc::table_open_failed);
  owner_->mdl_context.set_needs_thr_lock_abort(true);
  s.table = t;
  ++s.generation;
  ++open_tables_;
  counters_.add(counters_.table_opens);
  counters_.open_tables.fetch_add(1, std::memory_order_relaxed);
  return {};
}

bool Table_slot::ddl_waits() const {
  if (!table) return false;
  if (table->s->tdc->flushed || mdl_request.ticket->has_pending_conflicting_lock()) return true;
  for (const MDL_request &r : fk_locks)
    if (r.ticket->has_pending_conflicting_lock()) return true;
  return false;
}

bool Mariadb_store::lock_fk_tables(Table_slot &s, TABLE *t, bool referenced) {
  /* As SQL's prepare_fk_prelocking_list() for an INSERT, UPDATE or DELETE of t (a slot opened for
     writing does all three): every table whose foreign key references t, write-locked where
     ON DELETE or ON UPDATE changes it, and then, through it, the tables referencing it. Tables
     beyond the first level are opened for a moment to read their own references.

     A copying ALTER TABLE of a referencing table detaches its foreign keys from the referenced
     table for a moment near its end, while it still holds the referencing table: the engine then
     does not list it. So what referenced t (directly or further down) at earlier opens is locked
     too, and forgotten only once every lock was taken (any such ALTER is over then; the next open
     looks again). */
  const std::string key = slot_key(s.db, s.name);
  auto acquire = [&](const Fk_ref &f) {
    for (const MDL_request &r : s.fk_locks)
      if (r.key.db_name() == f.db && r.key.name() == f.name && (r.type == MDL_SHARED_WRITE || !f.writes))
        return true;
    MDL_request &r = s.fk_locks.emplace_back();
    MDL_REQUEST_INIT(&r, MDL_key::TABLE, f.db.c_str(), f.name.c_str(), f.writes ? MDL_SHARED_WRITE : MDL_SHARED_READ,
                     MDL_EXPLICIT);
    return !owner_->mdl_context.try_acquire_lock(&r) && r.ticket;
  };
  std::vector<Fk_ref> found;
  struct Pending { std::string db, name; int depth; };
  std::vector<Pending> todo;
  auto add_children = [&](TABLE *from, int depth) {
    List<FOREIGN_KEY_INFO> fks;
    from->file->get_parent_foreign_key_list(owner_, &fks);
    List_iterator<FOREIGN_KEY_INFO> it(fks);
    while (FOREIGN_KEY_INFO *fk = it++) {
      Fk_ref f{std::string(fk->foreign_db->str, fk->foreign_db->length),
               std::string(fk->foreign_table->str, fk->foreign_table->length),
               fk_modifies_child(fk->delete_method) || fk_modifies_child(fk->update_method)};
      if (f.db == s.db && f.name == s.name) continue;  // references itself: locked already
      if (!merge_ref(found, f)) continue;  // locked (at least as strongly) already
      if (!acquire(f)) return false;
      if (f.writes && depth < 15) todo.push_back({f.db, f.name, depth + 1});  // InnoDB cascades 15 deep at most
    }
    return true;
  };
  bool ok = !referenced || add_children(t, 1);
  while (ok && !todo.empty()) {
    Pending p = std::move(todo.back());
    todo.pop_back();
    TABLE_LIST tl;
    LEX_CSTRING db = {p.db.c_str(), p.db.size()}, name = {p.name.c_str(), p.name.size()};
    tl.init_one_table(&db, &name, &name, TL_READ);
    for (const MDL_request &r : s.fk_locks)
      if (r.key.db_name() == p.db && r.key.name() == p.name) tl.mdl_request.ticket = r.ticket;
    Open_table_context ot(owner_, MYSQL_OPEN_HAS_MDL_LOCK);
    const bool err = open_unlisted(tl, ot);
    TABLE *child = tl.table;
    if (err || !child) {
      /* Busy (DDL on it): try again later. Missing or unreadable: nothing to follow through it. */
      if (child) close_thread_table(owner_, &child);
      ok = !ot.can_recover_from_failed_open();
      clear_diagnostics(owner_);
      continue;
    }
    if (child->file->referenced_by_foreign_key()) ok = add_children(child, p.depth);
    close_thread_table(owner_, &child);
  }
  /* What referenced t before and the engine did not list now. */
  auto it = fk_refs_.find(key);
  bool earlier_ok = true;
  if (ok && it != fk_refs_.end())
    for (const Fk_ref &f : it->second)
      if (!(earlier_ok = acquire(f))) break;
  if (ok && earlier_ok) {
    if (found.empty()) fk_refs_.erase(key);
    else fk_refs_[key] = std::move(found);
    return true;
  }
  std::vector<Fk_ref> &known = fk_refs_[key];  // keep both
  for (const Fk_ref &f : found) merge_ref(known, f);
  return false;
}

bool Mariadb_store::merge_ref(std::vector<Fk_ref> &refs, const Fk_ref &f) {
  for (Fk_ref &r : refs)
    if (r.db == f.db && r.name == f.name) {
      if (r.writes || !f.writes) return false;
      r.writes = true;
      return true;
    }
  refs.push_back(f);
  return true;
}

void Mariadb_store::release_fk_locks(Table_slot &s) {
  for (MDL_request &r : s.fk_locks)
    if (r.ticket) owner_->mdl_context.release_lock(r.ticket);
  s.fk_locks.clear();
}

void Mariadb_store::close_slot(Table_slot &s) {
  if (!s.table) return;
  /* Its metadata lock keeps DDL away from the table until the commit of a batch that may have
     written it is done. */
  wait_commit_done();
  Owner_scope as_owner(*this);
  TABLE *t = s.table;
  t->in_use = owner_;
  t->file->ha_index_or_rnd_end();
  if (s.lock) {
    reset_lock_data(s.lock, true);
    my_free(s.lock);
    s.lock = nullptr;
  }
  t->open_by_handler = 0;
  close_thread_table(owner_, &t);
  owner_->mdl_context.release_lock(s.mdl_request.ticket);
  s.mdl_request.ticket = nullptr;
  release_fk_locks(s);
  s.table = nullptr;
  s.locked = false;
  s.reading = false;
  --open_tables_;
  counters_.open_tables.fetch_sub(1, std::memory_order_relaxed);
}

Store_status Mariadb_store::ensure_locked(uint32_t slot_no) {
  Table_slot &s = slots_[slot_no];
  if (s.locked) return {};
  /* A DDL waits for the table: no new statement uses it until yield_to_ddl() has closed it (the
     request waits, as an SQL statement queues behind a pending exclusive metadata lock). */
  if (s.ddl_waits()) return Store_status::of(Store_errc::table_busy);
  if (Store_status st = galera_check_ready(); !st.ok()) return st;
  if (!in_batch_) {
    /* The batch is one transaction: every request of every connection in it shares one commit. */
    thd_->variables.option_bits |= OPTION_BEGIN;
    thd_->server_status |= SERVER_STATUS_IN_TRANS;
    take_global_settings(thd_);
    thd_->set_query_id(next_query_id());  // the transaction's implicit XID is taken from it
    in_batch_ = true;
    batch_wrote_ = false;
    batch_lost_writes_ = false;
    batch_other_engines_ = false;
    batch_isolation_set_ = false;
    batch_full_ = false;
    batch_binlog_bytes_ = 0;
    /* The cache of a THD is sized when it is first used, by the settings of then: the least value
       seen is what it has at most (a later SET GLOBAL does not resize it). */
    binlog_cache_floor_ = std::min({binlog_cache_floor_, uint64_t(binlog_cache_size), uint64_t(max_binlog_cache_size)});
  }
  {
    /* Only InnoDB batches are handed to the commit thread (Aria and MyISAM keep per-handler
       transaction state their commit walks); remembered for the whole batch, whose statements
       may end before it does (end_statements). */
    handlerton *ht = s.table->file->partition_ht();
    if (!ht || ht->db_type != DB_TYPE_INNODB) {
      /* The batch is now committed by the worker (even if this table is only read): if it
         already wrote, it takes the backup commit lock first (see commit_lock_), or this request
         waits for a later batch, before the worker would wait for that lock at the commit. */
      if (batch_wrote_ && !batch_other_engines_) {
        if (Store_status st = take_commit_lock(); !st.ok()) return st;
      }
      batch_other_engines_ = true;
    }
  }
  s.table->in_use = thd_;  // lent to the batch's THD (handlers ask it for their transaction)
  if (!batch_isolation_set_ && locked_slots_.empty() && s.table->file->partition_ht() &&
      s.table->file->partition_ht()->db_type == DB_TYPE_INNODB) {
    /* InnoDB takes the session's transaction isolation level in store_lock(), which SQL calls for
       every statement (the slot called it once, for owner_), and forgets it when a transaction
       commits: so once per batch, before its first InnoDB table is locked. InnoDB uses no
       THR_LOCK: it (and the partition handler over it) stores nothing into the array. */
    THR_LOCK_DATA *scratch[2];
    s.table->file->store_lock(thd_, scratch, s.opened_for_write() ? TL_WRITE : TL_READ);
    batch_isolation_set_ = true;
  }
  for (THR_LOCK_DATA **p = s.lock->locks, **e = s.lock->locks + s.lock->lock_count; p < e; ++p)
    (*p)->type = (*p)->org_type;
  TABLE *saved = thd_->open_tables;
  thd_->set_open_tables(s.table);  // mysql_lock_tables() aborts through thd->open_tables
  /* A table-level lock (MyISAM, Aria, MEMORY; InnoDB takes none) held by someone else, e.g. a long
     SQL SELECT on a MyISAM table holding its read lock against our write: only tried, as metadata
     and row locks are; the request parks and is retried (until tablesocket_lock_wait_timeout)
     while the worker serves everyone else. Waiting here stopped the worker, every client of it,
     for the THD's lock_wait_timeout and then failed the write. */
  const ulong saved_wait = thd_->variables.lock_wait_timeout;
  thd_->variables.lock_wait_timeout = 0;
  bool err = mysql_lock_tables(thd_, s.lock, MYSQL_LOCK_NOT_TEMPORARY);
  thd_->variables.lock_wait_timeout = saved_wait;
  thd_->set_open_tables(saved);
  if (err) {
    const Diagnostics_area *da = thd_->get_stmt_da();
    if (da->is_error() && da->sql_errno() == ER_LOCK_WAIT_TIMEOUT && !thd_->killed) {
      clear_diagnostics();
      return Store_status::of(Store_errc::table_busy);
    }
    return lock_failed();
  }
  s.locked = true;
  s.reading = false;
  locked_slots_.push_back(slot_no);
  return {};
}

Store_status Mariadb_store::prepare_request(Open_index &idx, enum_sql_command command, uint8_t privileges,
                                            TABLE **table, Stmt_share share) {
  continues_shared_ = false;
  request_share_ = Shared_write{};
  if (!idx.valid()) return Store_status::of(Store_errc::index_not_found);
  if (shared_write_.slot >= 0 &&
      (share == Stmt_share::none || shared_write_.slot != int64_t(idx.slot_) || shared_write_.index != idx.index_no_ ||
       shared_write_.kind != share || !binlog_sharing_room(slots_[idx.slot_].table, false)))
    end_shared_write();
  Table_slot &s = slots_[idx.slot_];
  thd_->lex->sql_command = command;
  Store_status st = ensure_open(s, command != SQLCOM_SELECT);
  if (!st.ok()) return st;
  if (idx.generation_ != s.generation) {
    st = resolve(s, idx);
    if (!st.ok()) return st;
  }
  if (idx.principal_) {
    st = authorize(idx, privileges);
    if (!st.ok()) return st;
  }
  st = ensure_locked(idx.slot_);
  if (!st.ok()) return st;
  TABLE *t = s.table;
  /* Statement start for InnoDB: consistent (lock-free) reads for finds, exclusive row locks for
     the rows a write request reads. Consecutive reads of a table in one batch share a statement
     (as the ranges of one SELECT do), which keeps InnoDB's row template and open index. */
  const bool read = command == SQLCOM_SELECT;
  if (read && (batch_blind_ || (s.written && s.written_blind))) ++reads_of_written_;
  if (share != Stmt_share::none) {
    request_share_ = Shared_write{int64_t(idx.slot_), idx.index_no_, share};
    rows_changed_before_ = t->file->rows_changed;
  }
  if (shared_write_.slot >= 0) {
    continues_shared_ = true;  // the same slot, index and kind (else ended above)
  } else if (!(read && s.reading)) {
    if (int e = t->file->start_stmt(thd_, read ? TL_READ : TL_WRITE))
      return Store_status::of(Store_errc::handler_error, e);
  }
  s.reading = read;
  *table = t;
  return {};
}

void reset_handler(TABLE *t) {
  /* What SQL does to every table at the end of a statement: among other things it re-arms
     handler::mark_trx_read_write(), without which a table written in an earlier transaction
     would not be marked read-write again, and commits would skip two-phase commit with the
     binary log. Then our own column bitmaps (every column, full after images) are restored. */
  t->file->ha_index_or_rnd_end();
  t->file->ha_reset();
  t->use_all_columns();
  t->rpl_write_set = t->write_set;
}

bool Mariadb_store::commit_thd(THD *thd, bool wrote, MDL_ticket *const backup_locks[kBackupLocks], const char *refused) {
  bool lost = false;
  if (refused || trans_commit(thd)) {
    /* Nothing of this batch is durable: the worker closes every connection that wrote in it rather
       than let an acknowledged write vanish. */
    const char *why = refused                             ? refused
                      : thd->get_stmt_da()->is_error() ? thd->get_stmt_da()->message()
                                                         : "commit failed";
    sql_print_warning("tablesocket: batch commit failed: %s", why);
    lost = wrote;
    trans_rollback(thd);
  }
  /* Transaction-duration metadata locks (a replicated batch's, see galera_take_table_locks) end
     with the transaction, as SQL releases them, before the wsrep command ends: that may replay a
     transaction Galera aborted after certification, behind a replicated DDL that needs them. */
  thd->variables.option_bits &= ~OPTION_BEGIN;
  thd->server_status &= ~SERVER_STATUS_IN_TRANS;
  thd->mdl_context.release_transactional_locks(thd);
  galera_end_command(thd);  // a replicated batch's wsrep command ends with its commit
  thd->backup_commit_lock = nullptr;  // a pre-taken one (backup_locks[2]), if any
  for (int i = 0; i < kBackupLocks; ++i)
    if (backup_locks[i]) thd->mdl_context.release_lock(backup_locks[i]);
  clear_diagnostics(thd);
  /* What the batch's statements allocated on the THD's arena (as SQL frees it after each
     statement): e.g. the second handler a table with a long UNIQUE needs for its writes. */
  free_root(thd->mem_root, MYF(MY_KEEP_PREALLOC));
  return lost;
}

Store_status Mariadb_store::lock_failed() {
  /* The server is shutting down (our THDs were killed): say so, rather than blame the table. */
  const killed_state k = thd_->killed;
  if (k >= KILL_SYSTEM_THREAD && k <= KILL_SERVER_HARD) {
    clear_diagnostics();
    return Store_status::of(Store_errc::server_shutdown);
  }
  /* The server's reason (e.g. "Table 't' is read only" under innodb_read_only), for the clients
     whose protocol can carry it; HandlerSocket's answer stays its own "lock_tables". */
  last_error_ = thd_->get_stmt_da()->is_error() ? thd_->get_stmt_da()->message() : "cannot lock the table";
  clear_diagnostics();
  return with_last_error(Store_errc::lock_failed);
}

bool Mariadb_store::can_hand_off() const {
  if (!committer_ || !batch_wrote_ || in_flight_ || batch_other_engines_ || commit_lock_.ticket) return false;
  /* A Galera commit waits for the cluster's commit order, which may wait for an applier, which
     may need row locks of the worker's next open batch - which would wait for this commit: the
     worker commits a replicated batch itself (the applier aborts a batch in its way). */
  if (galera_replicating(thd_)) return false;
  return true;
}

void Mariadb_store::end_shared_write() {
  if (shared_write_.slot < 0) return;
  Table_slot &s = slots_[size_t(shared_write_.slot)];
  shared_write_ = Shared_write{};
  if (thd_->binlog_flush_pending_rows_event(true) || trans_commit_stmt(thd_)) shared_statement_failed();
  thd_->reset_binlog_for_next_statement();
  reset_handler(s.table);  // its row logging too
}

void Mariadb_store::shared_statement_failed() {
  /* The statement's rows are InnoDB's only (statement_sharable): its end commits nothing that can
     fail (with the binary log: its row event goes to the cache's memory, binlog_sharing_room()).
     Should it fail all the same, the batch's answered writes are not to be trusted. */
  sql_print_warning("tablesocket: ending a write statement failed: %s",
                    thd_->get_stmt_da()->is_error() ? thd_->get_stmt_da()->message() : "unknown error");
  trans_rollback(thd_);
  batch_lost_writes_ = true;
  thd_->variables.option_bits |= OPTION_BEGIN;
  thd_->server_status |= SERVER_STATUS_IN_TRANS;
  clear_diagnostics();
}

void Mariadb_store::unlock_batch_tables() {
  if (shared_write_.slot >= 0) {
    shared_write_ = Shared_write{};  // its statement ends with the others' below (its handler too)
    if (thd_->binlog_flush_pending_rows_event(true)) shared_statement_failed();
    thd_->reset_binlog_for_next_statement();
  }
  trans_commit_stmt(thd_);
  for (uint32_t n : locked_slots_) {
    Table_slot &s = slots_[n];
    if (!s.locked) continue;
    s.table->file->ha_index_or_rnd_end();
    mysql_unlock_tables(thd_, s.lock, false);
    reset_handler(s.table);
    s.locked = false;
    s.reading = false;
  }
  locked_slots_.clear();
}

void Mariadb_store::end_statements() {
  /* As SQL ends a statement inside a transaction. At READ COMMITTED (see new_thd) InnoDB closes
     the transaction's read view when its last table is unlocked; the next read opens a new one. */
  if (in_batch_) unlock_batch_tables();
  /* A batch closed to writes stays open for reads only, until the commit before it is done: its
     row budget then counts per loop, as a new batch's would (else reads would spend it and the
     worker would wait for that commit with every client). */
  if (writes_closed_) rows_examined_ = 0;
}

bool Mariadb_store::end_batch(bool nobody_waiting) {
  if (!in_batch_) return false;
  /* The backup commit lock is tried now, for the commit wherever it runs. Free: the commit takes
     it with it, so whether it will wait for a backup (BACKUP STAGE BLOCK_COMMIT, FTWRL) is known
     at once: when it will, the next batch takes no writes from now on (commit_waits_for_lock),
     where before writes slipped in until the commit thread got to try the lock, and every read
     of their rows then waited for the backup to end. Committed here instead of handed off when
     nobody is waiting to be served and the lock is ours: a backup must not hold the worker. */
  const bool can = can_hand_off() && !batch_lost_writes_;
  const bool got = can && take_commit_lock().ok() && commit_lock_.ticket;
  /* Nobody to serve meanwhile: the worker commits the batch itself (no thread switches), unless
     the commit may hang (commit_may_hang()); then it hands it off and waits for it, 100 ms at
     most, past which it serves whoever comes while the commit goes on. */
  const bool nobody = got && nobody_waiting;
  const bool here = nobody && !commit_may_hang();
  const bool wait_here = nobody && !here;
  const bool hand_off = can && !here;
  if (hand_off && got) thd_->backup_commit_lock = nullptr;  // the commit thread points it at its own request
  /* A replicated batch: its THD takes over the written tables' locks and they are closed after the
     unlock below (see galera_take_table_locks). */
  std::vector<uint32_t> galera_close;
  if (batch_wrote_ && !batch_lost_writes_ && galera_replicating(thd_)) {
    if (!galera_take_table_locks()) {
      trans_rollback(thd_);  // a DDL waits: the batch yields to it, its writers are closed
      batch_lost_writes_ = true;
    }
    galera_close = written_slots_;
  }
  unlock_batch_tables();
  for (uint32_t n : galera_close) close_slot(slots_[n]);
  in_batch_ = false;
  rows_examined_ = 0;
  batch_full_ = false;
  writes_closed_ = false;
  for (uint32_t n : written_slots_) {
    Table_slot &w = slots_[n];
    w.written = w.written_blind = false;
    w.written_refs.clear();
  }
  written_slots_.clear();
  batch_blind_ = false;
  write_slot_ = nullptr;
  MDL_ticket *const backup_locks[kBackupLocks] = {backup_locks_[0].ticket, backup_locks_[1].ticket,
                                                  commit_lock_.ticket};
  backup_locks_[0].ticket = backup_locks_[1].ticket = commit_lock_.ticket = nullptr;
  free_root(owner_->mem_root, MYF(MY_KEEP_PREALLOC));  // what table opens left on it
  if (hand_off) {
    /* The tables are unlocked (as SQL releases them at the end of a statement, long before a
       transaction's COMMIT); the transaction lives on in thd_, which the commit thread now
       commits, durably, while the next batch runs on the other THD. The tables' metadata locks
       stay with owner_, so DDL cannot slip in before the commit is done (see close_slot). */
    THD *committing = thd_;
    cur_ ^= 1;
    thd_ = batch_thds_[cur_];
    attach_thd(thd_);
    in_flight_ = true;
    committer_->submit(committing, backup_locks, batch_wrote_, notify_fd_);
    if (wait_here) {
      if (committer_->wait_for(kInlineCommitWaitMs)) {
        /* Done as if committed here (the worker served no one meanwhile). */
        in_flight_ = false;
        if (committer_->wait()) batch_lost_writes_ = true;
        return false;
      }
      slow_commit_until_ms_ = monotonic_ms() + kSlowCommitMemoryMs;
    }
    counters_.add(counters_.commits_overlapped);
    return true;
  }
  /* Here: nothing written (a read-only transaction ends, nothing to wait for), or an engine
     besides InnoDB took part, or overlap is off. Writes commit in batch order: the commit
     thread's (if any) first. */
  if (batch_wrote_) wait_commit_done();
  const uint64_t started = here ? monotonic_ms() : 0;
  if (commit_thd(thd_, batch_wrote_, backup_locks)) batch_lost_writes_ = true;
  if (here && monotonic_ms() - started >= kInlineCommitWaitMs)
    slow_commit_until_ms_ = monotonic_ms() + kSlowCommitMemoryMs;  // it held the worker: not again soon
  galera_mdl_.clear();  // their tickets: released by commit_thd()
  return false;
}

bool Mariadb_store::commit_may_hang() {
  const uint64_t now = coarse_monotonic_ms();
  if (now < slow_commit_until_ms_) return true;
  if (!mysql_bin_log.is_open() || !log_bin_basename) return false;
  if (now - space_checked_ms_ >= 100) {
    space_checked_ms_ = now;
    std::string dir(log_bin_basename);
    const size_t slash = dir.rfind('/');
    dir = slash == std::string::npos ? std::string(".") : dir.substr(0, slash ? slash : 1);
    struct statvfs fs;
    binlog_space_low_ = statvfs(dir.c_str(), &fs) == 0 && uint64_t(fs.f_bavail) * fs.f_frsize < kBinlogSpaceLow;
  }
  return binlog_space_low_;
}

void Mariadb_store::wait_commit_done() {
  if (in_flight_) committer_->wait();
}

bool Mariadb_store::reap_commit(unsigned wait_ms, bool *lost) {
  if (!in_flight_) return false;
  if (wait_ms != kWaitForever && !(wait_ms ? committer_->wait_for(wait_ms) : committer_->done())) return false;
  *lost = committer_->wait();
  in_flight_ = false;
  return true;
}

void Mariadb_store::renew_batch_budget() {
  if (!in_batch_) return;
  writes_closed_ = true;
  rows_examined_ = 0;
  batch_full_ = false;  // what filled the binary log cache waits for the next batch anyway
}

/* ---- the commit thread ---- */

bool Commit_thread::start(const char *name, std::string *error) {
  name_ = std::string(name) + " commit";
  try {
    thread_ = std::thread([this] { run(); });
  } catch (const std::exception &e) {
    *error = e.what();
    return false;
  }
  std::unique_lock<std::mutex> lk(m_);
  cv_.wait(lk, [this] { return started_; });
  if (init_failed_) {
    lk.unlock();
    thread_.join();
    *error = "my_thread_init failed";
    return false;
  }
  return true;
}

void Commit_thread::stop() {
  {
    std::lock_guard<std::mutex> g(m_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Commit_thread::submit(THD *thd, MDL_ticket *const backup_locks[kBackupLocks], bool wrote, int notify_fd) {
  {
    std::lock_guard<std::mutex> g(m_);
    thd_ = thd;
    for (int i = 0; i < kBackupLocks; ++i) backup_locks_[i] = backup_locks[i];
    lock_settled_.store(!wrote || backup_locks[2], std::memory_order_release);
    wrote_ = wrote;
    notify_fd_ = notify_fd;
    busy_ = true;
  }
  cv_.notify_all();
}

void Commit_thread::abort_lock_wait() {
  std::lock_guard<std::mutex> g(m_);  // thd_ stays valid while busy_ (run() clears both under m_)
  if (busy_ && thd_ && lock_waiting_.load(std::memory_order_relaxed)) thd_->awake(KILL_CONNECTION);
}

bool Commit_thread::done() {
  std::lock_guard<std::mutex> g(m_);
  return !busy_;
}

bool Commit_thread::wait() {
  std::unique_lock<std::mutex> lk(m_);
  cv_.wait(lk, [this] { return !busy_; });
  return lost_;
}

bool Commit_thread::wait_for(unsigned ms) {
  std::unique_lock<std::mutex> lk(m_);
  waiting_ = true;
  const bool done = cv_.wait_for(lk, std::chrono::milliseconds(ms), [this] { return !busy_; });
  waiting_ = false;
  return done;
}

void Commit_thread::run() {
  const bool failed = my_thread_init();
  std::unique_lock<std::mutex> lk(m_);
  started_ = true;
  init_failed_ = failed;
  cv_.notify_all();
  if (failed) return;
  while (true) {
    cv_.wait(lk, [this] { return stop_ || (busy_ && thd_); });
    if (!thd_) break;  // stop_, nothing to commit
    THD *thd = thd_;
    lk.unlock();
    char stack_anchor;
    thd->thread_stack = &stack_anchor;
    thd->store_globals();
    const char *saved_info = thd->proc_info;
    thd->proc_info = name_.c_str();
    /* The one lock a commit waits for is the backup lock a read-write transaction's commit takes
       (held off by BACKUP STAGE BLOCK_COMMIT and FLUSH TABLES WITH READ LOCK). Taken here, before
       ha_commit_trans() (which then uses it, as it does for Spider), so that the worker can tell
       a commit waiting for it (lock_waiting()) from one waiting for its fsync; and for as long as
       SQL's COMMIT waits for it (the server's lock_wait_timeout, a day by default; or
       tablesocket_lock_wait_timeout if longer), rather than the 2 s a worker's own statements get:
       a backup holding BLOCK_COMMIT delays the batch's writers, as it delays SQL's, instead of
       failing the commit, which closes their connections (a helper's backup held it past the 50 s
       of tablesocket_lock_wait_timeout: every writer of the batch was disconnected). Writes that
       come meanwhile wait for this commit (close_batch_to_writes), as SQL's wait at their COMMIT;
       reads go on. */
    MDL_request commit_lock;
    const char *refused = nullptr;
    if (wrote_) {
      MDL_REQUEST_INIT(&commit_lock, MDL_key::BACKUP, "", "", MDL_BACKUP_COMMIT, MDL_EXPLICIT);
      if (backup_locks_[2]) {
        /* Taken at the hand-off on this THD (Mariadb_store::end_batch): ours to use and release. */
        commit_lock.ticket = backup_locks_[2];
        backup_locks_[2] = nullptr;
      } else if (thd->mdl_context.try_acquire_lock(&commit_lock)) {
        refused = "cannot take the backup commit lock";
      } else if (!commit_lock.ticket) {
        lock_waiting_.store(true, std::memory_order_relaxed);
        const unsigned wait_ms = lock_wait_ms_ ? lock_wait_ms_->get() : 2000;
        const double wait_s = std::max(double(global_system_variables.lock_wait_timeout),
                                       double(std::max(1u, (wait_ms + 999) / 1000)));
        if (thd->mdl_context.acquire_lock(&commit_lock, wait_s))
          refused = thd->killed ? "the plugin stopped (UNINSTALL or shutdown) while the commit waited for the "
                                  "backup lock (BACKUP STAGE BLOCK_COMMIT or FLUSH TABLES WITH READ LOCK)"
                                : "timed out waiting for the backup lock (BACKUP STAGE BLOCK_COMMIT or FLUSH TABLES "
                                  "WITH READ LOCK held longer than lock_wait_timeout)";
        lock_waiting_.store(false, std::memory_order_relaxed);
      }
      if (commit_lock.ticket) thd->backup_commit_lock = &commit_lock;
      lock_settled_.store(true, std::memory_order_release);
    }
    const bool lost = Mariadb_store::commit_thd(thd, wrote_, backup_locks_, refused);
    if (commit_lock.ticket) {
      thd->backup_commit_lock = nullptr;
      thd->mdl_context.release_lock(commit_lock.ticket);
    }
    thd->proc_info = saved_info;
    thd->reset_globals();  // the worker attaches it again when it takes it back
    lk.lock();
    thd_ = nullptr;
    lost_ = lost;
    busy_ = false;
    const int fd = waiting_ ? -1 : notify_fd_;  // a waiter in wait_for() takes it from here
    lk.unlock();
    cv_.notify_all();
    if (fd >= 0) {
      uint64_t one = 1;
      (void)!::write(fd, &one, sizeof one);
    }
    lk.lock();
  }
  lk.unlock();
  my_thread_end();
}

void Mariadb_store::yield_to_ddl() {
  if (!lane_jobs_.empty()) reap_lanes();
  /* A table's metadata lock is released only once a commit that may have written it is done:
     for DDL the worker waits for the commit (close_slot); a table merely unused is closed on a
     later call rather than wait. A table the open batch wrote (a batch carried over while the
     previous commit runs) is kept until that batch is handed off: its transaction's changes are
     not committed, and a DDL that got the table now (an online ALTER applying its log, then
     swapping the table) would lose them. Meanwhile its requests wait (ensure_locked). */
  const bool committing = in_flight_ && !committer_->done();
  const uint64_t now = monotonic_ms();
  for (uint32_t n = 0; n < slots_.size(); ++n) {
    Table_slot &s = slots_[n];
    if (!s.in_use || s.locked || (in_batch_ && s.written)) continue;
    const bool ddl_waits = s.ddl_waits();
    /* A table no open index refers to any more stays open a moment (kKeepUnusedMs): clients that
       connect per request open it again at once, and reopening it (metadata lock, table cache)
       would cost each of them. DDL, FLUSH TABLES or a waiting LOCK TABLES close it at once. */
    const bool unused = s.refs == 0 && !committing && now - s.unused_since_ms >= kKeepUnusedMs;
    if (s.table && (ddl_waits || unused)) {
      if (s.refs != 0) counters_.add(counters_.table_yields);
      close_slot(s);
      /* Not reopened for writing at once: a waiting LOCK TABLES ... READ (or FLUSH TABLES ... FOR
         EXPORT) does not keep new write locks out, as a waiting DDL does; it is granted only at a
         moment no one holds one, which SQL statements give it between them and workers holding
         their tables across batches never would (two workers reopening in turn starved it, and
         every client of the table waited, for seconds; found by a helper). Reads reopen the table
         for reading meanwhile. */
      if (ddl_waits) s.yielded_until_ms = monotonic_ms() + yield_backoff_ms();
    }
    if (s.refs == 0 && !s.table) {
      by_name_.erase(slot_key(s.db, s.name));
      s.in_use = false;
      free_slots_.push_back(n);
    }
  }
}

void Mariadb_store::release_slot(uint32_t slot) {
  if (slot < slots_.size() && slots_[slot].refs && --slots_[slot].refs == 0)
    slots_[slot].unused_since_ms = monotonic_ms();
}

Store_status Mariadb_store::resolve(Table_slot &s, Open_index &idx) {
  TABLE *t = s.table;
  TABLE_SHARE *sh = t->s;
  std::string_view want = idx.index_name_;
  uint found = MAX_KEY;
  if (!want.empty() && want[0] >= '0' && want[0] <= '9') {
    uint64_t n = 0;
    for (char c : want) {
      if (c < '0' || c > '9' || n > MAX_KEY) return Store_status::of(Store_errc::index_not_found);
      n = n * 10 + uint64_t(c - '0');
    }
    if (n < sh->keys) found = uint(n);
  } else {
    if (want.empty()) want = "PRIMARY";
    for (uint i = 0; i < sh->keys; ++i) {
      const KEY &k = t->key_info[i];
      if (names_equal(std::string_view(k.name.str, k.name.length), want)) { found = i; break; }
    }
  }
  if (found == MAX_KEY) return Store_status::of(Store_errc::index_not_found);
  /* Indexes that cannot find a row by its key values: FULLTEXT and SPATIAL ones, and the hidden
     hash behind a UNIQUE too long for a B-tree (its key is a hash no client can give). */
  const KEY &fk = t->key_info[found];
  if ((fk.flags & (HA_FULLTEXT | HA_SPATIAL)) || fk.algorithm == HA_KEY_ALG_LONG_HASH ||
      fk.algorithm == HA_KEY_ALG_FULLTEXT || fk.algorithm == HA_KEY_ALG_RTREE)
    return Store_status::of(Store_errc::index_unusable);

  auto lookup = [&](const std::vector<std::string> &names, std::vector<uint16_t> &out) {
    out.clear();
    for (const auto &nm : names) {
      uint j = 0;
      for (Field **f = t->field; *f; ++f, ++j)
        if (names_equal(std::string_view((*f)->field_name.str, (*f)->field_name.length), nm)) break;
      if (j >= sh->fields) return false;
      out.push_back(uint16_t(j));
    }
    return true;
  };
  if (!lookup(idx.column_names_, idx.columns_) || !lookup(idx.filter_names_, idx.filter_columns_))
    return Store_status::of(Store_errc::column_not_found);
  if (idx.unique_on_first_column_) {
    /* A system-versioned table's unique keys end with the row end (one current row per key). */
    uint parts = fk.user_defined_key_parts;
    if (parts == 2 && t->versioned() && fk.key_part[1].field == t->vers_end_field()) parts = 1;
    if (!(fk.flags & HA_NOSAME) || parts != 1 || idx.columns_.empty() ||
        fk.key_part[0].fieldnr != idx.columns_[0] + 1u)
      return Store_status::of(Store_errc::bad_container_index);
  }
  idx.index_no_ = found;
  idx.key_parts_ = t->key_info[found].user_defined_key_parts;
  idx.generation_ = s.generation;
  return {};
}

Store_status Mariadb_store::open_index(const Index_spec &spec, Open_index &out) {
  /* The server reads names as C strings: one with a NUL byte would name the table before it. */
  const auto has_nul = [](std::string_view name) { return name.find('\0') != std::string::npos; };
  if (has_nul(spec.db) || has_nul(spec.table)) return Store_status::of(Store_errc::table_open_failed);
  if (has_nul(spec.index)) return Store_status::of(Store_errc::index_not_found);
  std::string key = slot_key(spec.db, spec.table);
  uint32_t slot_no;
  auto it = by_name_.find(key);
  if (it != by_name_.end()) {
    slot_no = it->second;
  } else {
    if (free_slots_.empty()) {
      slot_no = uint32_t(slots_.size());
      slots_.emplace_back();
    } else {
      slot_no = free_slots_.back();
      free_slots_.pop_back();
    }
    Table_slot &s = slots_[slot_no];
    s.db.assign(spec.db);
    s.name.assign(spec.table);
    s.in_use = true;
    s.refs = 0;
    s.for_write = spec.for_write;
    /* A reused slot starts clean: what the table it held last went through is not this one's (a
       table given up for a waiting DDL left yielded_until_ms, and the next table in its slot
       refused writes for it: parked, they waited out the backoff). */
    s.read_only_open = false;
    s.written = false;
    s.written_refs.clear();
    s.written_blind = false;
    s.yielded_until_ms = 0;
    by_name_.emplace(std::move(key), slot_no);
  }
  Table_slot &s = slots_[slot_no];
  if (spec.for_write && !s.for_write) {
    /* A read slot is upgraded: reopened with a write metadata lock. */
    if (s.locked) return Store_status::of(Store_errc::table_busy);
    close_slot(s);
    s.for_write = true;
  }
  Open_index idx;
  idx.store_ = this;
  idx.slot_ = slot_no;
  ++s.refs;
  idx.for_write_ = spec.for_write;
  idx.unique_on_first_column_ = spec.unique_on_first_column;
  idx.principal_ = spec.principal;
  idx.index_name_.assign(spec.index);
  auto count_names = [](std::string_view s) { return s.empty() ? 0 : size_t(std::count(s.begin(), s.end(), ',')) + 1; };
  if (count_names(spec.columns) > kMaxIndexColumns || count_names(spec.filter_columns) > kMaxIndexColumns)
    return Store_status::of(Store_errc::too_many_columns);
  if (!split_names(spec.columns, idx.column_names_) || !split_names(spec.filter_columns, idx.filter_names_))
    return Store_status::of(Store_errc::column_not_found);  // idx's destructor drops the reference
  Store_status st;
  if (spec.principal) {
    st = check_table_visible(static_cast<Mariadb_principal &>(*spec.principal), s);
    if (!st.ok()) return st;
  }
  st = ensure_open(s, false);
  if (!st.ok()) return st;
  st = resolve(s, idx);
  if (!st.ok()) return st;
  if (spec.principal) {
    st = authorize_open(idx);
    if (!st.ok()) return st;
  }
  out = std::move(idx);
  return {};
}

/* Key part i's value: the IN value in_index for the IN column, the request's key otherwise. */
static const Datum &key_part_value(const Find_request &req, uint32_t i, uint32_t in_index) {
  return (req.has_in && i == req.in_column) ? req.in_values[in_index] : req.keys[i];
}

/* Whether digits n fit integer column f (rounds_silently): stored as they are, with no condition. */
static bool integer_fits(const Field *f, uint64_t n) {
  const uint32_t bytes = f->pack_length();
  if (bytes >= 8) return true;  // small_digits() gives at most 18 digits
  const bool is_unsigned = f->flags & UNSIGNED_FLAG;
  return n <= (is_unsigned ? (uint64_t(1) << (8 * bytes)) - 1 : (uint64_t(1) << (8 * bytes - 1)) - 1);
}

bool Mariadb_store::build_integer_key(TABLE *t, KEY &k, const Find_request &req, uint32_t in_index, uint *key_len) {
  uint64_t n[MAX_REF_PARTS];
  for (uint32_t i = 0; i < req.nkeys; ++i) {
    const KEY_PART_INFO &kp = k.key_part[i];
    const Datum &v = key_part_value(req, i, in_index);
    const Field *f = t->field[kp.fieldnr - 1];
    if (v.is_null() || !rounds_silently(f) || !small_digits(v, &n[i]) || !integer_fits(f, n[i])) return false;
  }
  uint len = 0;
  for (uint32_t i = 0; i < req.nkeys; ++i) {
    KEY_PART_INFO &kp = k.key_part[i];
    Field *f = t->field[kp.fieldnr - 1];
    f->set_notnull();
    f->store(longlong(n[i]), true);
    len += kp.store_length;
  }
  key_has_prefix_parts_ = false;
  key_names_no_row_ = false;
  key_copy(key_buffer(k), t->record[0], &k, len);
  *key_len = len;
  return true;
}

void Mariadb_store::build_key(TABLE *t, KEY &k, const Find_request &req, uint32_t in_index, uint *key_len,
                              bool whole_values) {
  /* The common case first: integer key parts given digits that fit (a primary key id), which
     store exactly, with no condition to look for (nor any left to drop). */
  if (req.nkeys <= MAX_REF_PARTS && !thd_->get_stmt_da()->warn_count() &&
      build_integer_key(t, k, req, in_index, key_len))
    return;
  uint len = 0;
  key_has_prefix_parts_ = false;
  /* A conversion that loses something shows as a condition (never raised as an error, even in a
     strict write statement): key_names_no_row_. The conditions are the key's alone, and dropped. */
  Key_loss loss = Key_loss::none;
  Diagnostics_area *da = thd_->get_stmt_da();
  const ulong row_for_warning = da->current_row_for_warning();  // a write's "at row 1"
  auto drop_conditions = [&] {
    if (!da->warn_count()) return;
    da->clear_warning_info(thd_->query_id);
    da->set_current_row_for_warning(row_for_warning);
  };
  drop_conditions();
  const enum_check_fields saved_check = thd_->count_cuted_fields;
  const bool saved_abort = thd_->abort_on_warning;
  const ha_rows saved_cuted = thd_->cuted_fields;
  thd_->count_cuted_fields = CHECK_FIELD_WARN;
  thd_->abort_on_warning = false;
  for (uint32_t i = 0; i < req.nkeys; ++i) {
    KEY_PART_INFO &kp = k.key_part[i];
    const Datum &v = key_part_value(req, i, in_index);
    /* The column itself: a prefix part's kp.field is a copy shortened to the prefix, which would
       cut the value (an error under strict sql_mode). key_copy() takes the prefix. */
    Field *f = t->field[kp.fieldnr - 1];
    if (v.is_null() && f->real_maybe_null()) {
      f->set_null();
    } else if (v.is_null()) {
      /* NULL on a NOT NULL key part: no row holds it, so an exact match (=, an IN value, L, a
         merge's group) finds nothing, as SQL's `WHERE c = NULL` (HandlerSocket matched the empty
         value, 0 or '', and its D deleted those rows). A range starts from the empty value, as
         HandlerSocket's did. Storing it also overwrites what an earlier request left in the record. */
      f->store("", 0, client_cs_);
      loss = Key_loss::unrepresentable;
    } else {
      f->set_notnull();
      const ulong before = da->warn_count();
      /* Trailing spaces after a number, a date or an ENUM name are not part of the value (SQL's
         `WHERE n = '5 '` matches 5, with a note): stored without them, so a write by such a key
         changes the row a read finds. */
      Datum sv = v;
      if (ignores_trailing_spaces(f) && client_cs_->mbminlen == 1)
        while (sv.len && sv.ptr[sv.len - 1] == ' ') --sv.len;
      /* An integer column given digits takes their value as a number: what the text conversion
         stores (and warns about, out of the column's range), without parsing it again. */
      uint64_t n;
      if (rounds_silently(f) && small_digits(sv, &n))
        f->store(longlong(n), true);
      else
        f->store(sv.ptr, sv.len, client_cs_);
      /* '' in an ENUM without that member is its empty error value (index 0), which SQL's
         `WHERE e = ''` matches: exact, though the store warns. */
      const bool enum_error_value = sv.len == 0 && f->real_type() == MYSQL_TYPE_ENUM;
      if (da->warn_count() != before && !enum_error_value) loss = std::max(loss, key_loss(f, before));
      if (whole_values && loss == Key_loss::none && rounds_silently(f) && !is_integer_literal(sv)) {
        /* An integer column takes '1.5' as 2 without a word: compare the numbers. (Digits alone
           are stored exactly or with a warning: nothing to compare.) */
        int err = 0;
        char *end = const_cast<char *>(sv.ptr) + sv.len;
        const double want = client_cs_->cset->strntod(const_cast<CHARSET_INFO *>(client_cs_),
                                                      const_cast<char *>(sv.ptr), sv.len, &end, &err);
        if (!err && want != f->val_real()) loss = Key_loss::converted;
      }
    }
    if (kp.key_part_flag & HA_PART_KEY_SEG) {
      /* The key image holds only the prefix: keep the whole value, in the column's character set. */
      if (full_key_values_.size() < req.nkeys) full_key_values_.resize(req.nkeys);
      std::string &want = full_key_values_[i];
      want.clear();
      if (!v.is_null()) {
        CHARSET_INFO *cs = f->charset();
        if (cs == &my_charset_bin || cs == client_cs_ || client_cs_ == &my_charset_bin) {
          want.assign(v.ptr, v.len);
        } else {
          uint errors;
          conv_buf_.copy(v.ptr, v.len, client_cs_, cs, &errors);
          want.assign(conv_buf_.ptr(), conv_buf_.length());
        }
      }
      key_has_prefix_parts_ = true;
    }
    len += kp.store_length;
  }
  drop_conditions();
  key_names_no_row_ = loss == Key_loss::unrepresentable || (whole_values && loss != Key_loss::none);
  thd_->count_cuted_fields = saved_check;
  thd_->abort_on_warning = saved_abort;
  thd_->cuted_fields = saved_cuted;
  key_copy(key_buffer(k), t->record[0], &k, len);
  *key_len = len;
}

bool Mariadb_store::ignores_trailing_spaces(const Field *f) {
  switch (f->real_type()) {
    case MYSQL_TYPE_TINY: case MYSQL_TYPE_SHORT: case MYSQL_TYPE_INT24: case MYSQL_TYPE_LONG:
    case MYSQL_TYPE_LONGLONG: case MYSQL_TYPE_DECIMAL: case MYSQL_TYPE_NEWDECIMAL: case MYSQL_TYPE_FLOAT:
    case MYSQL_TYPE_DOUBLE: case MYSQL_TYPE_YEAR: case MYSQL_TYPE_DATE: case MYSQL_TYPE_NEWDATE:
    case MYSQL_TYPE_TIME: case MYSQL_TYPE_TIME2: case MYSQL_TYPE_DATETIME: case MYSQL_TYPE_DATETIME2:
    case MYSQL_TYPE_TIMESTAMP: case MYSQL_TYPE_TIMESTAMP2: case MYSQL_TYPE_ENUM:
      return true;
    default:  // strings compare with their own PAD rules; BIT takes the bytes as they are
      return false;
  }
}

bool Mariadb_store::rounds_silently(const Field *f) {
  switch (f->real_type()) {
    case MYSQL_TYPE_TINY: case MYSQL_TYPE_SHORT: case MYSQL_TYPE_INT24: case MYSQL_TYPE_LONG:
    case MYSQL_TYPE_LONGLONG:
      return true;
    default:
      return false;
  }
}

Mariadb_store::Key_loss Mariadb_store::key_loss(Field *f, ulong before) const {
  /* Any warning (cut, rounded, out of range, an invalid or unrepresentable character, an
     impossible date) means the column now holds another value than the key asked for; so does a
     note, except a string column's note that only trailing spaces were cut (equal under PAD
     SPACE, as SQL compares). On a string column "Incorrect string value" is a character the
     conversion could not carry. */
  bool string_column = false;
  switch (f->real_type()) {
    case MYSQL_TYPE_VARCHAR: case MYSQL_TYPE_VAR_STRING: case MYSQL_TYPE_STRING: case MYSQL_TYPE_TINY_BLOB:
    case MYSQL_TYPE_MEDIUM_BLOB: case MYSQL_TYPE_LONG_BLOB: case MYSQL_TYPE_BLOB:
      string_column = true;
      break;
    default: break;
  }
  Diagnostics_area::Sql_condition_iterator it = thd_->get_stmt_da()->sql_conditions();
  Key_loss loss = Key_loss::none;
  ulong n = 0;
  while (const Sql_condition *c = it++) {
    if (n++ < before) continue;
    if (string_column && c->get_sql_errno() == ER_TRUNCATED_WRONG_VALUE_FOR_FIELD) return Key_loss::unrepresentable;
    if (!string_column || c->get_level() != Sql_condition::WARN_LEVEL_NOTE) loss = Key_loss::converted;
  }
  if (n <= before) loss = Key_loss::converted;  // more conditions than the list holds: assume the worst
  return loss;
}

int Mariadb_store::full_key_cmp(const KEY &k, uint nparts) {
  const uchar *key = key_buf_.data();
  String buf(val_buf_, sizeof(val_buf_), &my_charset_bin);
  for (uint i = 0; i < nparts; ++i) {
    KEY_PART_INFO &kp = k.key_part[i];
    int c = key_cmp(&kp, key, kp.store_length);
    if (c == 0 && (kp.key_part_flag & HA_PART_KEY_SEG) && !kp.field->is_null()) {
      Field *f = kp.field->table->field[kp.fieldnr - 1];  // the whole column, not the prefix copy
      String *s = f->val_str(&buf, &buf);
      const std::string &want = full_key_values_[i];
      CHARSET_INFO *cs = f->charset();
      c = s ? cs->coll->strnncollsp(cs, reinterpret_cast<const uchar *>(s->ptr()), s->length(),
                                    reinterpret_cast<const uchar *>(want.data()), want.size())
            : -1;
      c = c < 0 ? -1 : c > 0 ? 1 : 0;
      if (kp.key_part_flag & HA_REVERSE_SORT) c = -c;
    }
    if (c) return c;
    key += kp.store_length;
  }
  return 0;
}

void Mariadb_store::note_written_row(TABLE *t) {
  Table_slot *s = write_slot_;
  if (!s || s->written_blind) return;
  if (s->written_refs.size() >= 4096) {  // a big batch: stop keeping rows, count every read
    s->written_blind = true;
    s->written_refs.clear();
    return;
  }
  t->file->position(t->record[0]);
  try {
    s->written_refs.insert(t->file->ref, t->file->ref_length);
  } catch (const std::bad_alloc &) {
    s->written_blind = true;  // no memory to keep rows: every read of the table counts
    s->written_refs.clear();
  }
}

void Mariadb_store::emit_row(TABLE *t, const Open_index &idx, Row_sink &sink, bool omit_first) {
  {
    const Table_slot &s = slots_[idx.slot_];
    if (s.written && !s.written_blind && !batch_blind_) {
      t->file->position(t->record[0]);
      if (s.written_refs.contains(t->file->ref, t->file->ref_length))
        ++reads_of_written_;
    }
  }
  for (uint16_t fn : idx.columns_) {
    if (omit_first) {
      omit_first = false;
      sink.value("", 0);
      continue;
    }
    Field *f = t->field[fn];
    if (f->is_null()) {
      sink.null();
      continue;
    }
    /* A fresh String per column: a string column's val_str() points it into the record, and the
       next column's conversion (a DATETIME's text) would then allocate one for every row. */
    String buf(val_buf_, sizeof(val_buf_), &my_charset_bin);
    String *s = f->val_str(&buf, &buf);
    if (!s) {
      sink.null();
      continue;
    }
    CHARSET_INFO *cs = s->charset();
    if (client_cs_ != &my_charset_bin && cs != &my_charset_bin && cs != client_cs_ &&
        f->cmp_type() == STRING_RESULT && !my_charset_same(cs, client_cs_) &&
        !(client_ascii_based_ && my_charset_is_ascii_based(cs) && is_ascii(s->ptr(), s->length()))) {
      /* Text is returned in the client character set, as SQL returns it in character_set_results
         (7-bit text between two ASCII-based character sets is the same bytes in both). */
      uint errors;
      conv_buf_.copy(s->ptr(), s->length(), cs, client_cs_, &errors);
      s = &conv_buf_;
    }
    sink.value(s->ptr(), s->length());
  }
}

Store_status Mariadb_store::prepare_filters(TABLE *t, const Open_index &idx, const Find_request &req) {
  for (uint32_t i = 0; i < req.nfilters; ++i) {
    if (req.filters[i].column >= idx.filter_columns_.size())
      return Store_status::of(Store_errc::bad_filter_column);
    /* A NULL operand needs no comparison, so it works on BLOB/TEXT columns too. */
    if ((t->field[idx.filter_columns_[req.filters[i].column]]->flags & BLOB_FLAG) && !req.filters[i].value.is_null())
      return Store_status::of(Store_errc::filter_on_blob);
  }
  if (!req.nfilters) return {};
  /* Filter operands are converted once, into the column's own format, before any row is read. */
  filter_offsets_.resize(req.nfilters);
  size_t total = 1;  // Field_medium::cmp() may read one byte past the value
  for (uint32_t i = 0; i < req.nfilters; ++i)
    if (!req.filters[i].value.is_null()) total += t->field[idx.filter_columns_[req.filters[i].column]]->pack_length();
  if (filter_buf_.size() < total) filter_buf_.resize(total);
  size_t pos = 0;
  for (uint32_t i = 0; i < req.nfilters; ++i) {
    const Filter &fl = req.filters[i];
    Field *f = t->field[idx.filter_columns_[fl.column]];
    filter_offsets_[i] = uint32_t(pos);
    if (fl.value.is_null()) continue;
    f->store(fl.value.ptr, fl.value.len, client_cs_);
    memcpy(filter_buf_.data() + pos, f->ptr, f->pack_length());
    pos += f->pack_length();
  }
  return {};
}

/* 0: row passes; 1: skip the row (F); -1: stop the scan (W). */
int Mariadb_store::check_filters(TABLE *t, const Open_index &idx, const Find_request &req) {
  for (uint32_t i = 0; i < req.nfilters; ++i) {
    const Filter &fl = req.filters[i];
    Field *f = t->field[idx.filter_columns_[fl.column]];
    int cv;
    if (f->is_null())
      cv = fl.value.is_null() ? 0 : -1;
    else
      cv = fl.value.is_null() ? 1 : f->cmp(filter_buf_.data() + filter_offsets_[i]);
    bool pass;
    switch (fl.op) {
      case Compare_op::eq: pass = cv == 0; break;
      case Compare_op::ne: pass = cv != 0; break;
      case Compare_op::lt: pass = cv < 0; break;
      case Compare_op::le: pass = cv <= 0; break;
      case Compare_op::gt: pass = cv > 0; break;
      case Compare_op::ge: pass = cv >= 0; break;
      default: pass = false;
    }
    if (!pass) return fl.type == Filter_type::skip ? 1 : -1;
  }
  return 0;
}

Store_status Mariadb_store::find(Open_index &idx, const Find_request &req, Row_sink &sink) {
  TABLE *t;
  Store_status st = prepare_request(idx, SQLCOM_SELECT, privileges_for(SQLCOM_SELECT, nullptr, nullptr, false), &t);
  if (!st.ok()) return st;
  uint64_t rows = 0;
  if (req.op == Find_op::merge_desc || req.op == Find_op::merge_asc)
    st = merge(idx, req, sink, &rows);
  else
    st = scan(idx, req, &sink, nullptr, &rows);
  if (st.ok() && req.counts_rows) counters_.add(counters_.rows_read, rows);
  return st;
}

Store_status Mariadb_store::table_size(Open_index &idx, Table_size *out) {
  TABLE *t;
  Store_status st = prepare_request(idx, SQLCOM_SELECT, privileges_for(SQLCOM_SELECT, nullptr, nullptr, false), &t);
  if (!st.ok()) return st;
  /* With HA_STATUS_TIME, as SHOW TABLE STATUS asks: without it InnoDB reports an empty table as
     one row (so that the optimizer never takes it for empty). */
  if (int e = t->file->info(HA_STATUS_VARIABLE | HA_STATUS_TIME | HA_STATUS_NO_LOCK))
    return Store_status::of(Store_errc::handler_error, e);
  out->rows = t->file->stats.records;
  out->bytes = t->file->stats.data_file_length;
  return {};
}

Store_status Mariadb_store::scan_failed(int e) {
  /* The table was recreated (TRUNCATE, a copying ALTER) after this batch's transaction began:
     InnoDB cannot use its new indexes in that transaction (HA_ERR_TABLE_DEF_CHANGED, "Table
     definition has changed, please retry transaction"). SQL's client must retry; here the request
     runs again in a later batch, a new transaction (a helper saw gets answered "storage engine
     error 159" during TRUNCATE while other clients' writes kept the batch open). */
  if (e == HA_ERR_TABLE_DEF_CHANGED) {
    batch_full_ = true;
    return Store_status::of(Store_errc::table_busy);
  }
  return Store_status::of(Store_errc::handler_error, e);
}

Store_status Mariadb_store::scan(Open_index &idx, const Find_request &req, Row_sink *sink,
                                 const Modify_request *mod, uint64_t *count) {
  Table_slot &s = slots_[idx.slot_];
  TABLE *t = s.table;
  KEY &k = t->key_info[idx.index_no_];
  if (req.nkeys > idx.key_parts_) return Store_status::of(Store_errc::too_many_key_parts);
  if (req.has_in && req.in_column >= req.nkeys) return Store_status::of(Store_errc::bad_in_column);
  if (req.has_in && (!req.nin_values || !req.in_values)) return Store_status::of(Store_errc::bad_in_column);  // no IN values: callers answer that themselves
  /* What the index can do: a hash index (MEMORY's default) finds whole keys only, in no order. */
  const ulong caps = t->file->index_flags(idx.index_no_, 0, true);
  if (caps & HA_ONLY_WHOLE_INDEX) {
    if (req.op != Find_op::eq || req.nkeys != idx.key_parts_) return Store_status::of(Store_errc::index_unusable);
  } else if (req.op != Find_op::eq && !(caps & HA_READ_ORDER)) {
    return Store_status::of(Store_errc::index_unusable);
  } else if ((req.op == Find_op::lt || req.op == Find_op::le || req.op == Find_op::last_prefix) &&
             !(caps & HA_READ_PREV)) {
    return Store_status::of(Store_errc::index_unusable);
  }
  Store_status st = prepare_filters(t, idx, req);
  if (!st.ok()) return st;
  uint key_len = 0;
  build_key(t, k, req, 0, &key_len, idx.unique_on_first_column_ || mod);

  ha_rkey_function flag;
  switch (req.op) {
    case Find_op::eq: flag = HA_READ_KEY_EXACT; break;
    case Find_op::gt: flag = HA_READ_AFTER_KEY; break;
    case Find_op::ge: flag = HA_READ_KEY_OR_NEXT; break;
    case Find_op::lt: flag = HA_READ_BEFORE_KEY; break;
    /* As SQL reads `key <= k` backwards: from the last row whose key starts with k. (The partition
       handler merges its partitions backwards only for this flag, not for HA_READ_KEY_OR_PREV.) */
    case Find_op::le: flag = HA_READ_PREFIX_LAST_OR_PREV; break;
    case Find_op::last_prefix: flag = HA_READ_PREFIX_LAST; break;
    default: flag = HA_READ_KEY_EXACT;
  }
  /* A prefix key part cannot tell 'abcdef' from 'abcxyz': strict bounds become inclusive on the
     prefix and every row found is compared on its whole values below. So do strict bounds on a
     partitioned table: the partition handler merges MyISAM and Aria partitions wrongly for
     HA_READ_AFTER_KEY (rows equal to the key come back, out of order). */
  const bool recheck = key_has_prefix_parts_ || (t->part_info && (req.op == Find_op::gt || req.op == Find_op::lt));
  if (recheck && flag == HA_READ_AFTER_KEY) flag = HA_READ_KEY_OR_NEXT;
  if (recheck && flag == HA_READ_BEFORE_KEY) flag = HA_READ_PREFIX_LAST_OR_PREV;
  auto key_matches = [&]() {
    int c = full_key_cmp(k, req.nkeys);
    switch (req.op) {
      case Find_op::gt: return c > 0;
      case Find_op::ge: return c >= 0;
      case Find_op::lt: return c < 0;
      case Find_op::le: return c <= 0;
      default: return c == 0;
    }
  };
  handler *h = t->file;
  /* A write statement walks from a fresh index start, except when it continues a shared one (its
     index is still open, positioned by a request just like this one). */
  if ((mod && !continues_shared_) || h->inited != handler::INDEX || h->active_index != idx.index_no_) {
    h->ha_index_or_rnd_end();
    if (int e = h->ha_index_init(idx.index_no_, true)) return scan_failed(e);
  }

  /* Modifying rows of the index being walked could revisit them: collect positions first then. */
  const bool deferred = mod && (mod->op != Modify_op::remove ? halloween_risk(t, idx, *mod) : deletes_lose_place(t));
  refs_.clear();
  std::unordered_set<std::string> in_rows;  // deferred with an IN list: the rows found so far
  const key_part_map kpm = (key_part_map(1) << req.nkeys) - 1;
  const uint64_t limit = req.limit ? req.limit : 1;
  uint64_t skip = req.offset, hits = 0, modified = 0;
  uint32_t in_index = 0;
  bool first = true, overflow = false, same_in_value = false;
  int r = 0, mr = 0;
  uchar *rec = t->record[0];
  if (sink) sink->begin(idx.columns_.size());
  /* An exact match on a key the column cannot hold finds nothing (key_names_no_row_); a write's
     (D, U, +, -) also when the key was cut, rounded or clamped (whole_values), as SQL's UPDATE and
     DELETE change nothing then: HandlerSocket's clamping is kept for reads only. */
  const bool exact = req.op == Find_op::eq || req.op == Find_op::last_prefix;
  auto names_no_row = [&] { return exact && key_names_no_row_; };
  while (hits < limit) {
    if (first) {
      first = false;
      if (req.nkeys == 0 && req.op == Find_op::ge)
        r = h->ha_index_first(rec);  // from the index's first row (NULLs and negative numbers included)
      else
        r = names_no_row() ? HA_ERR_KEY_NOT_FOUND : h->ha_index_read_map(rec, key_buf_.data(), kpm, flag);
    } else if (req.has_in && !same_in_value) {
      /* HandlerSocket semantics: each IN value contributes at most its first matching row. */
      if (++in_index >= req.nin_values) break;
      build_key(t, k, req, in_index, &key_len, idx.unique_on_first_column_ || mod);
      r = names_no_row() ? HA_ERR_KEY_NOT_FOUND : h->ha_index_read_map(rec, key_buf_.data(), kpm, flag);
    } else {
      switch (req.op) {
        case Find_op::eq: r = h->ha_index_next_same(rec, key_buf_.data(), key_len); break;
        case Find_op::gt:
        case Find_op::ge: r = h->ha_index_next(rec); break;
        case Find_op::lt:
        case Find_op::le: r = h->ha_index_prev(rec); break;
        case Find_op::last_prefix:
          r = h->ha_index_prev(rec);
          if (r == 0 && key_cmp_if_same(t, key_buf_.data(), idx.index_no_, key_len)) r = HA_ERR_END_OF_FILE;
          break;
        default: r = HA_ERR_END_OF_FILE;
      }
    }
    ++rows_examined_;
    same_in_value = false;
    if (r == 0) {
      if ((recheck && !key_matches()) || history_row(t)) {
        same_in_value = req.has_in;  // this IN value's matching row may still come
        continue;
      }
      int fr = req.nfilters ? check_filters(t, idx, req) : 0;
      if (fr < 0) break;
      if (fr > 0) continue;
      if (skip) { --skip; continue; }
      ++hits;
      if (deferred) {
        h->position(rec);
        /* Two IN values can find the same row (a repeated value; `<=` bounds landing on one row):
           it is changed once, as SQL's UPDATE ... WHERE c IN (...) changes it. Changed twice, the
           second change found the row gone (its key had moved: `1 1 120`) or changed it again.
           HandlerSocket, which looks each value up after the previous change, does not find it
           again either. Offset and limit count it each time, as the same request's read does, so
           the request changes the rows its read returns. */
        if (req.has_in && !in_rows.emplace(reinterpret_cast<const char *>(h->ref), h->ref_length).second) continue;
      }
      if (sink) {
        emit_row(t, idx, *sink, req.omits_first_column);
        if (sink->would_overflow()) { overflow = true; break; }
      }
      if (mod) {
        if (deferred) {
          refs_.insert(refs_.end(), h->ref, h->ref + h->ref_length);
        } else {
          mr = modify_row(t, idx, *mod);
          if (mr == kRowSkipped) { mr = 0; continue; }  // '-' would cross zero: row left as it is
          if (mr) break;
          ++modified;
        }
      }
      continue;
    }
    /* An IN value no partition can hold finds nothing, like one no row has (the partition handler
       says HA_ERR_END_OF_FILE or HA_ERR_NO_PARTITION_FOUND where an engine says not found): on
       to the next value. */
    if (r == HA_ERR_NO_PARTITION_FOUND) r = HA_ERR_KEY_NOT_FOUND;
    if (req.has_in && (r == HA_ERR_KEY_NOT_FOUND || r == HA_ERR_END_OF_FILE)) continue;
    if (r != HA_ERR_RECORD_DELETED) break;
  }
  /* A read leaves the index open for the next read of the batch, a one-row write for the next
     one-row write of its statement (end_write() closes it when the statement ends). */
  if (mod && (deferred || request_share_.kind == Stmt_share::none)) h->ha_index_or_rnd_end();
  if (!mr && !overflow && deferred && !refs_.empty() &&
      (r == 0 || r == HA_ERR_KEY_NOT_FOUND || r == HA_ERR_END_OF_FILE || r == HA_ERR_RECORD_DELETED)) {
    r = 0;
    if (int e = h->ha_rnd_init(false)) {
      mr = e;
    } else {
      for (size_t off = 0; off < refs_.size(); off += h->ref_length) {
        if ((mr = h->ha_rnd_pos(rec, refs_.data() + off))) break;
        mr = modify_row(t, idx, *mod);
        if (mr == kRowSkipped) { mr = 0; continue; }
        if (mr) break;
        ++modified;
      }
      h->ha_rnd_end();
    }
  }
  if (overflow) {
    sink->cancel();
    return Store_status::of(Store_errc::result_too_large);
  }
  int err = mr ? mr
               : (r != 0 && r != HA_ERR_RECORD_DELETED && r != HA_ERR_KEY_NOT_FOUND && r != HA_ERR_END_OF_FILE) ? r : 0;
  if (err) {
    if (sink) sink->cancel();
    return scan_failed(err);
  }
  if (sink) sink->end();
  *count = mod ? modified : hits;
  return {};
}

bool wait_for_server_start(const std::atomic<bool> &stop) {
  while (!stop.load(std::memory_order_relaxed)) {
    mysql_mutex_lock(&LOCK_server_started);
    bool started = mysqld_server_started;
    mysql_mutex_unlock(&LOCK_server_started);
    if (started) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

std::unique_ptr<Store> make_mariadb_store(Counters &counters, const char *thread_name, const Config &cfg) {
  auto st = std::make_unique<Mariadb_store>(counters, cfg, cfg.commit_overlap);
  if (!st->attach(thread_name, cfg.charset.c_str())) return nullptr;  // attach() logged why
  return st;
}

}  // namespace tablesocket
