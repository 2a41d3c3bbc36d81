#include "session/mc_containers.h"

#include <algorithm>
#include <memory>
#include <mutex>

#include "common/names.h"
#include "session/captured_rows.h"

namespace tablesocket {
namespace {

std::string trim(std::string_view s) {
  size_t a = 0, b = s.size();
  while (a < b && (s[a] == ' ' || s[a] == '\t')) ++a;
  while (b > a && (s[b - 1] == ' ' || s[b - 1] == '\t')) --b;
  return std::string(s.substr(a, b - a));
}

/* MySQL's plugin accepted , ; | and space between value column names. */
std::vector<std::string> split_columns(std::string_view s) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == ',' || c == ';' || c == '|' || c == ' ' || c == '\t') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

/* The configuration a connection last read: the other connections take it while it is fresh
   rather than read the table themselves, and a connection that cannot read it (the table is busy:
   LOCK TABLES ... WRITE, a DDL running on it) is served with it rather than waiting for the lock.
   Looked at when a connection's list is max_age_ms old (once a second each), never per request. */
struct Last_read {
  std::mutex mu;
  std::string schema;
  std::shared_ptr<const std::vector<Mc_container>> list;  // null: none yet, or the table is gone
  uint64_t read_at_ms = 0;                                 // when list was read
};
Last_read &last_read() {
  static Last_read l;
  return l;
}

/* The list last read from schema's table (null if none), and when in *read_at_ms; fresh_for_ms:
   only one read less than that before now_ms (0: of any age). */
std::shared_ptr<const std::vector<Mc_container>> last_list(const std::string &schema, uint64_t now_ms,
                                                           uint64_t fresh_for_ms, uint64_t *read_at_ms) {
  Last_read &l = last_read();
  std::lock_guard<std::mutex> g(l.mu);
  if (!l.list || l.schema != schema || (fresh_for_ms && now_ms >= l.read_at_ms + fresh_for_ms)) return nullptr;
  *read_at_ms = l.read_at_ms;
  return l.list;
}

}  // namespace

/* "" when the container's columns all differ (as MariaDB compares column names: ignoring case);
   else what is wrong, for the clients that use it. */
static std::string overlap_problem(const Mc_container &c) {
  std::vector<std::pair<std::string_view, const char *>> cols;
  cols.emplace_back(c.key_column, "key column");
  for (const std::string &v : c.value_columns) cols.emplace_back(v, "value columns");
  if (!c.flags_column.empty()) cols.emplace_back(c.flags_column, "flags column");
  if (!c.cas_column.empty()) cols.emplace_back(c.cas_column, "cas column");
  if (!c.expiry_column.empty()) cols.emplace_back(c.expiry_column, "expire_time column");
  for (size_t i = 0; i < cols.size(); ++i)
    for (size_t j = i + 1; j < cols.size(); ++j)
      if (names_equal(cols[i].first, cols[j].first)) {
        const std::string head = "container " + c.name + ": column " + std::string(cols[i].first);
        if (cols[i].second == cols[j].second) return head + " is named twice in its " + cols[i].second;
        return head + " is both its " + cols[i].second + " and its " + cols[j].second +
               " (a column may serve one purpose only)";
      }
  return {};
}

Store_status Mc_containers::refresh(Store &store, const std::string &schema, uint64_t now_ms, uint64_t max_age_ms) {
  if (loaded_ && now_ms - loaded_at_ms_ < max_age_ms) return {};
  uint64_t read_at = 0;
  /* Read by another connection within max_age_ms: as fresh as a read of our own. */
  if (auto fresh = last_list(schema, now_ms, max_age_ms, &read_at)) {
    adopt(std::move(fresh), std::min(read_at, now_ms));
    return {};
  }
  Store_status st = reread(store, schema, now_ms);
  /* The table is gone (DROP TABLE, DROP DATABASE) or no longer has the columns or key the
     configuration is read by: every connection stops using what it read before, as a new
     connection cannot read it either (a busy table, say a lock held by DDL or a backup, keeps the
     previous configuration). */
  const bool gone = st.errc == Store_errc::table_open_failed || st.errc == Store_errc::index_not_found ||
                    st.errc == Store_errc::column_not_found;
  if (gone) {
    Last_read &l = last_read();
    std::lock_guard<std::mutex> g(l.mu);
    if (l.schema == schema) l.list.reset();
  }
  if (loaded_ && gone) {
    list_.clear();
    adopted_.reset();
    loaded_ = false;
    ++generation_;
    containers_idx_.reset();
    options_idx_.reset();
  }
  const bool busy = st.errc == Store_errc::table_busy || st.errc == Store_errc::row_locked ||
                    st.errc == Store_errc::lock_queued;
  if (!loaded_ && busy) {
    /* A connection that has read nothing yet takes what the others read before the lock (and
       tries the table again in max_age_ms). */
    if (auto list = last_list(schema, now_ms, 0, &read_at)) {
      adopt(std::move(list), now_ms);
      return {};
    }
  }
  return st;
}

