/* Galera: a batch that writes replicates through the wsrep hooks, as an SQL transaction does.

   A batch THD is a wsrep client. Its first write of a batch begins a client "command" (the SQL
   layer begins one per client command) and starts a wsrep transaction; the rows go to the THD's
   binary log cache (row logging is on whenever wsrep is, log_bin or not), InnoDB appends the
   certification keys, and ha_commit_trans() certifies and replicates the write set before the
   local commit, in the cluster's order. A conflict lost to another node's write (certification
   failure, or a BF abort of the open batch by a replicated transaction) fails the commit: the
   writers of that batch are closed unanswered, as for any failed commit. The command ends with
   the commit (or the rollback). Reads never start a wsrep transaction. */
#include "store/mariadb_store.h"

#include "store/server_log.h"

#include <atomic>

/* The wsrep headers declare the server functions that the wsrep plugin service wraps in macros
   for dynamic plugins: this file calls the server directly (mariadbd exports them). The
   performance-schema calls stay dynamic (mysql_thread.h was included above as a plugin's). */
#undef get_wsrep_recovery
#undef wsrep_consistency_check
#undef wsrep_is_wsrep_xid
#undef wsrep_xid_seqno
#undef wsrep_xid_uuid
#undef wsrep_on
#undef wsrep_prepare_key_for_innodb
#undef wsrep_thd_LOCK
#undef wsrep_thd_TRYLOCK
#undef wsrep_thd_UNLOCK
#undef wsrep_thd_kill_LOCK
#undef wsrep_thd_kill_UNLOCK
#undef wsrep_thd_query
#undef wsrep_thd_retry_counter
#undef wsrep_thd_ignore_table
#undef wsrep_thd_trx_seqno
#undef wsrep_set_data_home_dir
#undef wsrep_thd_is_BF
#undef wsrep_thd_is_aborting
#undef wsrep_thd_is_local
#undef wsrep_thd_self_abort
#undef wsrep_thd_append_key
#undef wsrep_thd_append_table_key
#undef wsrep_thd_is_local_transaction
#undef wsrep_thd_client_state_str
#undef wsrep_thd_client_mode_str
#undef wsrep_thd_transaction_state_str
#undef wsrep_thd_transaction_id
#undef wsrep_thd_bf_abort
#undef wsrep_thd_order_before
#undef wsrep_handle_SR_rollback
#undef wsrep_thd_skip_locking
#undef wsrep_get_sr_table_name
#undef wsrep_get_debug
#undef wsrep_commit_ordered
#undef wsrep_thd_is_applying
#undef wsrep_OSU_method_get
#undef wsrep_thd_has_ignored_error
#undef wsrep_thd_set_ignored_error
#undef wsrep_report_bf_lock_wait
#undef wsrep_thd_set_PA_unsafe
#undef wsrep_get_domain_id
#undef MYSQL_DYNAMIC_PLUGIN
#include "wsrep_mysqld.h"          // wsrep_ready_get()
#include "wsrep_trans_observer.h"  // wsrep_open(), wsrep_before_command(), ...

