/* Writes: insert, upsert and find_modify (update, increment, decrement, delete).

   Each write request is one statement inside the batch's transaction: on any error the statement
   is rolled back (its row changes and its binlog events) and only that request fails. Rows are
   logged to the binary log as row events whatever binlog_format says, with the written table
   exposed through thd->lock so table maps are written (the gap that silently stopped
   HandlerSocket's writes from replicating). Values are stored as SQL stores a text literal under
   the server's sql_mode, and columns not given get their real defaults, including
   DEFAULT CURRENT_TIMESTAMP and ON UPDATE CURRENT_TIMESTAMP. */
#include "store/mariadb_store.h"

#include "common/delta.h"

#include "sql_insert.h"   // vers_insert_history_row()
#include "sql_trigger.h"  // Table_triggers_list

#include <cfloat>
#include <cmath>
#include <cstdlib>

#include "mysys_err.h"  // EE_WRITE
#include "sql_cache.h"
#include "sql_update.h"  // compare_record()

namespace tablesocket {
namespace {


}  // namespace

/* A handler computes virtual columns only for rows it reads into record[0]: a duplicate row read
   into record[1] gets them here (an indexed one, such as a long UNIQUE's hash, must be right for
   the update that follows), as SQL's INSERT ... ON DUPLICATE KEY UPDATE does. */
static int read_virtual_columns_of_record1(TABLE *t) {
  if (!t->vfield) return 0;
  t->move_fields(t->field, t->record[1], t->record[0]);
  int e = t->update_virtual_fields(t->file, VCOL_UPDATE_FOR_REPLACE);
  t->move_fields(t->field, t->record[0], t->record[1]);
  return e;
}

int Mariadb_store::row_rejected() {
  if (thd_->get_stmt_da()->is_error())
    last_error_ = thd_->get_stmt_da()->message();
  else
    last_error_ = "row rejected";
  return kBadValue;
}

int Mariadb_store::complete_new_row(TABLE *t) {
  if (t->default_field) {
    if (default_needs_a_sequence(t)) return kBadValue;
    if (t->update_default_fields(false)) return row_rejected();
  }
  if (t->vfield && t->update_virtual_fields(t->file, VCOL_UPDATE_FOR_WRITE)) return row_rejected();
  return 0;
}

int Mariadb_store::complete_changed_row(TABLE *t) {
  if (t->default_field) t->evaluate_update_default_function();
  if (t->vfield && t->update_virtual_fields(t->file, VCOL_UPDATE_FOR_WRITE)) return row_rejected();
  return 0;
}

bool Mariadb_store::default_needs_a_sequence(TABLE *t) {
  if (!t->internal_tables || !t->default_field) return false;
  for (Field **fp = t->default_field; *fp; ++fp) {
    Field *f = *fp;
    if (!f->has_explicit_value() && f->default_value && (f->default_value->flags & VCOL_NEXTVAL)) {
      last_error_ = std::string("column '") + f->field_name.str +
                    "' needs a value: its DEFAULT calls NEXTVAL(), which tablesocket does not run "
                    "(give the column a value, or insert through SQL)";
      return true;
    }
  }
  return false;
}

int Mariadb_store::refuse_triggers(TABLE *t, int event) {
  Table_triggers_list *tr = t->triggers;
  if (!tr) return 0;
  const trg_event_type ev = trg_event_type(event);
  if (!tr->has_triggers(ev, TRG_ACTION_BEFORE) && !tr->has_triggers(ev, TRG_ACTION_AFTER)) return 0;
  /* A trigger may read or write other tables, which SQL opens and locks with the statement; a
     worker cannot. Skipping it silently (HandlerSocket's way) would break what it guarantees. */
  static const char *const names[] = {"INSERT", "UPDATE", "DELETE"};
  last_error_ = std::string("table '") + t->s->table_name.str + "' has " + names[event] +
                " triggers, which tablesocket does not run: write it through SQL";
  return kBadValue;
}

int Mariadb_store::write_new_row(TABLE *t) {
  if (int e = refuse_triggers(t, TRG_EVENT_INSERT)) return e;
  if (t->versioned()) t->vers_update_fields();  // row start = now, row end = the end of time
  if (t->check_constraints && t->verify_constraints(false) == VIEW_CHECK_ERROR) return row_rejected();
  const int e = t->file->ha_write_row(t->record[0]);
  if (!e) note_written_row(t);
  return e;
}

int Mariadb_store::write_changed_row(TABLE *t) {
  if (int e = refuse_triggers(t, TRG_EVENT_UPDATE)) return e;
  if (t->versioned()) t->vers_update_fields();
  if (t->check_constraints && t->verify_constraints(false) == VIEW_CHECK_ERROR) return row_rejected();
  int e = t->file->ha_update_row(t->record[1], t->record[0]);
  if (e == HA_ERR_RECORD_IS_THE_SAME) return 0;
  if (!e) {
    /* A changed key column moves the row in that index: a read by the old value would miss it. */
    bool key_changed = false;
    for (uint k = 0; k < t->s->keys && !key_changed; ++k)
      for (uint p = 0; p < t->key_info[k].user_defined_key_parts && !key_changed; ++p)
        key_changed = t->key_info[k].key_part[p].field->cmp_binary_offset(t->s->rec_buff_length) != 0;
    if (key_changed) note_blind_write();
    else note_written_row(t);
  }
  if (!e && t->versioned(VERS_TIMESTAMP)) {
    /* The row as it was becomes history, ending now (a TRX_ID-versioned table's engine does this). */
    store_record(t, record[2]);
    e = vers_insert_history_row(t);
    restore_record(t, record[2]);
  }
  return e;
}

int Mariadb_store::remove_row(TABLE *t) {
  if (int e = refuse_triggers(t, TRG_EVENT_DELETE)) return e;
  note_blind_write();  // a read could now miss the row
  /* A system-versioned row is not deleted: its row end is set to now (it becomes history). */
  return t->versioned() ? t->delete_row<false>(true) : t->file->ha_delete_row(t->record[0]);
}

bool Mariadb_store::batch_commits_here() const {
  return !committer_ || batch_other_engines_ || galera_replicating(thd_);
}

Store_status Mariadb_store::take_commit_lock() {
  if (commit_lock_.ticket) return {};
  /* Not while a handed-off commit has yet to take its own: a BLOCK_COMMIT requested meanwhile
     would wait for ours, that commit for BLOCK_COMMIT, and this batch, kept open behind it, for
     that commit. */
  if (in_flight_ && !committer_->done() && !committer_->lock_settled()) return Store_status::of(Store_errc::table_busy);
  MDL_REQUEST_INIT(&commit_lock_, MDL_key::BACKUP, "", "", MDL_BACKUP_COMMIT, MDL_EXPLICIT);
  if (thd_->mdl_context.try_acquire_lock(&commit_lock_)) return lock_failed();
  if (!commit_lock_.ticket) return Store_status::of(Store_errc::table_busy);
  thd_->backup_commit_lock = &commit_lock_;
  return {};
}

Store_status Mariadb_store::begin_write(Table_slot &s, const Open_index &idx) {
  /* read_only, or tx_read_only: a new SQL session's transactions are read-only then. */
  if (opt_readonly || global_system_variables.tx_read_only) return Store_status::of(Store_errc::server_read_only);
  /* See close_batch_to_writes(); and a batch that has not written yet takes no write while the
     commit before it waits for the backup lock: the request runs in a later batch. */
  if (writes_closed_ || commit_waits_for_lock()) {
    ++writes_refused_closed_;
    return Store_status::of(Store_errc::table_busy);
  }
  if (Store_status st = galera_begin_write(); !st.ok()) return st;
  /* The protection DML takes against FLUSH TABLES WITH READ LOCK and BACKUP STAGE, held until the
     batch commits; as SQL takes it: MDL_BACKUP_TRANS_DML for a table of an engine that supports
     online backup (InnoDB: writes go on through BACKUP STAGE FLUSH and BLOCK_DDL, only the commit
     waits at BLOCK_COMMIT), MDL_BACKUP_DML for the others. Only tried: a backup in progress parks
     the request. */
  const int kind = s.table->s->online_backup ? 0 : 1;
  if (!backup_locks_[kind].ticket) {
    MDL_REQUEST_INIT(&backup_locks_[kind], MDL_key::BACKUP, "", "", kind ? MDL_BACKUP_DML : MDL_BACKUP_TRANS_DML,
                     MDL_EXPLICIT);
    if (thd_->mdl_context.try_acquire_lock(&backup_locks_[kind])) return lock_failed();
    if (!backup_locks_[kind].ticket) return Store_status::of(Store_errc::table_busy);
  }
  if (batch_commits_here()) {  // see commit_lock_
    if (Store_status st = take_commit_lock(); !st.ok()) return st;
  }
  if (!s.written) {
    s.written = true;
    written_slots_.push_back(idx.slot_);
  }
  write_slot_ = &s;
  /* A write to a table other tables' foreign keys reference may cascade into them. */
  if (!batch_blind_ && s.table->file->referenced_by_foreign_key()) batch_blind_ = true;
  thd_->set_query_id(next_query_id());
  thd_->set_time();  // CURRENT_TIMESTAMP defaults and the binlog event time
  thd_->lock = s.lock;  // binlog_write_table_maps() finds the written table here
  thd_->set_current_stmt_binlog_format_row();
  if (!continues_shared_) {
    /* A statement logs its table map once, before its first row event: a shared one's later
       requests add rows to its pending row event (end_write() keeps both). */
    thd_->reset_binlog_for_next_statement();
    s.table->file->prepare_for_row_logging();
  }
  /* A UNIQUE too long for a B-tree (checked through a hash index) or a WITHOUT OVERLAPS key is
     checked by the server on every write with a second handler and a row buffer, which SQL sets up
     before each INSERT, UPDATE or DELETE. The second handler lives until end_batch() resets the
     table. */
  if (s.table->file->prepare_for_insert(true)) {
    clear_diagnostics();
    return Store_status::of(Store_errc::handler_error, HA_ERR_OUT_OF_MEM);
  }
  TABLE *t = s.table;
  if (!t->vcol_refix_list.is_empty()) {
    /* Defaults and generated columns that read the session (CURRENT_USER(), DATABASE(), ...):
       SQL fixes them again for every statement, in the client's context. So do we: as the
       connection's account (when it logged in as one), with the table's database current. */
    thd_->reset_db(&t->s->db);
    statement_db_set_ = true;
    Security_context *saved = thd_->security_ctx;
    Security_context &main = thd_->main_security_ctx;  // USER() names the login from here
    const char *saved_user = main.user, *saved_host = main.host_or_ip;
    if (idx.principal_) {
      auto *p = static_cast<Mariadb_principal *>(idx.principal_);
      thd_->security_ctx = &p->sctx;
      main.user = p->login_user.c_str();
      main.host_or_ip = p->conn_host.c_str();
    }
    t->vcol_cleanup_expr(thd_);
    const bool failed = t->vcol_fix_expr(thd_);
    thd_->security_ctx = saved;
    main.user = saved_user;
    main.host_or_ip = saved_host;
    if (failed) {
      last_error_ = thd_->get_stmt_da()->is_error() ? thd_->get_stmt_da()->message() : "cannot evaluate a DEFAULT";
      clear_diagnostics();
      return bad_value_status();
    }
  }
  thd_->count_cuted_fields = CHECK_FIELD_ERROR_FOR_NULL;
  thd_->cuted_fields = 0;
  thd_->abort_on_warning = thd_->is_strict_mode();
  thd_->get_stmt_da()->set_current_row_for_warning(1);  // messages say "at row 1", as SQL's do
  return {};
}

bool Mariadb_store::missing_required_values(TABLE *t, bool raise) {
  /* SQL's rule for INSERT: a NOT NULL column without a default that the request does not give is
     an error under strict sql_mode (ER_NO_DEFAULT_FOR_FIELD), otherwise it gets its type's
     implicit default. */
  for (Field **fp = t->field; *fp; ++fp) {
    Field *f = *fp;
    if (f->has_explicit_value() || f->vcol_info || (f->flags & AUTO_INCREMENT_FLAG) ||
        (f->flags & (NO_DEFAULT_VALUE_FLAG | VERS_ROW_START | VERS_ROW_END)) != NO_DEFAULT_VALUE_FLAG ||
        f->real_type() == MYSQL_TYPE_ENUM)
      continue;
    if (thd_->abort_on_warning) {
      if (raise) {
        my_error(ER_NO_DEFAULT_FOR_FIELD, MYF(0), f->field_name.str);
        last_error_ = thd_->get_stmt_da()->message();
      }
      return true;
    }
  }
  return false;
}

bool Mariadb_store::binlog_cache_full() {
  /* The batch's binary log cache would pass max_binlog_cache_size with this request's rows, or
     could not spill past binlog_cache_size into a temporary file (tmpdir full), but not without
     the other requests' before it: the request runs again in the next batch (the worker ends this
     one), as SQL would have run it in a transaction of its own. Where it fails alone it fails
     with the server's message, as SQL's statement does. */
  if (!batch_wrote_ || !binlog_cache_error()) return false;
  batch_full_ = true;
  return true;
}

bool Mariadb_store::binlog_cache_error() const {
  const Diagnostics_area *da = thd_->get_stmt_da();
  if (!da->is_error()) return false;
  const unsigned e = da->sql_errno();
  if (e == ER_TRANS_CACHE_FULL || e == ER_STMT_CACHE_FULL) return true;
  /* The cache's temporary file could not be created or written (tmpdir full or gone: "Error
     writing file '<tmpdir>/#sql/fd=..'", mysys's EE_WRITE, or EE_CANTCREATEFILE): a row write
     raises these only through the binary log's cache. */
  return (e == EE_WRITE || e == EE_CANTCREATEFILE || e == ER_ERROR_ON_WRITE || e == ER_CANT_CREATE_FILE) &&
         mysql_bin_log.is_open();
}

bool Mariadb_store::statement_sharable(TABLE *t) const {
  const TABLE_SHARE *ts = t->s;
  if (!ts->db_type() || ts->db_type()->db_type != DB_TYPE_INNODB || t->part_info || t->versioned() ||
      ts->long_unique_table || ts->period.unique_keys || !t->vcol_refix_list.is_empty())
    return false;
  for (uint i = 0; i < ts->keys; ++i)
    if (t->key_info[i].flags & HA_FULLTEXT) return false;  // InnoDB counts FTS doc ids per statement
  if (!binlog_sharing_room(t, true)) return false;  // (always room without the binary log)
  return !galera_replicating(thd_);
}

bool Mariadb_store::binlog_on() const {
  return mysql_bin_log.is_open() && (thd_->variables.option_bits & OPTION_BIN_LOG);
}

/* The bytes of one row image in a row event, at most: each column's data (a VARCHAR's actual
   length) with its length bytes, and the null bits. */
static uint64_t binlog_image_bytes(TABLE *t, const uchar *rec) {
  const my_ptrdiff_t off = rec - t->record[0];
  uint64_t n = t->s->null_bytes + 8;
  for (Field **fp = t->field; *fp; ++fp) {
    Field *f = *fp;
    f->move_field_offset(off);
    n += f->data_length() + 4;
    f->move_field_offset(-off);
  }
  return n;
}

/* A row event's header and column bitmaps, and the table map a statement writes first (with
   binlog_row_metadata=FULL: the column names and ENUM/SET members too), at most. */
static uint64_t binlog_statement_bytes(TABLE *t) {
  const TABLE_SHARE *ts = t->s;
  uint64_t n = 512 + ts->db.length + ts->table_name.length;
  for (Field **fp = t->field; *fp; ++fp) {
    const Field *f = *fp;
    n += 16 + f->field_name.length;
    if (const TYPELIB *tl = f->get_typelib())
      for (unsigned i = 0; i < tl->count; ++i) n += 2 + tl->type_lengths[i];
  }
  return n;
}

/* Per row beyond its images: its share of a row event's header when binlog_row_event_max_size
   (256 bytes at least) splits the statement's rows into several events. */
static uint64_t binlog_row_overhead(TABLE *t) { return 64 + 2 * ((t->s->fields + 7) / 8); }

bool Mariadb_store::binlog_sharing_room(TABLE *t, bool starting) const {
  if (!binlog_on() || !t) return true;
  if (t->s->blob_fields || batch_binlog_bytes_ == kBinlogUnbounded) return false;  // a row's size unknown before
  /* The cache's memory: binlog_cache_size bytes (rounded up to 4 KiB); past them it is written to a
     temporary file, which can fail (tmpdir full) as can passing max_binlog_cache_size. Kept 4 KiB
     short of both. */
  const uint64_t room = binlog_cache_floor_ > 4096 ? binlog_cache_floor_ - 4096 : 0;
  /* Another row at its largest (every VARCHAR full: an update's two images); starting, the
     statement's first row and events are counted already (end_write). */
  const uint64_t next = starting ? 0 : 2 * (uint64_t(t->s->reclength) + 4 * t->s->fields + 8) + binlog_row_overhead(t);
  return batch_binlog_bytes_ <= room && next <= room - batch_binlog_bytes_;
}

void Mariadb_store::count_binlog_bytes(TABLE *t, bool continued) {
  if (!binlog_on() || batch_binlog_bytes_ == kBinlogUnbounded) return;
  const uint64_t rows = t->file->rows_changed - rows_changed_before_;
  /* Only one-row requests of tables without BLOB/TEXT columns are counted (their rows are in the
     table's records now); any other write leaves the batch's cache size unknown. */
  if (request_share_.kind == Stmt_share::none || rows > 1 || t->s->blob_fields) {
    batch_binlog_bytes_ = kBinlogUnbounded;
    return;
  }
  uint64_t n = continued ? 0 : binlog_statement_bytes(t);
  if (rows) {
    /* An update logs the row before (record[1]) and after (record[0]); an insert or a delete one. */
    n += binlog_image_bytes(t, t->record[0]) + binlog_row_overhead(t);
    if (thd_->lex->sql_command == SQLCOM_UPDATE) n += binlog_image_bytes(t, t->record[1]);
  }
  batch_binlog_bytes_ += n;
}

bool Mariadb_store::end_write(Table_slot &s, bool ok) {
  retry_next_batch_ = false;
  handler *h = s.table->file;
  const bool continued = continues_shared_;
  continues_shared_ = false;
  /* Keep the statement open for the next one-row request: after this one if it was the first, and
     after a failed one that changed no row (InnoDB undid its row operation). A request that failed
     after changing a row (which one-row requests never do) cannot be undone alone: the statement
     is rolled back, with the batch's earlier rows in it, whose writers the worker then closes. */
  count_binlog_bytes(s.table, continued);
  bool keep = false;
  if (continued) {
    keep = ok || h->rows_changed == rows_changed_before_;
    if (!keep) batch_lost_writes_ = batch_lost_writes_ || batch_wrote_;
  } else if (ok && request_share_.kind != Stmt_share::none && statement_sharable(s.table)) {
    keep = true;
    shared_write_ = request_share_;
  }
  if (!keep && ok && (thd_->binlog_flush_pending_rows_event(true) || trans_commit_stmt(thd_))) {
    last_error_ = thd_->get_stmt_da()->is_error() ? thd_->get_stmt_da()->message() : "statement failed";
    retry_next_batch_ = binlog_cache_full();
    ok = false;
  }
  if (!keep && !ok) trans_rollback_stmt(thd_);
  if (!keep) h->row_logging = h->row_logging_init = 0;  // kept: the shared statement's next rows are logged too
  if (keep) {
    s.table->use_all_columns();  // as reset_handler() leaves them for the next request
    s.table->rpl_write_set = s.table->write_set;
  } else {
    shared_write_ = Shared_write{};
    reset_handler(s.table);  // the next write statement marks the engine read-write again
  }
  if (statement_db_set_) {
    static const LEX_CSTRING no_db = {nullptr, 0};
    thd_->reset_db(&no_db);
    statement_db_set_ = false;
  }
  if (!keep) thd_->reset_binlog_for_next_statement();  // kept: its table map is written
  thd_->lock = nullptr;
  thd_->count_cuted_fields = CHECK_FIELD_IGNORE;
  thd_->abort_on_warning = false;
  if (thd_->transaction_rollback_request || !(thd_->variables.option_bits & OPTION_BEGIN)) {
    /* The engine rolled back the whole transaction (e.g. a deadlock), or the server did (Galera's
       wsrep_max_ws_rows): every write this batch already answered is gone. Start over in a fresh
       transaction; the worker closes the connections whose answers would now be false. */
    trans_rollback(thd_);
    if (keep) {  // the shared statement went with the transaction
      shared_write_ = Shared_write{};
      thd_->reset_binlog_for_next_statement();
      reset_handler(s.table);
    }
    galera_end_command(thd_);  // a Galera transaction aborted for a conflict ends here too
    thd_->transaction_rollback_request = false;
    batch_lost_writes_ = batch_lost_writes_ || batch_wrote_;
    thd_->variables.option_bits |= OPTION_BEGIN;
    thd_->server_status |= SERVER_STATUS_IN_TRANS;
  }
  if (ok) {
    batch_wrote_ = true;
    query_cache_invalidate3(thd_, s.table, 1);
  }
  clear_diagnostics();
  return ok;
}

Store_status Mariadb_store::store_value(Field *f, const Datum &v) {
  if (f->vcol_info || f->vers_sys_field()) {
    /* A generated column (or a system-versioning period column) is computed, never given: SQL
       warns that the value is ignored, which strict mode makes an error. */
    push_warning_printf(thd_, Sql_condition::WARN_LEVEL_WARN, ER_WARNING_NON_DEFAULT_VALUE_FOR_GENERATED_COLUMN,
                        ER_THD(thd_, ER_WARNING_NON_DEFAULT_VALUE_FOR_GENERATED_COLUMN), f->field_name.str,
                        f->table->s->table_name.str);
    return take_stmt_error() ? bad_value_status() : Store_status{};
  }
  /* sql_mode EMPTY_STRING_IS_NULL: SQL reads the literal '' as NULL. */
  if (v.is_null() || (v.len == 0 && (thd_->variables.sql_mode & MODE_EMPTY_STRING_IS_NULL))) {
    if (f->real_maybe_null())
      f->set_null();
    else if (set_field_to_null_with_conversions(f, false) && !thd_->is_error())
      my_error(ER_BAD_NULL_ERROR, MYF(0), f->field_name.str);  // NOT NULL: AUTO_INCREMENT/TIMESTAMP rules or an error
  } else {
    f->set_notnull();
    /* 7-bit text into a text column of another ASCII-based character set is the same bytes in
       both: stored as the column's own, which skips a conversion that checks and copies every
       character (~90 instructions per value, callgrind; the read path does the same). */
    CHARSET_INFO *cs = client_cs_;
    if (client_ascii_based_ && f->cmp_type() == STRING_RESULT && f->charset() != client_cs_ &&
        my_charset_is_ascii_based(f->charset()) && is_ascii(v.ptr, v.len))
      cs = f->charset();
    f->store(v.ptr, v.len, cs);
  }
  f->set_has_explicit_value();
  return take_stmt_error() ? bad_value_status() : Store_status{};
}

int Mariadb_store::write_error_code(const Store_status &st) {
  if (st.ok()) return 0;
  if (st.errc == Store_errc::bad_value) return kBadValue;
  return st.handler_error ? st.handler_error : HA_ERR_GENERIC;
}

Store_status Mariadb_store::commit_failed() {
  if (retry_next_batch_) return Store_status::of(Store_errc::table_busy);
  return with_last_error(Store_errc::commit_failed);
}

Store_status Mariadb_store::failed_write(Table_slot &s, int handler_error) {
  if (binlog_cache_full()) {
    end_write(s, false);
    return Store_status::of(Store_errc::table_busy);
  }
  /* A value the column refused (message in last_error_), or one request's rows alone do not fit
     the binary log's cache (an earlier request's rows in the way is binlog_cache_full() above):
     the server's message, as SQL answers such a statement. */
  if (handler_error == kBadValue || binlog_cache_error()) {
    std::string msg = handler_error == kBadValue ? last_error_ : std::string(thd_->get_stmt_da()->message());
    end_write(s, false);
    last_error_ = msg;
    return bad_value_status();
  }
  /* InnoDB's table-level AUTO-INC lock (innodb_autoinc_lock_mode=0, or 1 beside a bulk insert)
     held by another transaction: a worker only tries it, and InnoDB says "failed to read the
     auto-increment value" (HA_ERR_AUTOINC_READ_FAILED) rather than lock wait timeout. */
  const handlerton *ht = s.table->file->partition_ht();  // a partitioned table's: its partitions' engine
  const bool autoinc_lock = handler_error == HA_ERR_AUTOINC_READ_FAILED && ht && ht->db_type == DB_TYPE_INNODB;
  end_write(s, false);
  if (handler_error == HA_ERR_LOCK_WAIT_TIMEOUT || handler_error == HA_ERR_LOCK_DEADLOCK || autoinc_lock)
    return Store_status::of(Store_errc::row_locked);  // retried later; the worker goes on meanwhile
  return Store_status::of(Store_errc::handler_error, handler_error);
}

Store_status Mariadb_store::insert_here(Open_index &idx, const Datum *values, uint32_t n, bool upsert,
                                        Insert_result *result) {
  TABLE *t;
  Store_status st = prepare_request(idx, SQLCOM_INSERT, privileges_for(SQLCOM_INSERT, nullptr, nullptr, upsert), &t,
                                    upsert ? Stmt_share::none : Stmt_share::insert);
  if (!st.ok()) return st;
  if (n > idx.columns_.size()) return Store_status::of(Store_errc::too_many_values);
  Table_slot &s = slots_[idx.slot_];
  st = begin_write(s, idx);
  if (!st.ok()) return st;
  last_error_.clear();
  handler *h = t->file;
  restore_record(t, s->default_values);  // t->s->default_values: every column at its default
  t->reset_default_fields();
  t->next_number_field = t->found_next_number_field;
  /* As SQL's fill_record(): a value given for the AUTO_INCREMENT column is marked given, so that
     under sql_mode NO_AUTO_VALUE_ON_ZERO a 0 is stored as 0 (NULL still generates one:
     set_field_to_null_with_conversions() takes the mark back). */
  t->auto_increment_field_not_null = false;
  int r = 0;
  for (uint32_t i = 0; i < n && !r; ++i) {
    Field *f = t->field[idx.columns_[i]];
    if (f == t->next_number_field) t->auto_increment_field_not_null = true;
    if (!store_value(f, values[i]).ok()) r = kBadValue;
  }
  bool updated_existing = false;
  if (!r && missing_required_values(t, !upsert)) {
    /* An upsert that leaves out a required column can still update: find the row through a
       unique key whose columns it does give. Only inserting is impossible. */
    r = kBadValue;
    if (upsert) {
      uint key_nr = given_unique_key(t);
      int e = HA_ERR_KEY_NOT_FOUND;
      if (key_nr < t->s->keys) {
        KEY &uk = t->key_info[key_nr];
        key_copy(key_buffer(uk), t->record[0], &uk, 0);
        e = h->ha_index_read_idx_map(t->record[1], key_nr, key_buf_.data(), HA_WHOLE_KEY, HA_READ_KEY_EXACT);
        if (!e) e = read_virtual_columns_of_record1(t);
      }
      if (e == 0) {
        t->next_number_field = nullptr;
        result->has_insert_id = t->found_next_number_field != nullptr;
        st = update_existing(t, idx, values, n, result);
        r = write_error_code(st);
        updated_existing = true;
      } else if (e != HA_ERR_KEY_NOT_FOUND && e != HA_ERR_END_OF_FILE) {
        r = e;
      } else {
        missing_required_values(t, true);  // no such row: the insert it would need is refused
      }
    }
  }
  if (!r && !updated_existing) r = complete_new_row(t);
  if (r == kBadValue && last_error_.empty() && thd_->get_stmt_da()->is_error())
    last_error_ = thd_->get_stmt_da()->message();
  if (!r && !updated_existing) {
    if (upsert) h->extra(HA_EXTRA_INSERT_WITH_UPDATE);  // exclusive lock on a duplicate row
    r = write_new_row(t);
    result->has_insert_id = t->found_next_number_field != nullptr;
    result->insert_id = h->insert_id_for_cur_row;
    if (upsert && (r == HA_ERR_FOUND_DUPP_KEY || r == HA_ERR_FOUND_DUPP_UNIQUE)) {
      t->next_number_field = nullptr;
      st = upsert_existing(t, idx, values, n, r, result);
      r = write_error_code(st);
    }
    if (upsert) h->extra(HA_EXTRA_NO_IGNORE_DUP_KEY);
  }
  t->next_number_field = nullptr;
  t->auto_increment_field_not_null = false;
  h->ha_release_auto_increment();
  if (r) return failed_write(s, r);
  if (!end_write(s, true)) return commit_failed();
  counters_.add(counters_.rows_written);
  return {};
}

Store_status Mariadb_store::upsert_existing(TABLE *t, const Open_index &idx, const Datum *values, uint32_t n,
                                            int dup_error, Insert_result *result) {
  handler *h = t->file;
  uint key_nr = h->get_dup_key(dup_error);
  if (key_nr >= t->s->keys) return Store_status::of(Store_errc::handler_error, dup_error);
  if ((h->ha_table_flags() & HA_DUPLICATE_POS) || h->lookup_errkey != uint(-1)) {
    /* The server found the duplicate itself (a long UNIQUE checked through its hash): it left the
       row's position, as SQL's INSERT ... ON DUPLICATE KEY UPDATE uses it. */
    h->ha_index_or_rnd_end();
    int e = h->ha_rnd_init(false);
    if (!e) {
      e = h->ha_rnd_pos(t->record[1], h->dup_ref);
      h->ha_rnd_end();
    }
    if (!e) e = read_virtual_columns_of_record1(t);
    if (e) return Store_status::of(Store_errc::handler_error, e);
    return update_existing(t, idx, values, n, result);
  }
  KEY &k = t->key_info[key_nr];
  key_copy(key_buffer(k), t->record[0], &k, 0);
  int e = h->ha_index_read_idx_map(t->record[1], key_nr, key_buf_.data(), HA_WHOLE_KEY, HA_READ_KEY_EXACT);
  if (!e) e = read_virtual_columns_of_record1(t);
  if (e) return Store_status::of(Store_errc::handler_error, e);
  return update_existing(t, idx, values, n, result);
}

uint Mariadb_store::given_unique_key(TABLE *t) const {
  for (uint i = 0; i < t->s->keys; ++i) {
    const KEY &k = t->key_info[i];
    /* A long UNIQUE's index holds hashes: no key image to look a row up with. */
    if (!(k.flags & HA_NOSAME) || k.algorithm == HA_KEY_ALG_LONG_HASH) continue;
    bool all = true;
    for (uint p = 0; p < k.user_defined_key_parts && all; ++p)
      all = t->field[k.key_part[p].fieldnr - 1]->has_explicit_value();  // kp.field may be a prefix copy
    if (all) return i;
  }
  return MAX_KEY;
}

Store_status Mariadb_store::update_existing(TABLE *t, const Open_index &idx, const Datum *values, uint32_t n,
                                            Insert_result *result) {
  /* record[1] holds the existing row. The new row is that row with the given columns replaced;
     the others keep their values. */
  restore_record(t, record[1]);
  t->reset_default_fields();
  for (uint32_t i = 0; i < n; ++i) {
    Store_status st = store_value(t->field[idx.columns_[i]], values[i]);
    if (!st.ok()) return st;
  }
  if (t->found_next_number_field) result->insert_id = uint64_t(t->found_next_number_field->val_int());
  if (!compare_record(t)) return {};
  int e = complete_changed_row(t);
  if (!e) e = write_changed_row(t);
  if (e == kBadValue) return bad_value_status();
  if (e) return Store_status::of(Store_errc::handler_error, e);
  return {};
}

bool Mariadb_store::deletes_lose_place(TABLE *t) {
  handlerton *ht = t->file->partition_ht();
  return ht && ht->db_type == DB_TYPE_HEAP;
}

bool Mariadb_store::halloween_risk(TABLE *t, const Open_index &idx, const Modify_request &mod) const {
  /* Does the change touch a column the walked index is ordered by (including the primary key, which
     InnoDB appends to every secondary index)? */
  auto in_key = [&](uint key_nr, uint16_t field_nr) {
    const KEY &k = t->key_info[key_nr];
    for (uint p = 0; p < k.user_defined_key_parts; ++p)
      if (k.key_part[p].fieldnr == field_nr + 1u) return true;
    return false;
  };
  for (uint32_t i = 0; i < mod.nvalues && i < idx.columns_.size(); ++i) {
    uint16_t f = idx.columns_[i];
    if (in_key(idx.index_no_, f)) return true;
    if (t->s->primary_key < MAX_KEY && in_key(t->s->primary_key, f)) return true;
  }
  return false;
}

Mariadb_store::Arith Mariadb_store::add_to_field(Field *f, const Datum &v, bool subtract) {
  /* As SQL computes `col = col + <operand>` (or `-`), with the operand as an SQL literal: an
     integer literal (signed; UNSIGNED above 2^63 - 1; DECIMAL below -2^63), a DECIMAL one (a
     fraction, or too long for 64 bits), a DOUBLE one (an exponent); an operand that is not a
     number is a string, read as a DOUBLE: SQL's "Truncated incorrect DOUBLE value" (an error in
     strict mode; otherwise its leading number, 0 if none). The column counts as its numeric value
     (a temporal one as YYYYMMDD[HHMMSS[.fraction]], a string as a DOUBLE). Then SQL's result type:
     integer arithmetic in 64 bits for two integers (UNSIGNED if either is, a result outside it
     being SQL's "BIGINT value is out of range", in any sql_mode), DECIMAL for integers and
     decimals, DOUBLE with any double or string. Storing the result refuses (strict mode) or clips
     a value outside the column, as SQL's UPDATE does. */
  const Delta d = parse_delta(v.ptr, v.len);
  auto truncated_double = [&]() {
    ErrConvString bad(v.ptr, v.len, &my_charset_bin);
    push_warning_printf(thd_, Sql_condition::WARN_LEVEL_WARN, ER_TRUNCATED_WRONG_VALUE,
                        ER_THD(thd_, ER_TRUNCATED_WRONG_VALUE), "DOUBLE", bad.ptr());
    return take_stmt_error();
  };
  if (d.kind == Delta::garbage && truncated_double()) return Arith::failed;
  enum class Lit { signed_int, unsigned_int, decimal, real } lit;
  if (d.kind == Delta::integer) {
    if (!d.negative) lit = d.magnitude <= uint64_t(INT64_MAX) ? Lit::signed_int : Lit::unsigned_int;
    else lit = d.magnitude <= uint64_t(INT64_MAX) + 1 ? Lit::signed_int : Lit::decimal;
  } else if (d.kind == Delta::number && d.text.find_first_of("eE") == std::string::npos) {
    lit = Lit::decimal;
  } else {
    lit = Lit::real;
  }
  const Item_result type = f->cmp_type();
  enum class Col { integer, decimal, real } col;
  if (type == INT_RESULT) col = Col::integer;
  else if (type == DECIMAL_RESULT) col = Col::decimal;
  else if (type == TIME_RESULT) col = f->decimals() ? Col::decimal : Col::integer;
  else col = Col::real;  // REAL_RESULT, and strings read as doubles
  f->set_has_explicit_value();
  const bool negative_operand = d.negative != subtract;  // the sign of what is added

  if (col == Col::integer && (lit == Lit::signed_int || lit == Lit::unsigned_int)) {
    const bool col_unsigned = type == INT_RESULT && (f->flags & UNSIGNED_FLAG) != 0;
    const bool result_unsigned = col_unsigned || lit == Lit::unsigned_int;
    const longlong raw = f->val_int();
    const __int128 cur = col_unsigned ? __int128(ulonglong(raw)) : __int128(raw);
    const __int128 op = __int128(d.magnitude);
    const __int128 res = negative_operand ? cur - op : cur + op;
    if (subtract && ((cur < 0 && res > 0) || (cur > 0 && res < 0))) return Arith::sign_flip;
    const bool fits = result_unsigned ? (res >= 0 && res <= __int128(UINT64_MAX))
                                      : (res >= __int128(INT64_MIN) && res <= __int128(INT64_MAX));
    if (!fits) {
      char what[256];
      snprintf(what, sizeof what, "`%s` %c %s%llu", f->field_name.str, subtract ? '-' : '+',
               d.negative ? "-" : "", (unsigned long long)d.magnitude);
      my_error(ER_DATA_OUT_OF_RANGE, MYF(0), result_unsigned ? "BIGINT UNSIGNED" : "BIGINT", what);
      take_stmt_error();
      return Arith::failed;
    }
    if (result_unsigned) f->store(longlong(ulonglong(res)), true);
    else f->store(longlong(res), false);
    return take_stmt_error() ? Arith::failed : Arith::stored;
  }
  if (col != Col::real && lit != Lit::real) {
    my_decimal cur, op, res;
    f->val_decimal(&cur);
    if (d.kind == Delta::integer) {
      int2my_decimal(E_DEC_FATAL_ERROR, longlong(d.magnitude), true, &op);
    } else {
      str2my_decimal(E_DEC_FATAL_ERROR, d.text.data(), d.text.size(), &my_charset_latin1, &op);
      op.sign(false);
    }
    if (negative_operand) my_decimal_sub(E_DEC_FATAL_ERROR, &res, &cur, &op);
    else my_decimal_add(E_DEC_FATAL_ERROR, &res, &cur, &op);
    if (subtract && !my_decimal_is_zero(&cur) && !my_decimal_is_zero(&res) && cur.sign() != res.sign())
      return Arith::sign_flip;
    f->store_decimal(&res);
    return take_stmt_error() ? Arith::failed : Arith::stored;
  }
  double op;
  if (d.kind == Delta::integer) {
    op = double(d.magnitude);
  } else {
    op = d.text.empty() ? 0.0 : std::strtod(d.text.c_str(), nullptr);
    if (op < 0) op = -op;
    if (!std::isfinite(op)) {  // 1e309: not a DOUBLE either
      if (d.kind != Delta::garbage && truncated_double()) return Arith::failed;
      op = DBL_MAX;
    }
  }
  const double cur = f->val_real();
  const double res = negative_operand ? cur - op : cur + op;
  if (subtract && ((cur < 0 && res > 0) || (cur > 0 && res < 0))) return Arith::sign_flip;
  f->store(res);
  return take_stmt_error() ? Arith::failed : Arith::stored;
}

int Mariadb_store::modify_row(TABLE *t, const Open_index &idx, const Modify_request &mod) {
  if (mod.op == Modify_op::remove) return remove_row(t);
  store_record(t, record[1]);
  t->reset_default_fields();
  const uint32_t n = mod.nvalues < idx.columns_.size() ? mod.nvalues : uint32_t(idx.columns_.size());
  for (uint32_t i = 0; i < n; ++i) {
    Field *f = t->field[idx.columns_[i]];
    const Datum &v = mod.values[i];
    if (mod.op == Modify_op::update) {
      if (!store_value(f, v).ok()) return kBadValue;
      continue;
    }
    /* increment / decrement, HandlerSocket's rules: NULL columns and NULL operands are left alone,
       and a decrement that would flip the sign leaves the whole row unchanged. */
    if (f->is_null() || v.is_null()) continue;
    switch (add_to_field(f, v, mod.op == Modify_op::decrement)) {
      case Arith::stored: break;
      case Arith::sign_flip: restore_record(t, record[1]); return kRowSkipped;
      case Arith::failed: return kBadValue;
    }
  }
  if (!compare_record(t)) return 0;  // unchanged: counted as modified, as HandlerSocket does
  if (int e = complete_changed_row(t)) return e;
  return write_changed_row(t);
}

Store_status Mariadb_store::modify_here(Open_index &idx, const Find_request &req, const Modify_request &mod,
                                        Row_sink &sink, uint64_t *modified) {
  if (req.op == Find_op::merge_desc || req.op == Find_op::merge_asc) return Store_status::of(Store_errc::bad_merge);
  TABLE *t;
  const enum_sql_command cmd = mod.op == Modify_op::remove ? SQLCOM_DELETE : SQLCOM_UPDATE;
  /* One row at most: limit 1 (0 means 1) and no IN list; and none returned (a row too large for
     the reply fails the request after its change). */
  const Stmt_share share =
      req.limit <= 1 && !req.has_in && !mod.returns_rows ? Stmt_share::modify : Stmt_share::none;
  Store_status st = prepare_request(idx, cmd, privileges_for(cmd, &mod, nullptr, false), &t, share);
  if (!st.ok()) return st;
  if (mod.op != Modify_op::remove && mod.nvalues > idx.columns_.size())
    return Store_status::of(Store_errc::too_many_values);
  Table_slot &s = slots_[idx.slot_];
  st = begin_write(s, idx);
  if (!st.ok()) return st;
  /* As SQL's UPDATE: NULL for a NOT NULL column stores the column's implicit default with a
     warning (an error in strict mode), where a one-row INSERT fails. */
  thd_->count_cuted_fields = CHECK_FIELD_WARN;
  last_error_.clear();
  st = scan(idx, req, mod.returns_rows ? &sink : nullptr, &mod, modified);
  if (!st.ok()) {
    if (st.errc == Store_errc::handler_error) return failed_write(s, st.handler_error);
    end_write(s, false);
    return st;
  }
  if (!end_write(s, true)) return commit_failed();
  counters_.add(counters_.rows_written, *modified);
  return {};
}

}  // namespace tablesocket
