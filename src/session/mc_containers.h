/* memcached containers: which table, columns and index a key space maps to, read from the
   configuration schema (MySQL's innodb_memcache layout) through the Store, and re-read at most once
   a second when used, so changes take effect without a restart. */
#ifndef TABLESOCKET_SESSION_MC_CONTAINERS_H
#define TABLESOCKET_SESSION_MC_CONTAINERS_H

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "store/store.h"

namespace tablesocket {

struct Mc_container {
  std::string name, db, table, index, key_column;
  std::vector<std::string> value_columns;
  std::string flags_column, cas_column, expiry_column;  // empty: the container has none
  std::string columns;  // the open index's column list: key, values, flags, cas, expiry
  /* Why the row cannot be served ("" if it can): a column named twice (as key and expiry, say)
     would have one write put the expiry where the key goes. */
  std::string problem;
  Kv_layout layout;
  bool same_mapping(const Mc_container &o) const {
    return db == o.db && table == o.table && index == o.index && columns == o.columns &&
           layout.separator == o.layout.separator;
  }
};

class Mc_containers {
 public:
  /* Re-reads the configuration if it is older than max_age_ms (or was never read); a list another
     connection read less than max_age_ms ago is taken instead, so the table is read about once a
     second per server, not per connection. On failure the status says why; the previous
     configuration stays in use while the table is only busy (a connection that has none takes the
     one last read), and is dropped (loaded() false) when the table, its primary key or a column is
     gone. */
  Store_status refresh(Store &store, const std::string &schema, uint64_t now_ms, uint64_t max_age_ms = 1000);
  /* nullptr when no container has that name. */
  const Mc_container *find(std::string_view name) const;
  /* The container named 'default', else the first by name (as MySQL's plugin chose), or nullptr. */
  const Mc_container *default_container() const;
  bool loaded() const { return loaded_; }
  /* Every container, in name order. */
  const std::vector<Mc_container> &list() const { return list_; }
  /* Changes whenever the list is re-read: pointers from find() and default_container() stay valid
     while it does not. */
  uint64_t generation() const { return generation_; }

 private:
  Store_status reread(Store &store, const std::string &schema, uint64_t now_ms);
  /* list_ becomes a copy of another connection's list (unless it is one already), as if read at
     loaded_at_ms. */
  void adopt(std::shared_ptr<const std::vector<Mc_container>> list, uint64_t loaded_at_ms);
  std::vector<Mc_container> list_;
  /* The list another connection read and published, when list_ is a copy of it: taken again only
     when it changes. */
  std::shared_ptr<const std::vector<Mc_container>> adopted_;
  bool loaded_ = false;
  uint64_t loaded_at_ms_ = 0;
  uint64_t generation_ = 0;
  Open_index containers_idx_, options_idx_;
};

/* "@@name" or "@@name.key": the key names a container (MySQL's plugin's syntax). */
inline bool names_container(std::string_view key) { return key.size() > 2 && key[0] == '@' && key[1] == '@'; }

}  // namespace tablesocket
#endif
