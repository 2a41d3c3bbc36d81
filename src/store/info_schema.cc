/* INFORMATION_SCHEMA.TABLESOCKET_CONNECTIONS: one row per client connection, like the process list
   SQL connections get. An account with the PROCESS privilege sees every connection; any other sees
   the connections logged in as its own account. */
#include "store/info_schema.h"

#include "store/server_incl.h"

#include "sql_acl.h"   // check_global_access()
#include "sql_i_s.h"   // Show::Column

bool schema_table_store_record(THD *thd, TABLE *table);

namespace tablesocket {
namespace {

Connections_provider g_provider = nullptr;

enum Col { ID, WORKER, PORT, REMOTE, USER, HOST, TLS, TIME, IDLE, STATE, INPUT, OUTPUT };

}  // namespace
}  // namespace tablesocket

namespace Show {
static ST_FIELD_INFO tablesocket_connection_fields[] = {
    Column("ID", ULonglong(20), NOT_NULL),
    Column("WORKER", ULong(10), NOT_NULL),
    Column("PORT", Varchar(16), NOT_NULL),
    Column("REMOTE_ADDRESS", Varchar(64), NOT_NULL),
    Column("USER", Varchar(USERNAME_CHAR_LENGTH), NOT_NULL),
    Column("HOST", Varchar(HOSTNAME_LENGTH), NOT_NULL),
    Column("TLS", Varchar(3), NOT_NULL),
    Column("TIME", ULonglong(20), NOT_NULL),
    Column("IDLE", ULonglong(20), NOT_NULL),
    Column("STATE", Varchar(64), NOT_NULL),
    Column("INPUT_BYTES", ULonglong(20), NOT_NULL),
    Column("OUTPUT_BYTES", ULonglong(20), NOT_NULL),
    CEnd()};
}  // namespace Show

namespace tablesocket {
namespace {

int fill_connections(THD *thd, TABLE_LIST *tables, Item *) {
  if (!g_provider) return 0;
  TABLE *t = tables->table;
  const bool see_all = !check_global_access(thd, PROCESS_ACL, true);
  const Security_context *sctx = thd->security_ctx;
  std::vector<Connection_info> rows;
  try {
    rows = g_provider();
  } catch (...) {
    return 0;  // out of memory while copying the snapshot: an empty table, not a failed query
  }
  auto put = [&](int col, const std::string &s) { t->field[col]->store(s.data(), s.size(), system_charset_info); };
  for (const Connection_info &r : rows) {
    if (!see_all && (r.user != sctx->priv_user || r.host != sctx->priv_host)) continue;
    t->field[ID]->store(longlong(r.id), true);
    t->field[WORKER]->store(longlong(r.worker), true);
    put(PORT, r.port);
    put(REMOTE, r.remote);
    put(USER, r.user);
    put(HOST, r.host);
    put(TLS, r.tls ? "YES" : "NO");
    t->field[TIME]->store(longlong(r.connected_s), true);
    t->field[IDLE]->store(longlong(r.idle_s), true);
    put(STATE, r.state);
    t->field[INPUT]->store(longlong(r.input_bytes), true);
    t->field[OUTPUT]->store(longlong(r.output_bytes), true);
    if (schema_table_store_record(thd, t)) return 1;
  }
  return 0;
}

}  // namespace

int info_schema_connections_init(void *p, Connections_provider provider) {
  g_provider = provider;
  ST_SCHEMA_TABLE *schema = static_cast<ST_SCHEMA_TABLE *>(p);
  schema->fields_info = Show::tablesocket_connection_fields;
  schema->fill_table = fill_connections;
  return 0;
}

}  // namespace tablesocket
