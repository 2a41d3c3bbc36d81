#include "session/mc_session.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <sys/resource.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/kv_cas.h"
#include "session/captured_rows.h"

namespace tablesocket {
namespace {

using mc::Mc_command;
using mc::Mc_meta_code;
using mc::Mc_reply;
using mc::Mc_request;

constexpr int32_t kRelativeExptimeMax = 60 * 60 * 24 * 30;  // memcached: larger is a unix time

uint64_t to_u64(std::string_view s) {
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') break;
    v = v * 10 + uint64_t(c - '0');
  }
  return v;
}

int64_t to_i64(std::string_view s) {
  if (!s.empty() && s[0] == '-') return -int64_t(to_u64(s.substr(1)));
  return int64_t(to_u64(s));
}

/* mg with both T and R: whether T comes first (memcached applies mg's flags in the order sent). */
bool ttl_before_recache(const Mc_request &rq) {
  if (!rq.meta.has_ttl || !rq.meta.has_recache) return false;
  for (uint32_t i = 0; i < rq.nmeta_flags; ++i) {
    if (rq.meta_flags[i].flag == 'T') return true;
    if (rq.meta_flags[i].flag == 'R') return false;
  }
  return false;
}

/* memcached's stale/win bits (mg N and R, ms I, md I) for rows in tables. memcached keeps them in
   the item; a row has no place for them, so they live here, server-wide (one key's clients may be
   on different workers), keyed by table and key and tied to the row's CAS: any write of the row
   from anywhere (SQL too) changes its CAS and so voids the entry, and a memcached write of the key
   drops it. Sharded by key: a request takes a shard's mutex only when it uses these flags or its
   shard holds entries (while no shard holds any, one relaxed atomic load). Bounded: a shard past its share of
   kMax starts over (its clients then see no Z/X until the next N/R/I). */
class Recache_tokens {
 public:
  struct State {
    bool stale = false;       // X: the item was invalidated (ms I with an older CAS, md I)
    bool token_sent = false;  // Z: a client already won the right to recache it (W)
  };
  static Recache_tokens &instance() {
    static Recache_tokens t;
    return t;
  }
  /* True when row_key's shard holds no entry; without hashing the key while no shard holds any. */
  bool empty(std::string_view row_key) const {
    return total_.load(std::memory_order_relaxed) == 0 || shard(row_key).count.load(std::memory_order_relaxed) == 0;
  }
  /* The state of the row whose CAS is cas (an entry for another CAS is void: dropped). */
  State get(std::string_view row_key, const std::string &key, uint64_t cas) {
    Shard &sh = shard(row_key);
    std::lock_guard<std::mutex> g(sh.mu);
    auto it = sh.map.find(key);
    if (it == sh.map.end()) return {};
    if (it->second.cas == cas) return it->second.state;
    sh.map.erase(it);
    resized(sh);
    return {};
  }
  void put(std::string_view row_key, const std::string &key, uint64_t cas, State s) {
    Shard &sh = shard(row_key);
    std::lock_guard<std::mutex> g(sh.mu);
    if (sh.map.size() >= kMax / kShards) sh.map.clear();
    sh.map[key] = Entry{cas, s};
    resized(sh);
  }
  void forget(std::string_view row_key, const std::string &key) {
    Shard &sh = shard(row_key);
    std::lock_guard<std::mutex> g(sh.mu);
    if (sh.map.erase(key)) resized(sh);
  }
  /* The row changed from CAS from to CAS to, keeping its state (an entry for another CAS is
     void: dropped). */
  void carry(std::string_view row_key, const std::string &key, uint64_t from, uint64_t to) {
    Shard &sh = shard(row_key);
    std::lock_guard<std::mutex> g(sh.mu);
    auto it = sh.map.find(key);
    if (it == sh.map.end()) return;
    if (it->second.cas == from) {
      it->second.cas = to;
      return;
    }
    sh.map.erase(it);
    resized(sh);
  }

 private:
  static constexpr size_t kMax = 100000, kShards = 64;
  struct Entry {
    uint64_t cas;
    State state;
  };
  struct alignas(64) Shard {
    std::mutex mu;
    std::unordered_map<std::string, Entry> map;
    std::atomic<size_t> count{0};
  };
  /* After sh.map changed size (under sh.mu): its count and the total follow. */
  void resized(Shard &sh) {
    const size_t now = sh.map.size(), before = sh.count.exchange(now, std::memory_order_relaxed);
    total_.fetch_add(now - before, std::memory_order_relaxed);  // modulo 2^64: a decrease subtracts
  }
  Shard &shard(std::string_view row_key) { return shards_[std::hash<std::string_view>()(row_key) % kShards]; }
  const Shard &shard(std::string_view row_key) const {
    return shards_[std::hash<std::string_view>()(row_key) % kShards];
  }
  Shard shards_[kShards];
  std::atomic<size_t> total_{0};  // entries in all shards
};

/* The counters memcached's `stats` lists, by their memcached names, in its order. One table serves
   the listing and `stats reset`, so a figure cannot be listed without also being reset. */
struct Mc_figure {
  const char *name;
  std::atomic<uint64_t> Counters::*counter;
};
constexpr Mc_figure kMcFigures[] = {
    {"total_connections", &Counters::connections_total}, {"rejected_connections", &Counters::connections_rejected},
    {"cmd_get", &Counters::mc_cmd_get},           {"cmd_set", &Counters::mc_cmd_set},
    {"get_hits", &Counters::mc_get_hits},         {"get_misses", &Counters::mc_get_misses},
    {"get_expired", &Counters::mc_get_expired},   {"total_items", &Counters::mc_total_items},
    {"cmd_touch", &Counters::mc_cmd_touch},       {"cmd_flush", &Counters::mc_cmd_flush},
    {"touch_hits", &Counters::mc_touch_hits},     {"touch_misses", &Counters::mc_touch_misses},
    {"delete_misses", &Counters::mc_delete_misses}, {"delete_hits", &Counters::mc_delete_hits},
    {"incr_misses", &Counters::mc_incr_misses},   {"incr_hits", &Counters::mc_incr_hits},
    {"decr_misses", &Counters::mc_decr_misses},   {"decr_hits", &Counters::mc_decr_hits},
    {"cas_misses", &Counters::mc_cas_misses},     {"cas_hits", &Counters::mc_cas_hits},
    {"cas_badval", &Counters::mc_cas_badval},     {"rows_read", &Counters::rows_read},
    {"rows_written", &Counters::rows_written},    {"errors", &Counters::errors},
    {"bytes_read", &Counters::bytes_received},    {"bytes_written", &Counters::bytes_sent},
    {"store_too_large", &Counters::mc_store_too_large},
};
constexpr size_t kNumMcFigures = sizeof kMcFigures / sizeof kMcFigures[0];

/* `stats reset` takes the totals at that moment as the zero of the figures memcached clients see,
   as memcached zeroes its own (SHOW STATUS keeps counting from the start). Process-wide, like
   memcached's. */
class Mc_stats_zero {
 public:
  static Mc_stats_zero &instance() {
    static Mc_stats_zero z;
    return z;
  }
  void reset(const Counters &now) {
    for (size_t i = 0; i < kNumMcFigures; ++i)
      zero_[i].store((now.*kMcFigures[i].counter).load(std::memory_order_relaxed), std::memory_order_relaxed);
  }
  /* Figure i of now, counted from the last reset (a counter never goes back). */
  uint64_t since_reset(const Counters &now, size_t i) const {
    return (now.*kMcFigures[i].counter).load(std::memory_order_relaxed) - zero_[i].load(std::memory_order_relaxed);
  }

 private:
  std::atomic<uint64_t> zero_[kNumMcFigures] = {};
};

/* "12.000345", as memcached prints rusage_user/rusage_system. */
std::string timeval_text(const timeval &tv) {
  char buf[48];
  snprintf(buf, sizeof buf, "%lld.%06ld", static_cast<long long>(tv.tv_sec), static_cast<long>(tv.tv_usec));
  return buf;
}

/* When this plugin was loaded (INSTALL SONAME or server start): memcached's uptime. */
const time_t g_loaded_at = time(nullptr);

/* flush_all <delay>: memcached invalidates at the deadline everything stored before it, what is
   stored during the delay included. The rows that exist when the command comes get the deadline
   as their expiry (in the table: durable and replicated); the rows memcached clients write during
   the delay get it too, capped here. Process-wide (every worker's connections); while no deadline
   is pending a write reads one atomic. A later flush_all of the table replaces its deadline, as
   memcached's does. */
class Flush_deadlines {
 public:
  static Flush_deadlines &instance() {
    static Flush_deadlines d;
    return d;
  }
  /* deadline: unix time; 0 = none pending any more (flush_all without a delay). */
  void set(const Mc_container &c, int64_t deadline) {
    std::lock_guard<std::mutex> g(mu_);
    if (deadline > 0)
      by_table_[table_key(c)] = deadline;
    else
      by_table_.erase(table_key(c));
    int64_t latest = 0;
    for (const auto &e : by_table_) latest = std::max(latest, e.second);
    latest_.store(latest, std::memory_order_relaxed);
  }
  /* The deadline pending for c's table at `now`, or 0. */
  int64_t pending(const Mc_container &c, int64_t now) {
    if (now >= latest_.load(std::memory_order_relaxed)) return 0;
    std::lock_guard<std::mutex> g(mu_);
    auto it = by_table_.find(table_key(c));
    return it != by_table_.end() && now < it->second ? it->second : 0;
  }

 private:
  static std::string table_key(const Mc_container &c) { return c.db + '\0' + c.table; }
  std::mutex mu_;
  std::unordered_map<std::string, int64_t> by_table_;
  std::atomic<int64_t> latest_{0};  // the latest deadline of any table
};


}  // namespace

int64_t Mc_session::absolute_expiry(int32_t exptime) const {
  if (exptime == 0) return 0;
  const int64_t now = int64_t(time(nullptr));
  if (exptime < 0) return 1;  // already expired, as memcached treats a negative exptime
  if (exptime <= kRelativeExptimeMax) return now + exptime;
  return exptime;
}