namespace tablesocket {

static std::atomic<bool> g_galera_writes{false};
void set_galera_writes(bool on) { g_galera_writes.store(on, std::memory_order_relaxed); }

namespace {
const char kNotReady[] =
    "this Galera node is not ready (not part of the primary component), as SQL reports it "
    "(WSREP has not yet prepared node for application use): try again, or use another node";
}  // namespace

Store_status Mariadb_store::galera_refusal(const char *why) {
  last_error_ = why;
  return with_last_error(Store_errc::not_replicated);
}

Store_status Mariadb_store::galera_check_ready() {
#ifdef WITH_WSREP
  /* A node outside the primary component may be behind the cluster: SQL refuses statements there
     (reads too, unless wsrep_dirty_reads). */
  if (WSREP_ON && !wsrep_ready_get() && !global_system_variables.wsrep_dirty_reads)
    return galera_refusal(kNotReady);
#endif
  return {};
}

Store_status Mariadb_store::galera_begin_write() {
#ifdef WITH_WSREP
  THD *thd = thd_;
  if (!WSREP_ON) {
    /* Not replicating (no provider, or SET GLOBAL wsrep_on=OFF): like an SQL session started now,
       this one replicates nothing. */
    if (!wsrep_is_active(thd)) thd->variables.wsrep_on = false;
    return {};
  }
  if (wsrep_is_active(thd)) {
    /* A write set over wsrep_max_ws_rows fails as a whole: a request that could take this batch's
       there runs in the next batch instead (the worker ends this one). */
    if (wsrep_max_ws_rows && batch_wrote_ && thd->wsrep_affected_rows >= wsrep_max_ws_rows) {
      batch_full_ = true;
      return Store_status::of(Store_errc::table_busy);
    }
    return {};  // this batch's transaction replicates already
  }
  if (!wsrep_ready_get()) return galera_refusal(kNotReady);
  if (!g_galera_writes.load(std::memory_order_relaxed)) {
    static std::atomic<bool> logged{false};
    if (!logged.exchange(true))
      log_warning("writes are refused on this Galera node: without tablesocket_galera_writes=ON they "
                  "would not be replicated to the other nodes; reads are served");
    return galera_refusal("writes are refused on a Galera node (wsrep_on): start the server with "
                          "tablesocket_galera_writes=ON to replicate them (experimental), or write "
                          "through SQL");
  }
  thd->variables.wsrep_on = true;
  if (thd->wsrep_cs().state() == wsrep::client_state::s_none) wsrep_open(thd);
  if (thd->wsrep_cs().state() == wsrep::client_state::s_none)
    return galera_refusal("cannot open a Galera client session: the write would not be replicated");
  if (thd->wsrep_cs().state() == wsrep::client_state::s_idle && wsrep_before_command(thd)) {
    galera_end_command(thd);
    return galera_refusal("Galera refused the write (the node's replication is not ready)");
  }
  thd->set_wsrep_next_trx_id(next_query_id());
  if (wsrep_start_trx_if_not_started(thd)) {
    galera_end_command(thd);
    return galera_refusal("cannot start a Galera transaction: the write would not be replicated");
  }
#endif
  return {};
}

bool Mariadb_store::galera_take_table_locks() {
#ifdef WITH_WSREP
  /* The tables' metadata locks belong to owner_, which is no wsrep client: a replicated DDL
     (total order isolation) that needs one could not abort the batch holding it, while the batch's
     commit waits for that DDL in the cluster's commit order - the node hung, and the cluster with
     it. So the batch THD takes shared-write locks on the tables it wrote (for the transaction, as
     SQL's statements do) and the worker closes them: a DDL now meets the wsrep client, which
     Galera aborts (or replays after it). A DDL already waiting for a table makes the batch yield:
     false (the caller rolls it back). */
  for (uint32_t n : written_slots_) {
    Table_slot &s = slots_[n];
    if (!s.table) continue;
    galera_mdl_.emplace_back();
    MDL_request &r = galera_mdl_.back();
    MDL_REQUEST_INIT(&r, MDL_key::TABLE, s.db.c_str(), s.name.c_str(), MDL_SHARED_WRITE, MDL_TRANSACTION);
    if (thd_->mdl_context.try_acquire_lock(&r) || !r.ticket) {
      clear_diagnostics();
      return false;
    }
  }
#endif
  return true;
}

bool Mariadb_store::galera_replicating(THD *thd) {
#ifdef WITH_WSREP
  return wsrep_is_active(thd);
#else
  (void)thd;
  return false;
#endif
}

void Mariadb_store::galera_end_command(THD *thd) {
#ifdef WITH_WSREP
  if (thd->wsrep_cs().state() != wsrep::client_state::s_exec) return;
  /* After the commit or rollback: an aborted transaction is cleaned up (a transaction BF-aborted
     after certification is replayed here, as for SQL); the client session goes idle and its
     error is reset for the next batch. */
  (void)wsrep_after_statement(thd);
  wsrep_after_command_before_result(thd);
  wsrep_after_command_after_result(thd);
  if (thd->killed && thd->killed < KILL_SYSTEM_THREAD && thd->wsrep_aborter) thd->reset_killed();
#else
  (void)thd;
#endif
}

void Mariadb_store::galera_close(THD *thd) {
#ifdef WITH_WSREP
  galera_end_command(thd);
  wsrep_close(thd);
#else
  (void)thd;
#endif
}

}  // namespace tablesocket