void Mc_containers::adopt(std::shared_ptr<const std::vector<Mc_container>> list, uint64_t loaded_at_ms) {
  if (list != adopted_ || !loaded_) {
    list_ = *list;
    adopted_ = std::move(list);
    ++generation_;
  }
  loaded_ = true;
  loaded_at_ms_ = loaded_at_ms;
}

Store_status Mc_containers::reread(Store &store, const std::string &schema, uint64_t now_ms) {
  if (!containers_idx_.valid()) {
    Index_spec spec;
    spec.db = schema;
    spec.table = "containers";
    spec.index = "PRIMARY";
    spec.columns = "name,db_schema,db_table,key_columns,value_columns,flags,cas_column,expire_time_column,"
                   "unique_idx_name_on_key";
    Store_status st = store.open_index(spec, containers_idx_);
    if (!st.ok()) return st;
  }
  std::string separator = "|";
  if (!options_idx_.valid()) {
    Index_spec spec;
    spec.db = schema;
    spec.table = "config_options";
    spec.index = "PRIMARY";
    spec.columns = "value";
    store.open_index(spec, options_idx_);  // optional table: the default separator applies without it
  }
  if (options_idx_.valid()) {
    Datum key{"separator", 9};
    Find_request fr;
    fr.counts_rows = false;
    fr.op = Find_op::eq;
    fr.keys = &key;
    fr.nkeys = 1;
    Captured_rows rows;
    if (store.find(options_idx_, fr, rows).ok() && rows.nrows() && !rows.is_null(0, 0) && !rows.cell(0, 0).empty())
      separator = rows.cell(0, 0);
  }
  Datum from{"", 0};
  Find_request fr;
  fr.counts_rows = false;
  fr.op = Find_op::ge;
  fr.keys = &from;
  fr.nkeys = 1;
  fr.limit = 100000;
  Captured_rows rows(100000);
  Store_status st = store.find(containers_idx_, fr, rows);
  if (!st.ok()) return st;
  std::vector<Mc_container> list;
  for (size_t r = 0; rows.ncols() == 9 && r < rows.nrows(); ++r) {
    Mc_container c;
    c.name = rows.cell(r, 0);
    c.db = trim(rows.cell(r, 1));
    c.table = trim(rows.cell(r, 2));
    c.key_column = trim(rows.cell(r, 3));
    c.value_columns = split_columns(rows.cell(r, 4));
    std::string flags = trim(rows.cell(r, 5));
    if (!rows.is_null(r, 5) && !flags.empty() && flags != "0") c.flags_column = flags;
    if (!rows.is_null(r, 6)) c.cas_column = trim(rows.cell(r, 6));
    if (!rows.is_null(r, 7)) c.expiry_column = trim(rows.cell(r, 7));
    c.index = trim(rows.cell(r, 8));
    if (c.db.empty() || c.table.empty() || c.key_column.empty() || c.value_columns.empty()) continue;
    c.columns = c.key_column;
    for (auto &v : c.value_columns) c.columns += "," + v;
    int pos = 1 + int(c.value_columns.size());
    auto add = [&](const std::string &col, int *slot) {
      if (col.empty()) return;
      c.columns += "," + col;
      *slot = pos++;
    };
    c.layout.nvalues = uint32_t(c.value_columns.size());
    add(c.flags_column, &c.layout.flags);
    add(c.cas_column, &c.layout.cas);
    add(c.expiry_column, &c.layout.expiry);
    c.layout.separator = separator;
    c.problem = overlap_problem(c);
    list.push_back(std::move(c));
  }
  list_ = std::move(list);
  ++generation_;
  loaded_ = true;
  loaded_at_ms_ = now_ms;
  auto shared = std::make_shared<const std::vector<Mc_container>>(list_);
  adopted_ = shared;
  Last_read &l = last_read();
  std::lock_guard<std::mutex> g(l.mu);
  l.schema = schema;
  l.list = std::move(shared);
  l.read_at_ms = now_ms;
  return {};
}

const Mc_container *Mc_containers::find(std::string_view name) const {
  for (auto &c : list_)
    if (c.name == name) return &c;
  return nullptr;
}

const Mc_container *Mc_containers::default_container() const {
  if (const Mc_container *d = find("default")) return d;
  return list_.empty() ? nullptr : &list_.front();  // rows come in name order
}

}  // namespace tablesocket