int64_t Mc_session::absolute_expiry_u32(uint32_t exptime) const {
  /* memcached's binary exptime is unsigned: no "already expired" negative values; a time beyond
     2038 is a unix time like any other above 30 days. */
  if (exptime <= uint32_t(INT32_MAX)) return absolute_expiry(int32_t(exptime));
  return int64_t(exptime);
}

Mc_session::Meta_ttl Mc_session::walk_meta_ttl(const Mc_request &rq, bool found, int64_t item_expiry,
                                               bool creates) const {
  Meta_ttl m;
  bool exists = found;
  int64_t cur = item_expiry;
  for (uint32_t i = 0; i < rq.nmeta_flags; ++i) {
    switch (rq.meta_flags[i].flag) {
      case 'T':
        cur = absolute_expiry(rq.meta.ttl);
        exists = true;
        m.expiry = cur;
        break;
      case 'N':
        if (!creates) break;  // only a miss creates
        cur = absolute_expiry(rq.meta.vivify_ttl);
        exists = true;
        m.expiry = cur;
        break;
      case 't': m.reported = exists ? ttl_of_expiry(cur) : -1; break;
      default: break;
    }
  }
  return m;
}

Mc_session::Open_container *Mc_session::open_container(const Mc_container &c, Store_status *st) {
  if (!c.problem.empty()) {
    config_error_ = c.problem;
    *st = Store_status::of(Store_errc::bad_value);
    st->message = config_error_;
    return nullptr;
  }
  auto it = open_.find(c.name);
  if (it != open_.end() && it->second.def.same_mapping(c)) return &it->second;
  Open_container oc;
  oc.def = c;
  Index_spec spec;
  spec.db = c.db;
  spec.table = c.table;
  spec.index = c.index;
  spec.columns = c.columns;
  spec.filter_columns = c.key_column;  // range gets stop with a filter on the key
  spec.for_write = true;
  spec.unique_on_first_column = true;
  spec.principal = principal_;
  *st = store_.open_index(spec, oc.idx);
  if (!st->ok()) return nullptr;
  auto &slot = open_[c.name];
  if (slot.idx.valid()) container_bytes_ -= std::min(container_bytes_, slot.idx.memory_bytes());  // replaced
  slot = std::move(oc);
  container_bytes_ += slot.idx.memory_bytes();
  return &slot;
}

void Mc_session::forget_containers() {
  open_.clear();
  container_bytes_ = 0;
  default_oc_ = nullptr;
}

void Mc_session::prune_containers() {
  const bool over = open_.size() > cfg_.max_open_indexes;
  if (!over && pruned_gen_ == containers_.generation()) return;
  pruned_gen_ = containers_.generation();
  for (auto it = open_.begin(); it != open_.end();) {
    const Mc_container *c = over ? nullptr : containers_.find(it->first);
    if (c && it->second.def.same_mapping(*c)) {
      ++it;
      continue;
    }
    if (default_oc_ == &it->second) default_oc_ = nullptr;
    container_bytes_ -= std::min(container_bytes_, it->second.idx.memory_bytes());
    it = open_.erase(it);
  }
}

std::string Mc_session::use_container(std::string_view key, const Open_container &oc) {
  current_.assign(key.substr(2));
  default_oc_ = nullptr;  // the next key without @@ resolves against the new container
  return oc.def.db + "/" + oc.def.table;
}

void Mc_session::container_switch_failed(std::string_view key) {
  /* The client asked for that container: its next keys must not go to the one it had (a client
     library may read the get's SERVER_ERROR as a miss and carry on writing). They are answered
     with the container's error until a switch succeeds, as when a container leaves the
     configuration. */
  current_.assign(key.substr(2));
  default_oc_ = nullptr;
}

Mc_session::Open_container *Mc_session::resolve(std::string_view key, std::string_view *row_key, Store_status *st) {
  /* Every request asks; the table is reread once a second: the coarse clock is enough. */
  *st = containers_.refresh(store_, cfg_.mc_config_schema, coarse_monotonic_ms());
  if (!st->ok() && !containers_.loaded()) {
    /* (A table without any index cannot be opened at all: table_open_failed.) */
    const char *why = st->errc == Store_errc::table_open_failed  ? "missing, or without a PRIMARY KEY"
                      : st->errc == Store_errc::index_not_found  ? "no PRIMARY KEY"
                      : st->errc == Store_errc::column_not_found ? "a column is missing"
                                                                 : nullptr;
    if (why) {
      config_error_ = "no memcached configuration: " + cfg_.mc_config_schema + ".containers: " + why +
                      " (load sql/memcached_schema.sql)";
      st->message = config_error_;
      st->errc = Store_errc::bad_value;
    }
    return nullptr;
  }
  *st = {};
  const Mc_container *c = nullptr;
  *row_key = key;
  const bool named = names_container(key);
  /* The connection's own container, as the previous request found it: most requests name none. */
  if (!named && default_oc_ && default_gen_ == containers_.generation()) return default_oc_;
  if (named) {
    /* @@container.key (MySQL's table_map_delimiter is '.') */
    std::string_view rest = key.substr(2);
    size_t dot = rest.find('.');
    std::string_view name = dot == std::string_view::npos ? rest : rest.substr(0, dot);
    c = containers_.find(name);
    *row_key = dot == std::string_view::npos ? std::string_view() : rest.substr(dot + 1);
  } else {
    /* A container the connection switched to that has left the configuration is an error, as
       `get @@name` is on a new connection, not the default container: the client's writes would
       go to another table. */
    c = current_.empty() ? containers_.default_container() : containers_.find(current_);
  }
  if (!c) {
    config_error_ = "no such container" + (named || current_.empty() ? std::string() : " '" + current_ + "'") +
                    " (see the containers table in " + cfg_.mc_config_schema + ")";
    *st = Store_status::of(Store_errc::bad_value);
    st->message = config_error_;
    return nullptr;
  }
  Open_container *oc = open_container(*c, st);
  if (oc && !named) {
    default_oc_ = oc;
    default_gen_ = containers_.generation();
  }
  return oc;
}

/* Cells per row a container's reads capture: key, values, then flags, cas, expiry if it has them. */
static size_t row_cells(const Kv_layout &l) {
  return 1 + l.nvalues + (l.flags >= 0) + (l.cas >= 0) + (l.expiry >= 0);
}

size_t Mc_session::decode_items(const Kv_layout &l, const Captured_rows &rows, Item_list &items,
                                const std::string_view *known_key) {
  const size_t nc = row_cells(l);
  size_t expired = 0;
  const int64_t now = l.expiry >= 0 ? int64_t(time(nullptr)) : 0;
  for (size_t r = 0; r + nc <= rows.ncells(); r += nc) {
    /* A NULL or empty key (rows SQL wrote: a UNIQUE index allows NULLs) is no memcached key: a
       range or a dump that meets such a row skips it. */
    if (!known_key && (rows.is_null(r) || rows.cell(r).empty())) continue;
    int64_t expiry = 0;
    if (l.expiry >= 0 && !rows.is_null(r + size_t(l.expiry))) {
      expiry = to_i64(rows.cell(r + size_t(l.expiry)));
      if (expiry > 0 && expiry <= now) {  // expired: a miss
        ++expired;
        continue;
      }
    }
    Item &it = items.emplace_back();  // with an earlier request's buffers
    it.expiry = expiry;
    it.key.assign(known_key ? *known_key : rows.cell(r));
    /* The value columns joined by the separator, sized once and copied in. */
    size_t size = l.nvalues > 1 ? (l.nvalues - 1) * l.separator.size() : 0;
    for (uint32_t v = 1; v <= l.nvalues; ++v) size += rows.cell(r + v).size();
    it.value.resize(size);
    char *d = it.value.data();
    for (uint32_t v = 1; v <= l.nvalues; ++v) {
      if (v > 1) d = std::copy(l.separator.begin(), l.separator.end(), d);
      const std::string_view c = rows.cell(r + v);
      d = std::copy(c.begin(), c.end(), d);
    }
    if (l.flags >= 0) it.flags = uint32_t(to_u64(rows.cell(r + size_t(l.flags))));
    /* 0: no cas column, or a row SQL wrote; cas_of() derives one from the content when asked. */
    it.cas = l.cas >= 0 ? to_u64(rows.cell(r + size_t(l.cas))) : 0;
  }
  return expired;
}

uint64_t Mc_session::cas_of(Item &it) {
  if (it.cas == 0) it.cas = content_cas(it.value, it.flags);
  return it.cas;
}

Store_status Mc_session::lookup(Open_container &oc, const std::string_view *keys, size_t n, Item_list &items,
                                bool counts_expired, bool row_keys) {
  Datum few[4];  // a multi-get's keys; one in the common case, no allocation up to four
  std::vector<Datum> many;
  Datum *in = few;
  if (n > 4) {
    many.resize(n);
    in = many.data();
  }
  for (size_t i = 0; i < n; ++i) in[i] = Datum{keys[i].data() ? keys[i].data() : "", keys[i].size()};
  Datum first = n ? in[0] : Datum{"", 0};
  Find_request fr;
  fr.counts_rows = false;
  fr.op = Find_op::eq;
  fr.keys = &first;
  fr.nkeys = 1;
  fr.limit = uint32_t(n);
  /* One key: the row found has it (a key column that compares another case or a number's other
     spelling equal finds the same row again by it), so it is not read back. (An empty key is
     none: a row holding '' is skipped, as decode_items() skips it in a range.) */
  const bool known = n == 1 && !row_keys && first.len > 0;
  fr.omits_first_column = known;
  if (n > 1) {
    fr.has_in = true;
    fr.in_column = 0;
    fr.in_values = in;
    fr.nin_values = uint32_t(n);
  }
  capture_.clear();
  Store_status st = store_.find(oc.idx, fr, capture_);
  if (!st.ok()) return st;
  const std::string_view key(first.ptr, first.len);
  const size_t expired = decode_items(oc.def.layout, capture_, items, known ? &key : nullptr);
  if (expired && counts_expired && !retrying_) counters_.add(counters_.mc_get_expired, expired);  // a range's do not count
  return {};
}

