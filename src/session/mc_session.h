/* One memcached connection: parses text and meta commands, maps keys to container rows through
   the Store, and encodes memcached's exact replies. Knows nothing about sockets. */
#ifndef TABLESOCKET_SESSION_MC_SESSION_H
#define TABLESOCKET_SESSION_MC_SESSION_H

#include <algorithm>
#include <cstdint>
#include <ctime>
#include <string>
#include <unordered_set>
#include <unordered_map>
#include <vector>

#include "common/config.h"
#include "common/stats.h"
#include "proto/mc/mc_binary.h"
#include "proto/mc/mc_protocol.h"
#include "session/captured_rows.h"
#include "session/mc_containers.h"
#include "session/auth.h"
#include "session/session.h"
#include "store/store.h"

namespace tablesocket {

class Mc_session final : public Session {
 public:
  /* counters: this worker's (the session adds to them); all: the whole server's, for "stats"
     (null: this worker's only). */
  Mc_session(Store &store, const Config &cfg, const Peer &peer, Counters &counters,
             const Counters_source *all = nullptr)
      : Session(peer), store_(store), cfg_(cfg), counters_(counters), all_counters_(all),
        auth_(store, cfg, peer, counters) {}
  Session_outcome run(Byte_buffer &in, Byte_buffer &out, unsigned max_requests) override;
  bool parked() const override { return parked_; }
  bool awaiting_login() const override { return !auth_.has_account() && login_required(cfg_); }
  size_t retained_bytes() const override { return container_bytes_; }
  bool mid_request() const override { return swallow_ != 0; }
  void account(std::string *user, std::string *host) const override { auth_.account(user, host); }
  /* With require_auth, memcached clients log in as memcached's -Y mode has them; the anonymous
     account applies to them only while require_auth is off. */
  static bool uses_anonymous_account(const Config &cfg) { return !cfg.require_auth; }
  static bool login_required(const Config &cfg) {
    return Auth_state::login_required(cfg, uses_anonymous_account(cfg));
  }

 private:
  /* more: part of the reply was written (a text get whose values pass output_high_water); the
     request stays in the input and runs again, from where it stopped, once the client has read. */
  enum class Exec : uint8_t { done, park, close, more };
  /* The key of a row in the stale/win table: its table and its key. */
  static std::string token_key(const Mc_container &def, std::string_view row_key) {
    std::string k = def.db;
    k.push_back('.');
    k += def.table;
    k.push_back('\0');
    k.append(row_key.data() ? row_key.data() : "", row_key.size());
    return k;
  }
  void count_gets(uint64_t asked, uint64_t found) {
    counters_.add(counters_.mc_cmd_get, asked);
    counters_.add(counters_.mc_get_hits, found);
    counters_.add(counters_.mc_get_misses, asked - found);
  }
  /* A read that also touches (gat, gats, mg T, binary touch/gat) counts as a touch, as in memcached. */
  void count_touches(uint64_t asked, uint64_t found) {
    counters_.add(counters_.mc_cmd_touch, asked);
    counters_.add(counters_.mc_touch_hits, found);
    counters_.add(counters_.mc_touch_misses, asked - found);
  }
  void count_reads(bool touching, uint64_t asked, uint64_t found) {
    if (touching)
      count_touches(asked, found);
    else
      count_gets(asked, found);
  }
  /* memcached's per-command hit/miss figures of a write (cas_hits, delete_misses, ...). */
  void count_outcome(Kv_op op, Kv_outcome outcome);
  struct Open_container {
    Mc_container def;
    Open_index idx;
  };
  /* A found item: its key, value (joined value columns), flags, cas and expiry. */
  struct Item {
    std::string key, value;  // key: the row's key
    std::string reply_key;   // the key as the client asked for it (e.g. "@@name.key"), if different
    uint32_t flags = 0;
    uint64_t cas = 0;
    int64_t expiry = 0;
  };
  /* The items of the current request. A cleared item keeps its strings' buffers for the next
     request (a get allocates and frees nothing in the steady state); trim() bounds what stays. */
  class Item_list {
   public:
    Item &emplace_back() {
      if (n_ == v_.size()) v_.emplace_back();
      Item &it = v_[n_++];
      it.flags = 0;
      it.cas = 0;
      it.expiry = 0;
      return it;  // its strings are empty: resize() cleared them
    }
    /* Drops the items from n on (never grows). */
    void resize(size_t n) {
      for (size_t i = n; i < n_; ++i) {
        Item &it = v_[i];
        it.key.clear();
        it.reply_key.clear();
        /* One large value read once is not held for the connection's life. */
        if (it.value.capacity() > kMaxKeptValue) std::string().swap(it.value);
        else it.value.clear();
      }
      if (n < n_) n_ = n;
    }
    void clear() { resize(0); }
    /* Between runs: at most `keep` items' buffers stay (a get of thousands of keys made many). */
    void trim(size_t keep) {
      clear();
      if (v_.size() > keep) v_.erase(v_.begin() + std::ptrdiff_t(keep), v_.end());
      if (v_.capacity() > 4 * keep) v_.shrink_to_fit();
    }
    size_t size() const { return n_; }
    bool empty() const { return n_ == 0; }
    Item &operator[](size_t i) { return v_[i]; }
    const Item &operator[](size_t i) const { return v_[i]; }
    Item &back() { return v_[n_ - 1]; }
    Item *begin() { return v_.data(); }
    Item *end() { return v_.data() + n_; }

