/* The k-way merge behind timelines: the newest (or oldest) N rows over many key prefixes.

   Given an index whose first key part is a group (e.g. message(user_id, id)) and a list of group
   values, each group's boundary row is found with one index dive; a heap keeps one candidate row
   per group, ordered by the index's remaining key parts; popping the best candidate emits it and
   advances only that group (a step of the cursor if it is still positioned there, else one dive
   past the row just emitted). So a request touches about groups + N index entries however many
   rows the groups hold, and paging by an exclusive bound ("older than id X") is stable under
   concurrent inserts, unlike OFFSET. */
#include "store/mariadb_store.h"

#include <algorithm>
#include <cstring>
#include <queue>

namespace tablesocket {
namespace {

/* Captures one row's values so it can be emitted later, after the cursor has moved elsewhere. */
class Captured_row final : public Row_sink {
 public:
  void begin(size_t) override {}
  void value(const char *p, size_t n) override {
    data.push_back(1);
    uint32_t len = uint32_t(n);
    data.append(reinterpret_cast<const char *>(&len), sizeof len);
    data.append(p, n);
  }
  void null() override { data.push_back(0); }
  void end() override {}
  void cancel() override {}
  bool would_overflow() const override { return false; }
  void replay(Row_sink &sink) const {
    size_t pos = 0;
    while (pos < data.size()) {
      if (data[pos++] == 0) { sink.null(); continue; }
      uint32_t len;
      memcpy(&len, data.data() + pos, sizeof len);
      pos += sizeof len;
      sink.value(data.data() + pos, len);
      pos += len;
    }
  }
  std::string data;
};

struct Candidate {
  uint32_t group;                 // index into the group list
  std::vector<uchar> key;         // the row's full key image (with primary key parts if needed)
  std::string ref;                // the row's position (handler::position)
  Captured_row row;
  /* When the key does not identify a row: the last emitted key of this group and the positions of
     the rows already emitted with exactly that key, to step past them after a re-dive. */
  std::vector<uchar> emitted_key;
  std::vector<std::string> emitted_refs;
};

/* One key part's place in a key image, for comparisons in index order (DESC parts reversed). */
struct Part {
  KEY_PART_INFO *info;
  uint offset, length;
  bool reverse;
};

}  // namespace

Store_status Mariadb_store::merge(Open_index &idx, const Find_request &req, Row_sink &sink, uint64_t *count) {
  if (!req.has_in || req.in_column != 0 || req.nkeys < 1) return Store_status::of(Store_errc::bad_merge);
  if (req.nkeys > idx.key_parts_) return Store_status::of(Store_errc::too_many_key_parts);
  Table_slot &s = slots_[idx.slot_];
  TABLE *t = s.table;
  KEY &k = t->key_info[idx.index_no_];
  /* The merge orders rows by their key images: a prefix key part (KEY(c(10))) does not order them. */
  for (uint i = 0; i < k.user_defined_key_parts; ++i)
    if (k.key_part[i].key_part_flag & HA_PART_KEY_SEG) return Store_status::of(Store_errc::bad_merge);
  /* Nor does a partitioned table's index: the partition handler's merge of its partitions loses
     its place when the cursor is moved between groups (rows skipped, rows returned twice, seen
     with InnoDB, MyISAM and Aria). Refused rather than answered wrongly. */
  if (t->part_info) return Store_status::of(Store_errc::bad_merge);
  /* Nor can an index that does not read in order (a hash index). */
  const ulong caps = t->file->index_flags(idx.index_no_, 0, true);
  if ((caps & HA_ONLY_WHOLE_INDEX) || !(caps & HA_READ_ORDER) || !(caps & HA_READ_PREV))
    return Store_status::of(Store_errc::index_unusable);
  Store_status st = prepare_filters(t, idx, req);
  if (!st.ok()) return st;
  const bool desc = req.op == Find_op::merge_desc;
  const bool bounded = req.nkeys > 1;

  /* Key images: the group part alone, the bound (group + following parts), and the full key of a
     row. A non-unique index gets the primary key parts appended (InnoDB stores them in every
     secondary index), so re-positioning past an emitted row never skips its equal-key siblings. */
  const uint group_len = k.key_part[0].store_length;
  uint bound_len = 0;
  for (uint32_t i = 0; i < req.nkeys; ++i) bound_len += k.key_part[i].store_length;
  /* The key must identify a row to re-position exactly past one: a UNIQUE key without nullable
     parts does, and so does InnoDB's extended key (the primary key appended). Otherwise equal-key
     rows already emitted are skipped by their positions. */
  uint full_parts = k.user_defined_key_parts;
  bool exact = (k.flags & HA_NOSAME) && !(k.flags & HA_NULL_PART_KEY);
  if (!exact && k.ext_key_parts > full_parts) {
    full_parts = k.ext_key_parts;
    exact = true;
  }
  uint full_len = 0;
  std::vector<Part> parts;
  for (uint i = 0; i < full_parts; ++i) {
    KEY_PART_INFO *kp = &k.key_part[i];
    parts.push_back(Part{kp, full_len, kp->store_length, (kp->key_part_flag & HA_REVERSE_SORT) != 0});
    full_len += kp->store_length;
  }
  const key_part_map full_kpm = (key_part_map(1) << full_parts) - 1;
  const key_part_map bound_kpm = (key_part_map(1) << req.nkeys) - 1;
  /* Compares two key images in index order over parts [from, to). */
  auto cmp_parts = [&](const uchar *a, const uchar *b, size_t from, size_t to) {
    for (size_t i = from; i < to; ++i) {
      int c = key_tuple_cmp(parts[i].info, a + parts[i].offset, b + parts[i].offset, parts[i].length);
      if (c) return parts[i].reverse ? -c : c;
    }
    return 0;
  };

  handler *h = t->file;
  h->ha_index_or_rnd_end();
  if (int e = h->ha_index_init(idx.index_no_, true)) return Store_status::of(Store_errc::handler_error, e);

  /* Group images, deduplicated as the index compares them (collation-aware): a group listed twice
     contributes its rows once. */
  std::vector<std::vector<uchar>> groups;
  groups.reserve(req.nin_values);
  for (uint32_t g = 0; g < req.nin_values; ++g) {
    uint len;
    build_key(t, k, req, g, &len);
    if (key_names_no_row_) continue;  // a group value the column cannot hold names no rows
    groups.emplace_back(key_buf_.begin(), key_buf_.begin() + bound_len);
  }
  std::sort(groups.begin(), groups.end(), [&](const std::vector<uchar> &a, const std::vector<uchar> &b) {
    return key_tuple_cmp(k.key_part, a.data(), b.data(), group_len) < 0;
  });
  groups.erase(std::unique(groups.begin(), groups.end(),
                           [&](const std::vector<uchar> &a, const std::vector<uchar> &b) {
                             return key_tuple_cmp(k.key_part, a.data(), b.data(), group_len) == 0;
                           }),
               groups.end());

  /* Heap order: the rest of the key first (that is the timeline order), then the group. */
  auto before = [&](const Candidate *a, const Candidate *b) {  // true if a comes after b
    int c = cmp_parts(a->key.data(), b->key.data(), 1, parts.size());
    if (c == 0) c = cmp_parts(a->key.data(), b->key.data(), 0, 1);
    if (c == 0) c = a->ref.compare(b->ref);
    return desc ? c < 0 : c > 0;
  };
  std::priority_queue<Candidate *, std::vector<Candidate *>, decltype(before)> heap(before);
  std::vector<Candidate> cands(groups.size());
  uchar *rec = t->record[0];
  int positioned = -1;  // the group whose row the cursor is on

  /* A row of the run with the key last emitted from the group that was emitted already: walking
     back onto that run stops at the first row not emitted, which a filter may then pass over. */
  auto already_emitted = [&](const Candidate &c) {
    if (exact || c.emitted_refs.empty() || key_cmp(k.key_part, c.emitted_key.data(), full_len) != 0) return false;
    h->position(rec);
    std::string ref(reinterpret_cast<const char *>(h->ref), h->ref_length);
    return std::find(c.emitted_refs.begin(), c.emitted_refs.end(), ref) != c.emitted_refs.end();
  };
  /* Reads the next qualifying row of group g starting from the result r of a positioning call;
     fills cands[g] and pushes it. Returns a handler error, or 0. */
  auto settle = [&](uint32_t g, int r) -> int {
    while (true) {
      if (r == 0 && key_cmp_if_same(t, groups[g].data(), idx.index_no_, group_len)) r = HA_ERR_END_OF_FILE;
      if (r == HA_ERR_END_OF_FILE || r == HA_ERR_KEY_NOT_FOUND) { positioned = -1; return 0; }
      if (r) return r;
      positioned = int(g);
      ++rows_examined_;
      int fr = history_row(t) ? 1 : req.nfilters ? check_filters(t, idx, req) : 0;
      if (fr < 0) return 0;  // W: this group is done
      if (fr == 0 && !already_emitted(cands[g])) break;
      r = desc ? h->ha_index_prev(rec) : h->ha_index_next(rec);
    }
    Candidate &c = cands[g];
    c.group = g;
    c.key.resize(full_len);
    key_copy(c.key.data(), rec, &k, full_len);
    h->position(rec);
    c.ref.assign(reinterpret_cast<const char *>(h->ref), h->ref_length);
    c.row.data.clear();
    emit_row(t, idx, c.row);
    heap.push(&c);
    return 0;
  };

  int err = 0;
  for (uint32_t g = 0; g < groups.size() && !err; ++g) {
    int r;
    /* Never HA_READ_KEY_EXACT: on a unique key it gives it whole, InnoDB keeps no place to walk
       on from (a unique search), and the next ha_index_next() failed its assertion (old_rec) and
       stopped the server. KEY_OR_NEXT lands on the group's first row too; settle() checks that
       the row is the group's. */
    if (bounded)
      r = h->ha_index_read_map(rec, groups[g].data(), bound_kpm, desc ? HA_READ_BEFORE_KEY : HA_READ_AFTER_KEY);
    else
      r = h->ha_index_read_map(rec, groups[g].data(), 1, desc ? HA_READ_PREFIX_LAST : HA_READ_KEY_OR_NEXT);
    err = settle(g, r);
  }
  const uint64_t limit = req.limit ? req.limit : 1;
  uint64_t skip = req.offset, emitted = 0;
  bool overflow = false;
  sink.begin(idx.columns_.size());
  while (!err && !heap.empty() && emitted < limit) {
    Candidate *c = heap.top();
    heap.pop();
    if (skip) {
      --skip;
    } else {
      c->row.replay(sink);
      ++emitted;
      if (sink.would_overflow()) { overflow = true; break; }
    }
    if (emitted >= limit) break;
    if (!exact) {
      if (c->emitted_key != c->key) {
        c->emitted_key = c->key;
        c->emitted_refs.clear();
      }
      c->emitted_refs.push_back(c->ref);
    }
    int r;
    if (positioned == int(c->group)) {
      r = desc ? h->ha_index_prev(rec) : h->ha_index_next(rec);
    } else if (exact) {
      r = h->ha_index_read_map(rec, c->key.data(), full_kpm, desc ? HA_READ_BEFORE_KEY : HA_READ_AFTER_KEY);
    } else {
      /* Back onto the start of the run of rows with the last emitted key (in walking order: engines
         disagree on where KEY_OR_PREV lands among duplicates), then past the ones already emitted.
         Ascending, KEY_OR_NEXT rather than KEY_EXACT (see above: a unique key with a nullable part
         gets here); where that key's rows are gone it lands past them, as the fallback does. */
      r = h->ha_index_read_map(rec, c->key.data(), full_kpm, desc ? HA_READ_PREFIX_LAST : HA_READ_KEY_OR_NEXT);
      if (r == HA_ERR_KEY_NOT_FOUND || r == HA_ERR_END_OF_FILE)  // that row is gone: continue past its key
        r = h->ha_index_read_map(rec, c->key.data(), full_kpm, desc ? HA_READ_BEFORE_KEY : HA_READ_AFTER_KEY);
      while (r == 0 && already_emitted(*c)) r = desc ? h->ha_index_prev(rec) : h->ha_index_next(rec);
    }
    err = settle(c->group, r);
  }
  h->ha_index_or_rnd_end();
  if (overflow) {
    sink.cancel();
    return Store_status::of(Store_errc::result_too_large);
  }
  if (err && err != HA_ERR_RECORD_DELETED) {
    sink.cancel();
    return Store_status::of(Store_errc::handler_error, err);
  }
  sink.end();
  *count = emitted;
  return {};
}

}  // namespace tablesocket