Store_status Mc_session::range(Open_container &oc, std::string_view spec, Item_list &items) {
  /* MySQL's range gets: "@<k", "@<=k", "@>k", "@>=k", or a lower and an upper bound "@>=a@<b".
     Rows come in index order, at most mc_max_range_rows of them. */
  struct Bound { Compare_op op; std::string_view key; };
  Bound b[2];
  int nb = 0;
  std::string_view s = spec;
  while (!s.empty() && nb < 2) {
    if (s[0] != '@') return Store_status::of(Store_errc::bad_value);
    s.remove_prefix(1);
    Compare_op op;
    if (s.substr(0, 2) == "<=") { op = Compare_op::le; s.remove_prefix(2); }
    else if (s.substr(0, 2) == ">=") { op = Compare_op::ge; s.remove_prefix(2); }
    else if (s.substr(0, 1) == "<") { op = Compare_op::lt; s.remove_prefix(1); }
    else if (s.substr(0, 1) == ">") { op = Compare_op::gt; s.remove_prefix(1); }
    else return Store_status::of(Store_errc::bad_value);
    size_t next = s.find('@');
    b[nb++] = Bound{op, s.substr(0, next)};
    s = next == std::string_view::npos ? std::string_view() : s.substr(next);
  }
  if (!s.empty() || nb == 0) return Store_status::of(Store_errc::bad_value);
  const Bound *lower = nullptr, *upper = nullptr;
  for (int i = 0; i < nb; ++i) {
    if (b[i].op == Compare_op::gt || b[i].op == Compare_op::ge) lower = &b[i];
    else upper = &b[i];
  }
  Index_cursor at;  // no lower bound: from the index's first row
  if (lower) {
    at.from_first = false;
    at.inclusive = lower->op == Compare_op::ge;
    at.key.assign(lower->key);
  }
  Datum start;
  Find_request fr;
  fr.counts_rows = false;
  Filter stop;
  if (upper) {
    stop.type = Filter_type::stop;
    stop.op = upper->op;
    stop.column = 0;
    stop.value = Datum{upper->key.data() ? upper->key.data() : "", upper->key.size()};
    fr.filters = &stop;
    fr.nfilters = 1;
  }
  /* Expired rows are misses and do not count towards the limit: when some of a page were expired,
     the next page starts after its last row. Pages are bounded, so a range of nothing but expired
     rows costs a bounded amount of work. */
  constexpr int kMaxPages = 16;
  const size_t first_item = items.size(), nc = row_cells(oc.def.layout);
  for (int page = 0; page < kMaxPages; ++page) {
    const size_t have = items.size() - first_item;
    if (have >= cfg_.mc_max_range_rows) break;
    at.aim(fr, start);
    fr.limit = uint32_t(cfg_.mc_max_range_rows - have);
    capture_.clear();
    Store_status st = store_.find(oc.idx, fr, capture_);
    if (!st.ok()) return st;
    const size_t before = items.size();
    decode_items(oc.def.layout, capture_, items);
    /* A key no text-protocol reply can carry (a space, CR, LF or NUL in it: the binary protocol
       and SQL may store one; over 250 bytes) is skipped: its VALUE line would put the client out
       of step. */
    Item *kept = std::remove_if(items.begin() + std::ptrdiff_t(before), items.end(), [](const Item &it) {
      return it.key.size() > mc::kMaxKeyLength ||
             it.key.find_first_of(std::string_view(" \r\n\0", 4)) != std::string::npos;
    });
    items.resize(size_t(kept - items.begin()));
    const size_t rows = capture_.ncells() / nc;
    if (rows < fr.limit || rows == 0) break;  // the range has no more rows
    at.move_past(capture_, (rows - 1) * nc);
  }
  return {};
}

Store_status Mc_session::write(Open_container &oc, Kv_request &kr, Kv_result *res, bool counted) {
  kr.now = int64_t(time(nullptr));
  if (kr.set_expiry && kr.op != Kv_op::remove) {
    const int64_t flush_at = Flush_deadlines::instance().pending(oc.def, kr.now);
    if (flush_at && (kr.expiry == 0 || kr.expiry > flush_at)) kr.expiry = flush_at;
  }
  kr.new_cas = next_kv_cas();  // the store raises it above the row's cas
  kr.max_value_size = cfg_.mc_max_value_size;
  Store_status st = store_.kv_write(oc.idx, oc.def.layout, kr, res);
  if (st.ok()) {
    if (!store_.write_committed()) wrote_in_batch = true;  // its reply waits for the batch's commit
    if (counted) count_outcome(kr.op, res->outcome);
    if (res->outcome == Kv_outcome::not_numeric) counters_.add(counters_.errors);  // answered with an error
    if (res->outcome == Kv_outcome::stored && stores_item(kr.op)) counters_.add(counters_.mc_total_items);
    /* memcached rewrites a number in place when it fits the old value's length and links a new
       item (total_items) when it does not. (It pads a shorter number with spaces, which
       tablesocket does not store: after a decr shortened it, an incr back within the old
       length counts here, not in memcached.) */
    if (res->outcome == Kv_outcome::number && res->longer) counters_.add(counters_.mc_total_items);
    /* A new value (or none) ends the item's stale/win state; a touch does not, nor a write that
       changed nothing (an add of an existing item, a cas that did not match, incr of a
       non-number, ...), nor an incr/decr memcached makes in place (a number no longer than the
       old: the same item, its bits kept; a longer one is a new item). */
    const std::string_view k = kr.key.view();
    const bool changed = res->outcome == Kv_outcome::stored || res->outcome == Kv_outcome::deleted ||
                         res->outcome == Kv_outcome::number;
    if (changed && kr.op != Kv_op::touch && !Recache_tokens::instance().empty(k)) {
      if (res->outcome == Kv_outcome::number && !res->longer)
        Recache_tokens::instance().carry(k, token_key(oc.def, k), res->previous_cas, res->cas);
      else
        Recache_tokens::instance().forget(k, token_key(oc.def, k));
    }
  }
  return st;
}

void Mc_session::count_outcome(Kv_op op, Kv_outcome outcome) {
  const bool missing = outcome == Kv_outcome::not_found;
  switch (op) {
    case Kv_op::touch: count_touches(1, missing ? 0 : 1); break;  // the touch command
    case Kv_op::cas:
      if (outcome == Kv_outcome::stored) counters_.add(counters_.mc_cas_hits);
      else if (outcome == Kv_outcome::exists) counters_.add(counters_.mc_cas_badval);
      else if (missing) counters_.add(counters_.mc_cas_misses);
      break;
    case Kv_op::remove:
      if (outcome == Kv_outcome::deleted) counters_.add(counters_.mc_delete_hits);
      else if (missing) counters_.add(counters_.mc_delete_misses);
      break;
    case Kv_op::invalidate:  // md I: memcached counts its miss, not its hit
      if (missing) counters_.add(counters_.mc_delete_misses);
      break;
    case Kv_op::incr:
    case Kv_op::decr: {
      const bool incr = op == Kv_op::incr;
      if (outcome == Kv_outcome::number) counters_.add(incr ? counters_.mc_incr_hits : counters_.mc_decr_hits);
      else if (missing) counters_.add(incr ? counters_.mc_incr_misses : counters_.mc_decr_misses);
      break;
    }
    default: break;
  }
}

Store_status Mc_session::touch_row(Open_container &oc, std::string_view key, int64_t expiry) {
  Kv_request kr;
  kr.op = Kv_op::touch;
  kr.key = Datum{key.data() ? key.data() : "", key.size()};
  kr.expiry = expiry;
  Kv_result res;
  return write(oc, kr, &res, false);  // the read that found the item counted it
}

Store_status Mc_session::add_row(Open_container &oc, std::string_view key, std::string_view value,
                                 int64_t expiry, Kv_result *res) {
  Kv_request kr;
  kr.op = Kv_op::add;
  kr.key = Datum{key.data() ? key.data() : "", key.size()};
  kr.value = Datum{value.data() ? value.data() : "", value.size()};
  kr.expiry = expiry;
  return write(oc, kr, res);
}

void Mc_session::drop_refused_item(std::string_view key) {
  /* The unlink is part of the refused set: only for a connection that could have stored it. Here
     before execute() has asked who the connection is: one that has not logged in where a login
     is required may change nothing (it deleted any item with an oversized set), and the
     anonymous account's privileges apply to the delete as to its set. */
  Auth_state::Identity id;
  if (!auth_.identity(&id, &principal_, uses_anonymous_account(cfg_)).ok() ||
      id == Auth_state::Identity::unauthenticated)
    return;
  if (!auth_.charge_request(true).ok()) return;  // MAX_UPDATES_PER_HOUR used up: no delete either
  std::string_view row_key;
  Store_status st;
  Open_container *oc = resolve(key, &row_key, &st);
  if (!oc || row_key.empty()) return;
  Kv_request kr;
  kr.op = Kv_op::remove;
  kr.key = Datum{row_key.data(), row_key.size()};
  Kv_result res;
  /* Best effort, like memcached's unlink: if the row is locked right now it simply stays. Not a
     delete of the client's: not counted as one. */
  write(*oc, kr, &res, false);
}

bool Mc_session::waits_for_lock(const Store_status &st) {
  if (st.errc == Store_errc::lock_queued) return true;  // its own session waits, with the timeout
  return (st.errc == Store_errc::table_busy || st.errc == Store_errc::row_locked) &&
         may_wait_longer(cfg_.lock_wait_timeout_ms);
}