   private:
    static constexpr size_t kMaxKeptValue = 4096;
    std::vector<Item> v_;  // [0, n_) are the items; the rest are spare
    size_t n_ = 0;
  };

  /* Binary protocol, a request the parser refused: before a required login it gets AUTH_ERROR
     (true: close the connection). */
  bool refused_before_login(const mc::Bin_request &rq, Byte_buffer &out);
  /* The parser's limits for the next request (lower before a required login). */
  mc::Mc_limits request_limits() const;
  Exec execute(const mc::Mc_request &rq, Byte_buffer &out);
  Exec exec_get(const mc::Mc_request &rq, Byte_buffer &out);
  Exec exec_get_part(const mc::Mc_request &rq, Byte_buffer &out);
  /* About the bytes of an item's reply: its value, its key as stored and as asked for, and the
     header (an mg's flags included). */
  static size_t reply_bytes(const Item &it) { return it.value.size() + it.key.size() + it.reply_key.size() + 128; }
  /* One item's reply fits what a connection may hold unsent (tablesocket_max_output_buffer); an
     item stored before the limits were lowered may not: it is refused, not the connection closed. */
  bool fits_output(const Item &it) const { return reply_bytes(it) <= cfg_.max_output_buffer; }
  Exec exec_store(const mc::Mc_request &rq, Byte_buffer &out);
  Exec exec_simple_write(const mc::Mc_request &rq, Byte_buffer &out);
  Exec exec_flush(const mc::Mc_request &rq, Byte_buffer &out);
  Exec exec_stats(const mc::Mc_request &rq, Byte_buffer &out);
  Exec exec_metadump(const mc::Mc_request &rq, Byte_buffer &out);
  Exec exec_mg(const mc::Mc_request &rq, Byte_buffer &out);
  Exec exec_ms(const mc::Mc_request &rq, Byte_buffer &out);
  Exec exec_md(const mc::Mc_request &rq, Byte_buffer &out);
  Exec exec_ma(const mc::Mc_request &rq, Byte_buffer &out);
  Exec exec_me(const mc::Mc_request &rq, Byte_buffer &out);