std::string Mc_session::error_message(const Store_status &failed) {
  const Store_status st = store_.as_reported(failed);
  std::string msg;
  switch (st.errc) {
    case Store_errc::table_open_failed:
      msg = "cannot open the container's table: missing, or without an index (check the containers configuration)";
      break;
    case Store_errc::index_not_found: msg = "container index not found"; break;
    case Store_errc::index_unusable:
      msg = "the container's index cannot serve this lookup (FULLTEXT, SPATIAL and long-UNIQUE indexes "
            "serve none, hash indexes whole keys only)";
      break;
    case Store_errc::column_not_found: msg = "container column not found"; break;
    case Store_errc::bad_container_index:
      msg = "the container's index (unique_idx_name_on_key) must be a UNIQUE index on exactly its key column";
      break;
    case Store_errc::table_busy:
    case Store_errc::row_locked:
    case Store_errc::lock_queued:
    case Store_errc::lock_wait_timeout: msg = "lock wait timeout"; break;
    case Store_errc::server_read_only: msg = "server is read-only"; break;
    case Store_errc::server_shutdown: msg = "server shutdown in progress"; break;
    case Store_errc::lock_failed:
      msg = st.message.empty() ? std::string("cannot lock the table") : "cannot lock the table: " + std::string(st.message);
      break;
    case Store_errc::result_too_large: msg = "reply too large"; break;
    case Store_errc::handler_error: msg = "storage engine error " + std::to_string(st.handler_error); break;
    case Store_errc::bad_value:
    case Store_errc::not_replicated:
    case Store_errc::commit_failed:
      msg = st.message.empty() ? std::string("value rejected") : std::string(st.message);
      break;
    case Store_errc::access_denied:
      msg = st.message.empty() ? std::string("access denied") : std::string(st.message);
      break;
    default: msg = "request failed"; break;
  }
  for (char &c : msg)
    if (c == '\r' || c == '\n') c = ' ';
  return msg;
}

void Mc_session::count_failure(const Store_status &st) {
  counters_.add(counters_.errors);
  if (st.errc == Store_errc::access_denied) counters_.add(counters_.access_denied);
}

Mc_session::Exec Mc_session::server_error(const Store_status &st, Byte_buffer &out, bool noreply) {
  if (waits_for_lock(st)) return Exec::park;
  count_failure(st);
  if (noreply) return Exec::done;
  /* A missing privilege is the client's problem, as memcached words it; the rest is the server's. */
  if (st.errc == Store_errc::access_denied)
    mc::encode_client_error(out, error_message(st));
  else
    mc::encode_server_error(out, error_message(st));
  return Exec::done;
}

Session_outcome Mc_session::run(Byte_buffer &in, Byte_buffer &out, unsigned max_requests) {
  if (!negotiated_ && !in.empty()) {
    /* memcached chooses the protocol by a connection's first byte, once. */
    binary_ = mc::starts_binary_request(in.data(), in.size());
    negotiated_ = true;
  }
  const Session_outcome o = binary_ ? run_binary(in, out, max_requests) : run_text(in, out, max_requests);
  /* Items are per request (a parked one is looked up again): none is kept between runs (the
     buffers of up to 16 are, each at most 4 KiB), and the capture buffer gives back what one large
     value made it take, so an idle connection holds kilobytes, not the megabyte of the largest
     value it ever read. */
  if (!parked_ && !get_resume_ && !dumping_ && !swallow_) prune_containers();  // no request holds one
  capture_.trim(64 << 10);
  items_.trim(16);
  if (owners_.capacity() > 1024) std::vector<Open_container *>().swap(owners_);  // a get of thousands of keys
  return o;
}

mc::Mc_limits Mc_session::request_limits() const {
  mc::Mc_limits limits;
  limits.max_value_size = uint32_t(cfg_.mc_max_value_size);
  limits.max_multiget_line = cfg_.max_request_size;  // other command lines: 2048 bytes, as memcached's
  limits.max_keys = cfg_.max_tokens;
  /* Before a required login (no verified client certificate) the network layer holds at most
     kPreLoginInput of a connection's input: a longer get line or a larger data block is refused
     here with memcached's error (its data skipped as it comes), not met by that cap, which closes
     the connection without a word. A login's credentials are far smaller. Evaluated per request:
     the requests after a login in the same read get the account's limits. */
  if (pre_login_capped()) {
    limits.max_value_size = std::min<uint32_t>(limits.max_value_size, uint32_t(kPreLoginLine));
    limits.max_multiget_line = std::min<size_t>(limits.max_multiget_line, kPreLoginLine);
  }
  return limits;
}

Session_outcome Mc_session::run_text(Byte_buffer &in, Byte_buffer &out, unsigned max_requests) {
  unsigned done = 0;
  if (parked_) {
    retrying_ = true;
    Exec e = execute(parked_rq_, out);
    retrying_ = false;
    if (e == Exec::park) return Session_outcome::parked;
    parked_ = false;
    lock_wait_over();
    if (e == Exec::more) return Session_outcome::yielded;  // parsed again from `in` when it goes on
    in.consume(parked_len_);
    ++done;
    if (e == Exec::close) return Session_outcome::close;
  }
  while (!in.empty()) {
    if (swallow_) {
      in.consume(mc::swallow_step(&swallow_, in.size()));
      continue;
    }
    if (done >= max_requests || store_.batch_budget_spent() || store_.turn_spent() ||
        out.size() >= cfg_.output_high_water) return Session_outcome::yielded;
    mc::Mc_limits limits = request_limits();
    /* A get answered in parts is parsed again as it was accepted: limits lowered since (SET
       GLOBAL) do not cut it short. Its line is in the buffer already, within the cap. */
    if (get_resume_) {
      limits.max_multiget_line = ~size_t(0) >> 1;
      limits.max_keys = ~uint32_t(0) >> 1;
    }
    mc::Mc_parse_result pr = mc::parse_request(in.data(), in.size(), limits, &rq_);
    switch (pr.status) {
      case mc::Mc_parse_status::need_more:
        return Session_outcome::idle;
      case mc::Mc_parse_status::fatal:
        counters_.add(counters_.protocol_errors);
        if (pr.reply && pr.error) {
          counters_.add(counters_.errors);
          /* Before the login the limit was not tablesocket_max_request_size's (request_limits()). */
          const bool pre_login_get = pre_login_capped() && std::strncmp(pr.error, "SERVER_ERROR get line too long", 30) == 0;
          mc::encode_line(out, pre_login_get ? "SERVER_ERROR get line too long (before the login)" : pr.error);
        }
        in.clear();
        return Session_outcome::close;
      case mc::Mc_parse_status::error:
        counters_.add(counters_.errors);
        /* memcached unlinks the old item when a set (or an ms) is refused as too large, so that a
           stale value does not outlive a set the client was told failed; a refused add, replace,
           append, prepend or cas leaves it. */
        if (pr.swallow && pr.error && std::strcmp(pr.error, "SERVER_ERROR object too large for cache") == 0) {
          counters_.add(counters_.mc_store_too_large);
          if (rq_.command == Mc_command::set || rq_.command == Mc_command::ms) drop_refused_item(rq_.key());
        }
        if (pr.reply && pr.error) mc::encode_line(out, pr.error);
        in.consume(pr.consumed);
        swallow_ = pr.swallow;
        ++done;
        continue;
      case mc::Mc_parse_status::complete:
        break;
    }
    Exec e = execute(rq_, out);
    if (e == Exec::park) {
      parked_ = true;
      parked_rq_ = rq_;
      parked_len_ = pr.consumed;
      counters_.add(counters_.lock_waits);
      return Session_outcome::parked;
    }
    lock_wait_over();
    if (e == Exec::more) return Session_outcome::yielded;  // the rest once the client has read
    in.consume(pr.consumed);
    ++done;
    if (e == Exec::close) return Session_outcome::close;
  }
  return Session_outcome::idle;
}

Mc_session::Exec Mc_session::exec_ascii_auth(const Mc_request &rq, Byte_buffer &out) {
  counters_.count_request(counters_.requests_auth, retrying_);
  std::string_view data = rq.data;
  size_t sp = data.find(' ');
  std::string_view user = sp == std::string_view::npos ? data : data.substr(0, sp);
  std::string_view password = sp == std::string_view::npos ? std::string_view() : data.substr(sp + 1);
  Store_status st = auth_.login(Login_method::cleartext, user, password);
  if (st.errc == Store_errc::table_busy || st.errc == Store_errc::row_locked) return server_error(st, out, rq.noreply);
  if (!st.ok()) {
    counters_.add(counters_.errors);
    if (!rq.noreply) mc::encode_client_error(out, "authentication failure");
    return Exec::done;
  }
  forget_containers();
  auth_.forget_previous_account();
  if (!rq.noreply) mc::encode_reply(out, Mc_reply::stored);
  return Exec::done;
}

Mc_session::Exec Mc_session::execute(const Mc_request &rq, Byte_buffer &out) {
  if (rq.command != Mc_command::quit) {
    /* Who this request runs as (a login, a TLS client certificate, or the anonymous account). */
    Auth_state::Identity id;
    Store_status st = auth_.identity(&id, &principal_, uses_anonymous_account(cfg_));
    if (!st.ok()) return server_error(st, out, false);
    if (id == Auth_state::Identity::unauthenticated) {
      if (cfg_.require_auth && rq.command == Mc_command::set) return exec_ascii_auth(rq, out);
      counters_.add(counters_.errors);
      if (!rq.noreply) mc::encode_client_error(out, "unauthenticated");
      return Exec::done;
    }
    /* MAX_QUERIES_PER_HOUR / MAX_UPDATES_PER_HOUR: a command that reads or writes rows counts
       once (a multi-key get once, not per part; a retry not again). */
    if (!retrying_ && !get_resume_ && !dumping_) {
      bool data = true, write = false;
      switch (rq.command) {
        case Mc_command::version:
        case Mc_command::stats:
        case Mc_command::verbosity:
        case Mc_command::mn:
          data = false;
          break;
        case Mc_command::get:
        case Mc_command::gets:
        case Mc_command::mg:
        case Mc_command::me:
        case Mc_command::metadump:
          break;
        default:  // stores, deletes, arithmetic, touches (gat/gats too), flush_all, ms/md/ma
          write = true;
      }
      if (data) {
        Store_status ch = auth_.charge_request(write);
        if (!ch.ok()) return server_error(ch, out, rq.noreply);
      }
    }
  }
  switch (rq.command) {
    case Mc_command::get:
    case Mc_command::gets:
    case Mc_command::gat:
    case Mc_command::gats:
      counters_.count_request(counters_.requests_find, retrying_ || get_resume_ != 0);  // a next part: counted
      return exec_get(rq, out);
    case Mc_command::set:
    case Mc_command::add:
    case Mc_command::replace:
    case Mc_command::append:
    case Mc_command::prepend:
    case Mc_command::cas:
      counters_.count_request(counters_.requests_insert, retrying_);
      if (!retrying_) counters_.add(counters_.mc_cmd_set);
      return exec_store(rq, out);
    case Mc_command::del:
    case Mc_command::incr:
    case Mc_command::decr:
    case Mc_command::touch:
      counters_.count_request(counters_.requests_modify, retrying_);
      return exec_simple_write(rq, out);
    case Mc_command::flush_all:
      counters_.count_request(counters_.requests_modify, retrying_);
      return exec_flush(rq, out);
    case Mc_command::version:
      counters_.count_request(counters_.requests_other, retrying_);
      mc::encode_version(out, "1.6.18");
      return Exec::done;
    case Mc_command::stats:
      counters_.count_request(counters_.requests_other, retrying_);
      return exec_stats(rq, out);
    case Mc_command::metadump:
      counters_.count_request(counters_.requests_find, retrying_ || dumping_);  // a next part: counted
      return exec_metadump(rq, out);
    case Mc_command::verbosity:
      counters_.count_request(counters_.requests_other, retrying_);
      if (!rq.noreply) mc::encode_reply(out, Mc_reply::ok);
      return Exec::done;
    case Mc_command::quit:
      return Exec::close;
    case Mc_command::mg: counters_.count_request(counters_.requests_find, retrying_); return exec_mg(rq, out);
    case Mc_command::ms:
      counters_.count_request(counters_.requests_insert, retrying_);
      if (!retrying_) counters_.add(counters_.mc_cmd_set);
      return exec_ms(rq, out);
    case Mc_command::md: counters_.count_request(counters_.requests_modify, retrying_); return exec_md(rq, out);
    case Mc_command::ma: counters_.count_request(counters_.requests_modify, retrying_); return exec_ma(rq, out);
    case Mc_command::mn:
      counters_.count_request(counters_.requests_other, retrying_);
      mc::encode_meta(out, Mc_meta_code::mn, rq, nullptr);
      return Exec::done;
    case Mc_command::me: counters_.count_request(counters_.requests_find, retrying_); return exec_me(rq, out);
  }
  mc::encode_reply(out, Mc_reply::error);
  return Exec::done;
}

Mc_session::Exec Mc_session::exec_get(const Mc_request &rq, Byte_buffer &out) {
  Exec e = exec_get_part(rq, out);
  if (e != Exec::more && e != Exec::park) get_resume_ = 0;  // answered whole (or given up)
  return e;
}

/* A get's keys from get_resume_ on. A plain get/gets whose values pass output_high_water is
   answered in parts, as memcached streams a large multiget: the values found so far are written
   and the request runs again from the next key once the client has read them (other connections
   are served meanwhile), so a multiget's reply is bounded by the client's reading, not by
   tablesocket_max_output_buffer; a lock wait re-runs only the part not yet written. gat/gats
   touch and answer all their keys at once (their repeated keys are answered once when the touch
   ends the item, which parts could not see), within tablesocket_max_output_buffer. */
Mc_session::Exec Mc_session::exec_get_part(const Mc_request &rq, Byte_buffer &out) {
  const bool with_cas = rq.command == Mc_command::gets || rq.command == Mc_command::gats;
  const bool touch = rq.command == Mc_command::gat || rq.command == Mc_command::gats;
  if (answers_discarded && !touch &&
      std::none_of(rq.keys.begin(), rq.keys.end(), [](std::string_view k) { return selects_container(k); }))
    return Exec::done;  // nobody to answer (a "get @@name" still switches the container)
  /* Everything is looked up before anything is written to out, so that a lock wait can park and
     re-run the whole request. */
  clear_items();
  std::vector<Open_container *> &owner = owners_;  // the container of each item (gat/gats touch it there)
  owner.clear();
  size_t gathered = 0;                   // reply bytes so far
  uint64_t asked = 0, found = 0;         // for stats: keys asked for and found (a range: its rows)
  size_t next = rq.keys.size();          // the first key not answered in this part
  const size_t start = get_resume_ < rq.keys.size() ? get_resume_ : 0;
  /* A part ends once its values pass this (the client reads them before the next key is looked
     up), well below the most a connection may hold unsent. */
  const size_t part_limit = std::min<size_t>(cfg_.output_high_water, cfg_.max_output_buffer / 2);
  for (size_t ki = start; ki < rq.keys.size(); ++ki) {
    if (!touch && ki > start && gathered + out.size() >= part_limit) {
      next = ki;
      break;
    }
    std::string_view key = rq.keys[ki];
    std::string_view row_key;
    Store_status st;
    Open_container *oc = resolve(key, &row_key, &st);
    if (!oc) {
      if (selects_container(key) && !waits_for_lock(st)) container_switch_failed(key);
      return server_error(st, out, false);
    }
    const size_t first = items_.size();
    if (selects_container(key)) {
      Item &it = items_.emplace_back();
      it.key.assign(key);
      it.value = use_container(key, *oc);
      owner.push_back(nullptr);
      continue;
    }
    /* MySQL's range syntax; any other key starting with '@' is a key like any other (set and mg
       store and find it too). */
    const bool is_range = row_key.size() >= 2 && row_key[0] == '@' && (row_key[1] == '<' || row_key[1] == '>');
    if (is_range) {
      st = range(*oc, row_key, items_);
      if (st.errc == Store_errc::bad_value) {
        mc::encode_client_error(out, "bad range in key");
        return Exec::done;
      }
    } else {
      st = lookup(*oc, &row_key, 1, items_, !touch, touch);
      /* memcached echoes the key as asked (a row's key may differ: another case, a container name) */
      if (items_.size() > first && items_.back().key != key) items_.back().reply_key.assign(key);
    }
    if (!st.ok()) return server_error(st, out, false);
    size_t key_bytes = 0;
    for (size_t n = first; n < items_.size(); ++n) key_bytes += reply_bytes(items_[n]);
    if (gathered + key_bytes > cfg_.max_output_buffer) {
      if (!touch && ki > start) {
        /* This key's values start the next part, alone if need be. */
        items_.resize(first);
        next = ki;
        break;
      }
      /* Items are gathered before the reply (a lock wait may re-run the request): bounded. One
         key's values (a range's rows, or an item stored before the limits were lowered), or a
         gat/gats's items (answered whole), over the limit: the connection would be closed
         holding them, so the request fails instead, as mg and binary gets do. */
      clear_items();
      counters_.add(counters_.errors);
      mc::encode_server_error(out, "reply too large (tablesocket_max_output_buffer)");
      return Exec::done;
    }
    gathered += key_bytes;
    asked += is_range ? items_.size() - first : 1;
    found += items_.size() - first;
    owner.resize(items_.size(), oc);
  }
  if (touch) {
    const int64_t expiry = absolute_expiry(rq.exptime);
    if (!retrying_) gat_touched_.clear();
    for (size_t i = 0; i < items_.size(); ++i) {
      if (!owner[i]) continue;
      std::string id(reinterpret_cast<const char *>(&owner[i]), sizeof owner[i]);
      id += items_[i].key;
      if (gat_touched_.count(id)) continue;  // touched before this request waited for a lock
      Store_status st = touch_row(*owner[i], items_[i].key, expiry);
      if (!st.ok()) return server_error(st, out, false);
      gat_touched_.insert(std::move(id));
    }
    gat_touched_.clear();
    /* A touch that ends the item (an exptime already past): memcached, taking the keys one after
       the other, returns it for the first of repeated keys only; the later ones miss. */
    if (expiry != 0 && expiry <= int64_t(time(nullptr))) {
      std::unordered_set<std::string> seen;
      size_t kept = 0;
      for (size_t i = 0; i < items_.size(); ++i) {
        if (owner[i]) {
          std::string id(reinterpret_cast<const char *>(&owner[i]), sizeof owner[i]);
          id += items_[i].key;
          if (!seen.insert(std::move(id)).second) continue;
        }
        if (kept != i) {
          std::swap(items_[kept], items_[i]);  // the dropped one's buffers stay for reuse
          owner[kept] = owner[i];
        }
        ++kept;
      }
      found -= items_.size() - kept;
      items_.resize(kept);
      owner.resize(kept);
    }
  }
  for (auto &it : items_)
    mc::encode_value(out, it.reply_key.empty() ? it.key : it.reply_key, it.flags, it.value, with_cas,
                     with_cas ? cas_of(it) : 0);
  counters_.add(counters_.rows_read, items_.size());
  count_reads(touch, asked, found);
  if (next < rq.keys.size()) {
    get_resume_ = next;
    return Exec::more;
  }
  mc::encode_reply(out, Mc_reply::end);
  return Exec::done;
}

Kv_request Mc_session::storage_request(const Mc_request &rq, std::string_view row_key) const {
  Kv_request kr;
  switch (rq.store_op) {
    case mc::Mc_store_op::set: kr.op = Kv_op::set; break;
    case mc::Mc_store_op::add: kr.op = Kv_op::add; break;
    case mc::Mc_store_op::replace: kr.op = Kv_op::replace; break;
    case mc::Mc_store_op::append: kr.op = Kv_op::append; break;
    case mc::Mc_store_op::prepend: kr.op = Kv_op::prepend; break;
    case mc::Mc_store_op::cas: kr.op = Kv_op::cas; break;
  }
  kr.key = Datum{row_key.data() ? row_key.data() : "", row_key.size()};
  kr.value = Datum{rq.data.data() ? rq.data.data() : "", rq.data.size()};
  kr.flags = rq.client_flags;
  kr.expiry = absolute_expiry(rq.exptime);
  kr.cas = rq.cas_unique;
  /* ms MA/MP with C<cas>: the append happens only if the item still has that CAS. */
  if (kr.op == Kv_op::append || kr.op == Kv_op::prepend) kr.expect_cas = rq.cas_unique;
  return kr;
}