  /* Resolves a request key: "@@name.key" names the container, anything else uses the current one.
     Returns the open container (nullptr with *st set when none) and the row key in *row_key. */
  Open_container *resolve(std::string_view key, std::string_view *row_key, Store_status *st);
  Open_container *open_container(const Mc_container &c, Store_status *st);
  /* Between requests: gives up the containers that left the configuration (or map another table
     now), and all of them past tablesocket_max_open_indexes; each holds its table open. */
  void prune_containers();
  /* After a login: the containers opened for the previous account are given up. */
  void forget_containers();
  /* "@@name" alone as a get's key: oc (resolved from it) becomes the connection's container; the
     reply's value is what this returns, its table ("db/table"). */
  static bool selects_container(std::string_view key) {
    return names_container(key) && key.find('.') == std::string_view::npos;
  }
  std::string use_container(std::string_view key, const Open_container &oc);
  /* "@@name" alone as a get's key found no usable container: the connection is on it all the same. */
  void container_switch_failed(std::string_view key);
  /* Turns captured rows into items, dropping expired ones; returns how many it dropped. */
  /* known_key: the key of the (one) row, which the capture left out (Find_request's
     omits_first_column). */
  size_t decode_items(const Kv_layout &l, const Captured_rows &rows, Item_list &items,
                      const std::string_view *known_key = nullptr);
  static uint64_t cas_of(Item &it);  // the item's cas; derived from its content if the row has none
  /* The remaining seconds of an item expiring at `expiry`, at least 0, or -1 when it never
     expires (meta's t flag). */
  static int64_t ttl_of_expiry(int64_t expiry) {
    return expiry > 0 ? std::max<int64_t>(expiry - int64_t(time(nullptr)), 0) : -1;
  }
  /* memcached applies a meta command's T and N in the order sent (the later one sets the
     item's TTL) and `t` shows the TTL as it stands at its place among them (-1 before the item
     exists). */
  struct Meta_ttl {
    int64_t expiry = 0;      // what the last T (or N creating the item) gives it: unix time; 0 never
    int64_t reported = -1;   // what t shows
  };
  Meta_ttl walk_meta_ttl(const mc::Mc_request &rq, bool found, int64_t item_expiry, bool creates) const;
  void clear_items() { items_.clear(); }  // keeps the items' buffers for the next request
  /* Looks up keys (all in container oc); appends found, unexpired items in request order. */
  /* counts_expired: an expired row counts in get_expired (not for the touching commands, as in
     memcached); counted on a request's first run only (a parked request runs its lookups again).
     An item found by one key has that key; row_keys: the key as the row holds it (gat/gats tell
     rows apart by it: keys of another case may find the same row). */
  Store_status lookup(Open_container &oc, const std::string_view *keys, size_t n, Item_list &items,
                      bool counts_expired = true, bool row_keys = false);
  Store_status range(Open_container &oc, std::string_view spec, Item_list &items);
  /* Where a walk of a container's index in pages (a range, a dump) goes on: its first row, a
     bound (inclusive or not), or past the last row of the page before, by its key (NULL: past
     every NULL, where a number column would read '' as 0 and skip the negative keys). */
  struct Index_cursor {
    bool from_first = true, inclusive = false, null = false;
    std::string key;
    /* Points fr at the next page's first row; start backs its key while fr is used. */
    void aim(Find_request &fr, Datum &start) const {
      start = null ? Datum{} : Datum{key.data(), key.size()};
      fr.op = from_first || inclusive ? Find_op::ge : Find_op::gt;
      fr.keys = &start;
      fr.nkeys = from_first ? 0 : 1;
    }
    /* The next page starts past the row whose key is cell `cell` of rows. */
    void move_past(const Captured_rows &rows, size_t cell) {
      key.assign(rows.cell(cell));
      null = rows.is_null(cell);
      from_first = inclusive = false;
    }
  };
  /* counted: the outcome counts in memcached's per-command figures (not for an internal write). */
  Store_status write(Open_container &oc, Kv_request &kr, Kv_result *res, bool counted = true);
  /* Sets the expiry of key's row (gat/gats, and T<ttl> of mg, ma, md I). */
  Store_status touch_row(Open_container &oc, std::string_view key, int64_t expiry);
  /* Adds key's row with value and expiry unless it exists (N<ttl> of mg and ma). */
  Store_status add_row(Open_container &oc, std::string_view key, std::string_view value, int64_t expiry,
                       Kv_result *res);
  /* The key/value write a classic storage command or an ms asks for. */
  Kv_request storage_request(const mc::Mc_request &rq, std::string_view row_key) const;
  int64_t absolute_expiry(int32_t exptime) const;
  /* Deletes key after a store of it was refused as too large (memcached unlinks the old item). */
  void drop_refused_item(std::string_view key);
  /* Server-side failure reply ("SERVER_ERROR ..."), or park for a lock wait. */
  Exec server_error(const Store_status &st, Byte_buffer &out, bool noreply);
  /* A lock wait this request may still wait out (it parks and runs again). */
  bool waits_for_lock(const Store_status &st);
  /* The text of a failure's reply (one line: no CR or LF). */
  std::string error_message(const Store_status &st);
  void count_failure(const Store_status &st);
  /* flush_all: deletes every row of the connection's container, or with expire_at > 0 makes them
     expire then (*needs_expiry when the container has no expiry column; nothing done). */
  Store_status flush_container(int64_t expire_at, bool *needs_expiry);
  /* "stats [arg]" for either protocol: the figures listed, "reset", or an unknown argument. */
  struct Stat {
    const char *name;
    std::string value;
  };
  /* listed: the figures, then END; reset / done: "RESET" / "OK" (binary: the end packet only). */
  enum class Stats_kind : uint8_t { listed, reset, done, unknown };
  Stats_kind collect_stats(std::string_view arg, std::vector<Stat> *stats);
  /* stats' curr_items and bytes: the row counts and data sizes of the configured containers'
     tables this connection may read, each table once (at most kMaxSizedTables of them). */
  static constexpr size_t kMaxSizedTables = 256;
  Table_size container_tables_size();