Mc_session::Exec Mc_session::exec_store(const Mc_request &rq, Byte_buffer &out) {
  std::string_view row_key;
  Store_status st;
  Open_container *oc = resolve(rq.key(), &row_key, &st);
  if (!oc) return server_error(st, out, rq.noreply);
  if (row_key.empty()) {  // "@@name" without ".key"
    if (!rq.noreply) mc::encode_client_error(out, "bad command line format");
    return Exec::done;
  }
  Kv_request kr = storage_request(rq, row_key);
  Kv_result res;
  st = write(*oc, kr, &res);
  if (!st.ok()) return server_error(st, out, rq.noreply);
  if (rq.noreply) return Exec::done;
  switch (res.outcome) {
    case Kv_outcome::stored: mc::encode_reply(out, Mc_reply::stored); break;
    case Kv_outcome::not_stored: mc::encode_reply(out, Mc_reply::not_stored); break;
    case Kv_outcome::exists: mc::encode_reply(out, Mc_reply::exists); break;
    case Kv_outcome::too_large:  // as memcached 1.6
      mc::encode_reply(out, Mc_reply::not_stored);
      break;
    default: mc::encode_reply(out, Mc_reply::not_found); break;
  }
  return Exec::done;
}

Mc_session::Exec Mc_session::exec_simple_write(const Mc_request &rq, Byte_buffer &out) {
  std::string_view row_key;
  Store_status st;
  Open_container *oc = resolve(rq.key(), &row_key, &st);
  if (!oc) return server_error(st, out, rq.noreply);
  Kv_request kr;
  kr.key = Datum{row_key.data() ? row_key.data() : "", row_key.size()};
  switch (rq.command) {
    case Mc_command::del: kr.op = Kv_op::remove; break;
    case Mc_command::incr: kr.op = Kv_op::incr; kr.delta = rq.delta; break;
    case Mc_command::decr: kr.op = Kv_op::decr; kr.delta = rq.delta; break;
    default: kr.op = Kv_op::touch; kr.expiry = absolute_expiry(rq.exptime); break;
  }
  Kv_result res;
  st = write(*oc, kr, &res);
  if (!st.ok()) return server_error(st, out, rq.noreply);
  if (rq.noreply) return Exec::done;
  switch (res.outcome) {
    case Kv_outcome::deleted: mc::encode_reply(out, Mc_reply::deleted); break;
    case Kv_outcome::touched: mc::encode_reply(out, Mc_reply::touched); break;
    case Kv_outcome::number: mc::encode_number(out, res.number); break;
    case Kv_outcome::not_numeric: mc::encode_client_error(out, "cannot increment or decrement non-numeric value"); break;
    default: mc::encode_reply(out, Mc_reply::not_found); break;
  }
  return Exec::done;
}

Mc_session::Exec Mc_session::exec_flush(const Mc_request &rq, Byte_buffer &out) {
  bool needs_expiry = false;
  Store_status st = flush_container(rq.has_delay && rq.delay > 0 ? absolute_expiry(rq.delay) : 0, &needs_expiry);
  if (needs_expiry) {
    if (!rq.noreply) mc::encode_client_error(out, "flush_all with a delay needs an expiry column");
    return Exec::done;
  }
  if (!st.ok()) return server_error(st, out, rq.noreply);
  if (!rq.noreply) mc::encode_reply(out, Mc_reply::ok);
  return Exec::done;
}

Store_status Mc_session::flush_container(int64_t expire_at, bool *needs_expiry) {
  /* No time: deletes every row of the connection's container table (one transaction, logged and
     replicated as row deletions). A time: every row expires then instead (needs an expiry
     column). */
  *needs_expiry = false;
  std::string_view row_key;
  Store_status st;
  Open_container *oc = resolve(std::string_view(), &row_key, &st);
  if (!oc) return st;
  Datum from{"", 0};
  Find_request fr;
  fr.counts_rows = false;
  fr.op = Find_op::ge;
  fr.keys = &from;
  fr.nkeys = 1;
  fr.limit = UINT32_MAX;
  uint64_t n = 0;
  Discard_rows sink;
  if (expire_at > 0) {
    const Kv_layout &l = oc->def.layout;
    if (l.expiry < 0) {
      *needs_expiry = true;
      return {};
    }
    /* An index whose only column is the expiry column, so U changes just that. */
    Open_index exp_idx;
    Index_spec spec;
    spec.db = oc->def.db;
    spec.table = oc->def.table;
    spec.index = oc->def.index;
    spec.columns = oc->def.expiry_column;
    spec.filter_columns = oc->def.expiry_column;
    spec.for_write = true;
    spec.principal = principal_;
    st = store_.open_index(spec, exp_idx);
    if (!st.ok()) return st;
    /* Rows that never expire, or would expire later than the flush, expire at the flush; rows
       due sooner (or already expired) keep their earlier expiry. */
    std::string when = std::to_string(expire_at);
    Modify_request mr;
    mr.op = Modify_op::update;
    Datum v{when.data(), when.size()};
    mr.values = &v;
    mr.nvalues = 1;
    Filter f;
    f.type = Filter_type::skip;
    f.column = 0;
    fr.filters = &f;
    fr.nfilters = 1;
    f.op = Compare_op::eq;
    f.value = Datum{"0", 1};
    st = store_.modify(exp_idx, fr, mr, sink, &n);
    if (st.ok()) {
      f.op = Compare_op::gt;
      f.value = v;
      st = store_.modify(exp_idx, fr, mr, sink, &n);
    }
  } else {
    Modify_request mr;
    mr.op = Modify_op::remove;
    st = store_.modify(oc->idx, fr, mr, sink, &n);
  }
  if (st.ok()) {
    wrote_in_batch = true;
    counters_.add(counters_.mc_cmd_flush);
    Flush_deadlines::instance().set(oc->def, expire_at);
  }
  return st;
}

Table_size Mc_session::container_tables_size() {
  Table_size sum;
  Store_status st = containers_.refresh(store_, cfg_.mc_config_schema, coarse_monotonic_ms());
  if (!containers_.loaded()) return sum;
  std::vector<std::pair<std::string_view, std::string_view>> seen;
  for (const Mc_container &c : containers_.list()) {
    const std::pair<std::string_view, std::string_view> table{c.db, c.table};
    if (std::find(seen.begin(), seen.end(), table) != seen.end()) continue;
    if (seen.size() == kMaxSizedTables) break;
    seen.push_back(table);
    /* A table that is missing, being altered or not readable by this account is left out: stats
       answers at once, and tells nothing about tables the client may not read. */
    Open_container *oc = open_container(c, &st);
    Table_size ts;
    if (!oc || !store_.table_size(oc->idx, &ts).ok()) continue;
    sum.rows += ts.rows;
    sum.bytes += ts.bytes;
  }
  return sum;
}

Mc_session::Stats_kind Mc_session::collect_stats(std::string_view arg, std::vector<Stat> *stats) {
  auto add = [&](const char *name, std::string value) { stats->push_back(Stat{name, std::move(value)}); };
  Counters sum;
  if (arg.empty() || arg == "reset") {
    /* Server-wide figures (every worker, both protocols' connections), as memcached's are
       process-wide. */
    if (all_counters_)
      all_counters_->sum_counters(sum);
    else
      add_counters(sum, counters_);
  }
  if (arg == "reset") {
    Mc_stats_zero::instance().reset(sum);
    return Stats_kind::reset;
  }
  if (arg.empty()) {
    const int64_t live = sum.connections.load();
    const time_t now = time(nullptr);
    add("pid", std::to_string(getpid()));
    add("uptime", std::to_string(now > g_loaded_at ? now - g_loaded_at : 0));
    add("time", std::to_string(now));
    add("version", "1.6.18");
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);  // the whole server process (mariadbd), as memcached's is its own
    add("rusage_user", timeval_text(ru.ru_utime));
    add("rusage_system", timeval_text(ru.ru_stime));
    add("pointer_size", std::to_string(8 * sizeof(void *)));
    add("threads", std::to_string(cfg_.threads));
    add("curr_connections", std::to_string(live > 0 ? live : 0));
    add("max_connections", std::to_string(cfg_.max_connections));
    add("accepting_conns", live < int64_t(cfg_.max_connections) ? "1" : "0");
    for (size_t i = 0; i < kNumMcFigures; ++i)
      add(kMcFigures[i].name, std::to_string(Mc_stats_zero::instance().since_reset(sum, i)));
    const Table_size size = container_tables_size();
    add("curr_items", std::to_string(size.rows));
    add("bytes", std::to_string(size.bytes));
    add("evictions", "0");  // rows stay until deleted or flushed: nothing is ever evicted
    add("engine", "tablesocket");  // one token: stats parsers split lines on spaces
    return Stats_kind::listed;
  }
  if (arg == "settings") {
    add("item_size_max", std::to_string(cfg_.mc_max_value_size));
    add("maxconns", std::to_string(cfg_.max_connections));
    return Stats_kind::listed;
  }
  /* Per-prefix statistics are not kept: turning them on or off is accepted (as memcached's "OK")
     and their dump is empty. */
  if (arg == "detail on" || arg == "detail off") return Stats_kind::done;
  if (arg == "detail dump") return Stats_kind::listed;
  /* Nothing to list: rows live in tables, not slabs ("cachedump" lists no keys, as an empty slab). */
  if (arg == "sizes") {  // memcached's answer while its size histogram is off (its default)
    add("sizes_status", "disabled");
    return Stats_kind::listed;
  }
  if (arg == "items" || arg == "slabs" || arg == "conns" || arg == "detail" || arg == "cachedump")
    return Stats_kind::listed;
  return Stats_kind::unknown;
}

Mc_session::Exec Mc_session::exec_stats(const Mc_request &rq, Byte_buffer &out) {
  std::vector<Stat> stats;
  std::string_view arg = rq.nstats_args ? rq.stats_args[0] : std::string_view();
  std::string two;  // "detail on": the binary protocol's key holds it as one string
  if (rq.nstats_args == 2 && arg == "detail") {
    two.append(arg).append(1, ' ').append(rq.stats_args[1]);
    arg = two;
  }
  if (arg == "reset" && principal_) {  // as FLUSH STATUS: RELOAD (memcached lets anyone)
    Store_status st = store_.check_reload_privilege(*principal_);
    if (!st.ok()) return server_error(st, out, false);
  }
  switch (collect_stats(arg, &stats)) {
    case Stats_kind::listed:
      for (const Stat &st : stats) mc::encode_stat(out, st.name, st.value);
      mc::encode_reply(out, Mc_reply::end);
      break;
    case Stats_kind::reset: mc::encode_reply(out, Mc_reply::reset); break;
    case Stats_kind::done: mc::encode_reply(out, Mc_reply::ok); break;
    case Stats_kind::unknown: mc::encode_reply(out, Mc_reply::error); break;
  }
  return Exec::done;
}

/* memcached's key encoding in a metadump line: every byte but [A-Za-z0-9-._~] as %XX. */
static void append_uri_encoded(Byte_buffer &o, std::string_view key) {
  static const char kHex[] = "0123456789ABCDEF";
  for (unsigned char c : key) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
        c == '_' || c == '~') {
      o.push_back(char(c));
    } else {
      o.push_back('%');
      o.push_back(kHex[c >> 4]);
      o.push_back(kHex[c & 15]);
    }
  }
}

/* "lru_crawler metadump": one line per unexpired row of the connection's container, in the key's
   index order, then END, as memcached's (LF-terminated lines, the END with CRLF):
     key=<uri-encoded key> exp=<unix time, -1 never> la=<now> cas=<cas> fetch=no cls=1 size=<n>
   Tables keep no access time nor fetched bit: la is the time of the dump and fetch is no; size is
   what memcached's item of that key and value takes. The dump reads the table in pages (each its
   own read, no lock held between them) and is written in parts as the client reads, like a large
   multiget: a table of any size streams with bounded memory, and rows written meanwhile may or
   may not be listed, as with memcached's crawler. */
Mc_session::Exec Mc_session::exec_metadump(const Mc_request &rq, Byte_buffer &out) {
  auto finish = [&](Exec e) {
    dumping_ = false;
    dump_at_ = Index_cursor();
    return e;
  };
  if (answers_discarded) return finish(Exec::done);  // nobody to answer
  if (!rq.dump_class_1) {  // every item is in class 1
    mc::encode_reply(out, Mc_reply::end);
    return finish(Exec::done);
  }
  std::string_view row_key;
  Store_status st;
  Open_container *oc = resolve(std::string_view(), &row_key, &st);
  if (!oc) {
    finish(Exec::done);
    return server_error(st, out, false);
  }
  if (!dumping_) {
    dumping_ = true;
    dump_at_ = Index_cursor();  // from the index's first row
    dump_rows_ = 16;
  }
  const Kv_layout &l = oc->def.layout;
  const size_t nc = row_cells(l);
  const size_t part_limit = std::min<size_t>(cfg_.output_high_water, cfg_.max_output_buffer / 2);
  constexpr size_t kPageBytes = 1 << 20, kMaxPageRows = 256;  // bounds what a page captures
  const uint64_t now = uint64_t(time(nullptr));
  for (;;) {
    Datum start;
    Find_request fr;
    fr.counts_rows = false;
    dump_at_.aim(fr, start);
    fr.limit = uint32_t(dump_rows_);
    capture_.clear();
    st = store_.find(oc->idx, fr, capture_);
    if (!st.ok()) {
      /* A lock wait parks the request and goes on from the same row; a failure ends the dump
         with the error in place of END. */
      if (!waits_for_lock(st)) finish(Exec::done);
      return server_error(st, out, false);
    }
    const size_t rows = capture_.ncells() / nc;
    clear_items();
    decode_items(l, capture_, items_);
    for (Item &it : items_) {
      out.append("key=");
      append_uri_encoded(out, it.key);
      out.append(" exp=");
      if (it.expiry > 0)
        out.append_uint(uint64_t(it.expiry));
      else
        out.append("-1");
      out.append(" la=");
      out.append_uint(now);
      out.append(" cas=");
      out.append_uint(cas_of(it));
      /* memcached's ITEM_ntotal: the 48-byte header, key and NUL, value and CRLF, cas, flags. */
      out.append(" fetch=no cls=1 size=");
      out.append_uint(48 + it.key.size() + 1 + it.value.size() + 2 + 8 + (it.flags ? 4 : 0));
      out.push_back('\n');
    }
    if (rows < fr.limit || rows == 0) break;  // the table has no more rows
    dump_at_.move_past(capture_, (rows - 1) * nc);
    /* The next page: about kPageBytes of rows of this page's size. */
    const size_t per_row = std::max<size_t>(capture_.size_bytes() / rows, 1);
    dump_rows_ = std::clamp<size_t>(kPageBytes / per_row, 1, kMaxPageRows);
    if (out.size() >= part_limit || store_.turn_spent()) return Exec::more;  // the rest once the client has read
  }
  mc::encode_reply(out, Mc_reply::end);
  return finish(Exec::done);
}

/* ---- meta commands ---- */

Mc_session::Exec Mc_session::exec_mg(const Mc_request &rq, Byte_buffer &out) {
  if (answers_discarded && !rq.meta.has_ttl && !rq.meta.vivify) return Exec::done;  // nobody to answer
  std::string_view row_key;
  Store_status st;
  Open_container *oc = resolve(rq.key(), &row_key, &st);
  if (!oc) return server_error(st, out, false);
  clear_items();
  st = lookup(*oc, &row_key, 1, items_, !rq.meta.has_ttl);
  if (!st.ok()) return server_error(st, out, false);
  bool won = false, vivified = false;
  if (items_.empty() && rq.meta.vivify) {
    /* N<ttl>: the miss creates an empty item; this client wins the right to fill it (W), the
       ones that come before it is filled see it with Z. Its TTL: N's, or T's after it. */
    const int64_t expiry = walk_meta_ttl(rq, false, 0, true).expiry;
    Kv_result ar;
    st = add_row(*oc, row_key, "", expiry, &ar);
    if (!st.ok()) return server_error(st, out, false);
    if (ar.outcome == Kv_outcome::stored) {
      Recache_tokens::instance().put(row_key, token_key(oc->def, row_key), ar.cas, {false, true});
      Item &v = items_.emplace_back();
      v.key.assign(row_key.data() ? row_key.data() : "", row_key.size());
      v.expiry = expiry;
      v.cas = ar.cas;
      won = vivified = true;
    } else {
      st = lookup(*oc, &row_key, 1, items_);  // another client created it meanwhile
      if (!st.ok()) return server_error(st, out, false);
    }
  }
  /* memcached counts an mg with T that found its item as a touch, one that did not as a get miss;
     an item N created is a hit */
  const uint64_t found_one = items_.size();
  if (items_.empty()) {
    count_reads(false, 1, 0);
    if (!rq.noreply) mc::encode_meta(out, Mc_meta_code::en, rq, nullptr);
    return Exec::done;
  }
  Item &it = items_[0];
  /* The touch first: it may wait for a row lock (the request runs again), so nothing is counted
     or handed out before it. The recache check below sees the expiry the item had. */
  const int64_t expiry_before = it.expiry;
  const Meta_ttl ttl = walk_meta_ttl(rq, !vivified, vivified ? 0 : it.expiry, vivified);
  if (rq.meta.has_ttl && !vivified) {  // an item N created has its TTL already
    st = touch_row(*oc, it.key, ttl.expiry);
    if (!st.ok()) return server_error(st, out, false);
    it.expiry = ttl.expiry;
  }
  count_reads(rq.meta.has_ttl && found_one, 1, found_one);
  bool stale = false, token_sent = false;
  if (!vivified && (rq.meta.vivify || rq.meta.has_recache || !Recache_tokens::instance().empty(row_key))) {
    const std::string tk = token_key(oc->def, row_key);
    Recache_tokens::State s = Recache_tokens::instance().get(row_key, tk, cas_of(it));
    stale = s.stale;
    /* memcached applies mg's flags in the order sent: a T before R sets the TTL that R looks at. */
    const int64_t expiry = ttl_before_recache(rq) ? absolute_expiry(rq.meta.ttl) : expiry_before;
    const int64_t left = expiry > 0 ? expiry - int64_t(time(nullptr)) : -1;
    /* R's token is read as an exptime: over 30 days it is a unix time (one past gives no win). */
    const int64_t threshold = rq.meta.recache_ttl > kRelativeExptimeMax ? rq.meta.recache_ttl - int64_t(time(nullptr))
                                                                         : rq.meta.recache_ttl;
    const bool recache = rq.meta.has_recache && left >= 0 && left < threshold;
    if (s.token_sent) {
      token_sent = true;
    } else if (s.stale || recache) {
      won = true;
      s.token_sent = true;
      Recache_tokens::instance().put(row_key, tk, cas_of(it), s);
    }
  }
  if (rq.meta.return_value && !fits_output(it)) {
    counters_.add(counters_.errors);
    mc::encode_server_error(out, "reply too large (tablesocket_max_output_buffer)");
    return Exec::done;
  }
  mc::Mc_item_info info;
  info.cas = rq.meta.has('c') ? cas_of(it) : 0;
  info.client_flags = it.flags;
  info.size = uint32_t(it.value.size());
  info.ttl = ttl.reported;
  info.key_binary = rq.meta.base64_key;
  info.won = won;
  info.stale = stale;
  info.token_sent = token_sent;
  if (rq.meta.return_value)
    mc::encode_meta_value(out, rq, &info, it.value);
  else
    mc::encode_meta(out, Mc_meta_code::hd, rq, &info);
  counters_.add(counters_.rows_read);
  return Exec::done;
}