  /* ---- the binary protocol (mc_binary_session.cc) ---- */
  Session_outcome run_binary(Byte_buffer &in, Byte_buffer &out, unsigned max_requests);
  Session_outcome run_text(Byte_buffer &in, Byte_buffer &out, unsigned max_requests);
  Exec exec_bin(const mc::Bin_request &rq, Byte_buffer &out);
  Exec bin_get(const mc::Bin_request &rq, Byte_buffer &out);
  Exec bin_store(const mc::Bin_request &rq, Byte_buffer &out);
  Exec bin_delete(const mc::Bin_request &rq, Byte_buffer &out);
  Exec bin_arith(const mc::Bin_request &rq, Byte_buffer &out);
  Exec bin_flush(const mc::Bin_request &rq, Byte_buffer &out);
  Exec bin_stat(const mc::Bin_request &rq, Byte_buffer &out);
  Exec bin_sasl_auth(const mc::Bin_request &rq, Byte_buffer &out);
  /* A store failure as a binary error response (or park for a lock wait); errors are answered
     even for quiet requests. */
  Exec bin_server_error(const Store_status &st, const mc::Bin_request &rq, Byte_buffer &out);
  /* The container and row key of a binary request's key: nullptr when the reply is written
     (a failure, or a key that names a container only: "Invalid arguments"). */
  Open_container *bin_resolve(const mc::Bin_request &rq, Byte_buffer &out, std::string_view *row_key, Exec *e);
  /* A binary exptime (unsigned: up to 30 days relative, else a unix time) as an absolute time. */
  int64_t absolute_expiry_u32(uint32_t exptime) const;
  /* memcached's ASCII authentication (its -Y mode): the data of the first "set" is
     "<user> <password>". */
  Exec exec_ascii_auth(const mc::Mc_request &rq, Byte_buffer &out);
  void lock_wait_ended() override { store_.end_row_wait(); }

  Store &store_;
  const Config &cfg_;
  Counters &counters_;
  const Counters_source *all_counters_;
  Auth_state auth_;               // before open_: its account outlives the open containers
  Principal *principal_ = nullptr;  // the account requests run as (null: no privilege checks)
  Mc_containers containers_;
  std::unordered_map<std::string, Open_container> open_;
  size_t container_bytes_ = 0;  // memory_bytes() of open_'s indexes together
  uint64_t pruned_gen_ = 0;     // the containers' generation open_ was last checked against
  std::string current_;  // the connection's container ("" = default)
  Open_container *default_oc_ = nullptr;  // current_'s open container, while the list is unchanged
  uint64_t default_gen_ = 0;
  mc::Mc_request rq_, parked_rq_;
  size_t parked_len_ = 0;
  bool parked_ = false;
  bool negotiated_ = false;  // the first bytes were looked at (binary protocol or text)
  bool binary_ = false;      // the connection speaks the binary protocol (its first byte was 0x80)
  mc::Bin_request bin_rq_, parked_bin_;
  uint64_t swallow_ = 0;  // bytes of a refused request's data still to skip
  Item_list items_;
  Captured_rows capture_;                  // rows of the current lookup, reused
  std::vector<Open_container *> owners_;   // exec_get: the container of each item
  /* The items a gat/gats already touched (container and key): a gat that waits for a row lock
     halfway runs again, and does not touch (write and commit) the ones before it again. */
  std::unordered_set<std::string> gat_touched_;
  size_t get_resume_ = 0;  // exec_get: the key a get answered in parts goes on from (0: none pending)
  /* exec_metadump: a dump answered in parts goes on from dump_at_; dump_rows_ sizes its next page. */
  bool dumping_ = false;
  Index_cursor dump_at_;
  size_t dump_rows_ = 0;
  std::string config_error_;  // backs Store_status::message for configuration errors
};

}  // namespace tablesocket
#endif