Mc_session::Exec Mc_session::exec_ms(const Mc_request &rq, Byte_buffer &out) {
  std::string_view row_key;
  Store_status st;
  Open_container *oc = resolve(rq.key(), &row_key, &st);
  if (!oc) return server_error(st, out, false);
  if (row_key.empty()) {
    mc::encode_client_error(out, "bad command line format");
    return Exec::done;
  }
  Kv_request kr = storage_request(rq, row_key);
  Kv_result res;
  /* I with a CAS: counted once it is known whether the value was stored (a cas hit, as memcached
     counts it) or not. */
  const bool cas_may_invalidate = rq.meta.invalidate && kr.op == Kv_op::cas;
  st = write(*oc, kr, &res, !cas_may_invalidate);
  if (!st.ok()) return server_error(st, out, false);
  if (res.outcome == Kv_outcome::exists && cas_may_invalidate) {
    /* I with a CAS older than the item's: the value is stored all the same, and the item is
       marked stale (the next mg sees X, and one client W). */
    clear_items();
    st = lookup(*oc, &row_key, 1, items_);
    if (!st.ok()) return server_error(st, out, false);
    /* C0 is no CAS to be older: EX, as memcached answers. */
    if (!items_.empty() && rq.meta.compare_cas != 0 && rq.meta.compare_cas < cas_of(items_[0])) {
      /* As memcached: the new value keeps the item's TTL (T is ignored), and a win token already
         handed out for the item stays handed out (the others keep seeing Z). */
      const std::string tk = token_key(oc->def, row_key);
      const bool token_sent = Recache_tokens::instance().get(row_key, tk, cas_of(items_[0])).token_sent;
      kr.op = Kv_op::replace;
      kr.set_expiry = false;
      st = write(*oc, kr, &res);
      if (!st.ok()) return server_error(st, out, false);
      if (res.outcome == Kv_outcome::stored) Recache_tokens::instance().put(row_key, tk, res.cas, {true, token_sent});
    }
  }
  if (cas_may_invalidate) count_outcome(Kv_op::cas, res.outcome);
  mc::Mc_item_info info;
  info.cas = res.cas;
  Mc_meta_code code;
  switch (res.outcome) {
    case Kv_outcome::stored: code = Mc_meta_code::hd; break;
    case Kv_outcome::exists: code = Mc_meta_code::ex; break;
    case Kv_outcome::not_found: code = Mc_meta_code::nf; break;
    default: code = Mc_meta_code::ns; break;
  }
  if (code == Mc_meta_code::hd && rq.noreply) return Exec::done;
  mc::encode_meta(out, code, rq, code == Mc_meta_code::hd ? &info : nullptr);
  return Exec::done;
}

Mc_session::Exec Mc_session::exec_md(const Mc_request &rq, Byte_buffer &out) {
  std::string_view row_key;
  Store_status st;
  Open_container *oc = resolve(rq.key(), &row_key, &st);
  if (!oc) return server_error(st, out, false);
  if (rq.meta.has_compare_cas) {
    clear_items();
    st = lookup(*oc, &row_key, 1, items_);
    if (!st.ok()) return server_error(st, out, false);
    /* Neither deletes: a delete miss, as memcached counts them. */
    if (items_.empty() || cas_of(items_[0]) != rq.meta.compare_cas) {
      counters_.add(counters_.mc_delete_misses);
      mc::encode_meta(out, items_.empty() ? Mc_meta_code::nf : Mc_meta_code::ex, rq, nullptr);
      return Exec::done;
    }
  }
  Kv_request kr;
  kr.op = Kv_op::remove;
  kr.key = Datum{row_key.data() ? row_key.data() : "", row_key.size()};
  Kv_result res;
  if (rq.meta.invalidate) {
    /* I: the item is marked stale instead of deleted, and gets a new CAS as memcached gives it
       (so a CAS taken before no longer matches; a container without a cas column keeps its
       content hash); T<ttl> also sets its TTL. */
    kr.op = Kv_op::invalidate;
    kr.set_expiry = rq.meta.has_ttl;
    if (rq.meta.has_ttl) kr.expiry = absolute_expiry(rq.meta.ttl);
    st = write(*oc, kr, &res);
    if (!st.ok()) return server_error(st, out, false);
    if (res.outcome == Kv_outcome::not_found) {
      mc::encode_meta(out, Mc_meta_code::nf, rq, nullptr);
      return Exec::done;
    }
    Recache_tokens::instance().put(row_key, token_key(oc->def, row_key), res.cas, {true, false});
    if (!rq.noreply) mc::encode_meta(out, Mc_meta_code::hd, rq, nullptr);
    return Exec::done;
  }
  st = write(*oc, kr, &res);
  if (!st.ok()) return server_error(st, out, false);
  if (res.outcome == Kv_outcome::deleted) {
    if (!rq.noreply) mc::encode_meta(out, Mc_meta_code::hd, rq, nullptr);
  } else {
    mc::encode_meta(out, Mc_meta_code::nf, rq, nullptr);
  }
  return Exec::done;
}

Mc_session::Exec Mc_session::exec_ma(const Mc_request &rq, Byte_buffer &out) {
  std::string_view row_key;
  Store_status st;
  Open_container *oc = resolve(rq.key(), &row_key, &st);
  if (!oc) return server_error(st, out, false);
  const bool incr = !(rq.meta.mode == 'D' || rq.meta.mode == 'd' || rq.meta.mode == '-');
  Kv_request kr;
  kr.op = incr ? Kv_op::incr : Kv_op::decr;
  kr.key = Datum{row_key.data() ? row_key.data() : "", row_key.size()};
  kr.delta = rq.meta.delta;
  kr.expect_cas = rq.meta.has_compare_cas ? rq.meta.compare_cas : 0;  // C<cas>: EX unless it matches
  Kv_result res;
  /* A counter this request creates (N) counts as a stored item, not as a miss (as in memcached). */
  st = write(*oc, kr, &res, !rq.meta.vivify);
  if (!st.ok()) return server_error(st, out, false);
  if (rq.meta.vivify && res.outcome != Kv_outcome::not_found) count_outcome(kr.op, res.outcome);
  if (res.outcome == Kv_outcome::exists) {
    mc::encode_meta(out, Mc_meta_code::ex, rq, nullptr);
    return Exec::done;
  }
  bool vivified = false;
  if (res.outcome == Kv_outcome::not_found && rq.meta.vivify) {
    /* N<ttl>: create the counter with J<initial> (default 0). */
    Kv_result ar;
    st = add_row(*oc, row_key, std::to_string(rq.meta.initial), walk_meta_ttl(rq, false, 0, true).expiry, &ar);
    if (!st.ok()) return server_error(st, out, false);
    if (ar.outcome == Kv_outcome::stored) {
      res.outcome = Kv_outcome::number;
      res.number = rq.meta.initial;
      res.cas = ar.cas;
      vivified = true;
    } else {
      st = write(*oc, kr, &res);
      if (!st.ok()) return server_error(st, out, false);
    }
  }
  if (res.outcome == Kv_outcome::not_numeric) {
    mc::encode_client_error(out, "cannot increment or decrement non-numeric value");
    return Exec::done;
  }
  if (res.outcome != Kv_outcome::number) {
    mc::encode_meta(out, Mc_meta_code::nf, rq, nullptr);
    return Exec::done;
  }
  /* t: the TTL as it stands at its place among T and N (an incr does not change it); the item's
     own is read before T changes it. */
  int64_t item_expiry = 0;
  if (rq.meta.has('t') && !vivified && !rq.noreply) {  // (q: a successful change is not answered)
    clear_items();
    st = lookup(*oc, &row_key, 1, items_);
    if (!st.ok()) return server_error(st, out, false);
    if (!items_.empty()) item_expiry = items_[0].expiry;
  }
  const Meta_ttl ttl = walk_meta_ttl(rq, !vivified, item_expiry, vivified);
  if (rq.meta.has_ttl && !vivified) {  // a counter N created has its TTL already
    st = touch_row(*oc, row_key, ttl.expiry);
    if (!st.ok()) return server_error(st, out, false);
  }
  mc::Mc_item_info info;
  info.cas = res.cas;
  std::string v = std::to_string(res.number);
  info.size = uint32_t(v.size());
  if (rq.noreply && !vivified) return Exec::done;  // q: a successful change is silent (memcached 1.6)
  if (rq.meta.has('t')) info.ttl = ttl.reported;
  if (rq.meta.return_value)
    mc::encode_meta_value(out, rq, &info, v);
  else
    mc::encode_meta(out, Mc_meta_code::hd, rq, &info);
  return Exec::done;
}

Mc_session::Exec Mc_session::exec_me(const Mc_request &rq, Byte_buffer &out) {
  std::string_view row_key;
  Store_status st;
  Open_container *oc = resolve(rq.key(), &row_key, &st);
  if (!oc) return server_error(st, out, false);
  clear_items();
  st = lookup(*oc, &row_key, 1, items_);
  if (!st.ok()) return server_error(st, out, false);
  if (items_.empty()) {
    mc::encode_meta(out, Mc_meta_code::en, rq, nullptr);
    return Exec::done;
  }
  mc::Mc_debug_info info;
  /* As memcached 1.6.18 prints it: now minus the expiry (an item with 30 s to live says -30). */
  info.exp = items_[0].expiry > 0 ? int64_t(time(nullptr)) - items_[0].expiry : -1;
  info.cas = cas_of(items_[0]);
  info.total_size = items_[0].value.size();
  mc::encode_meta_debug(out, rq.key(), rq.meta.base64_key, info);
  return Exec::done;
}

}  // namespace tablesocket
