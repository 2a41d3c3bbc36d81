/* Key/value writes for the memcached front door. Each is one statement: the row is read with an
   exclusive lock, memcached's rule for the command is applied (expired rows count as absent), and
   the row is inserted, updated or deleted — so concurrent incr/append/cas on one key never lose
   an update, and every change is durable, binlogged and replicated like any other write. */
#include "store/mariadb_store.h"

#include "common/kv_cas.h"
#include "sql_update.h"  // compare_record()

namespace tablesocket {
namespace {

/* A stored value incr/decr can count from, read as memcached reads it (strtoull, then
   safe_strtoull's rule): leading whitespace and a '+' are skipped, the digits must be followed by
   the end or by whitespace (what follows that is ignored: "12 " and " 12" are 12). */
bool parse_counter_value(std::string_view s, uint64_t *out) {
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; };
  size_t i = 0;
  while (i < s.size() && space(s[i])) ++i;
  if (i < s.size() && s[i] == '+') ++i;
  const size_t first = i;
  uint64_t v = 0;
  for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
    const uint64_t d = uint64_t(s[i] - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  /* As memcached's strtoull on the item's data: the number ends at a space or a NUL byte. */
  if (i == first || (i < s.size() && !space(s[i]) && s[i] != '\0')) return false;
  *out = v;
  return true;
}

}  // namespace

std::string Mariadb_store::kv_current_value(TABLE *t, const Open_index &idx, const Kv_layout &layout) {
  std::string v;
  for (uint32_t i = 1; i <= layout.nvalues; ++i) {
    if (i > 1) v += layout.separator;
    Field *f = t->field[idx.columns_[i]];
    if (f->is_null()) continue;
    String buf(val_buf_, sizeof(val_buf_), &my_charset_bin);  // per column, as in emit_row()
    if (String *s = f->val_str(&buf, &buf)) v.append(s->ptr(), s->length());
  }
  return v;
}

Store_status Mariadb_store::kv_set_row(TABLE *t, const Open_index &idx, const Kv_layout &layout,
                                       const Kv_request &req, std::string_view value, bool exists) {
  if (exists) {
    store_record(t, record[1]);
  } else {
    restore_record(t, s->default_values);
  }
  t->reset_default_fields();
  Store_status st;
  if (!exists && !(st = store_value(t->field[idx.columns_[0]], req.key)).ok()) return st;
  /* The value is split over the value columns at the separator; the last column keeps the rest. */
  std::string_view rest = value;
  for (uint32_t i = 1; i <= layout.nvalues; ++i) {
    Datum d;
    if (i < layout.nvalues && !layout.separator.empty()) {
      size_t cut = rest.find(layout.separator);
      std::string_view part = cut == std::string_view::npos ? rest : rest.substr(0, cut);
      d.ptr = part.data();
      d.len = part.size();
      rest = cut == std::string_view::npos ? std::string_view(rest.data() + rest.size(), 0)
                                           : rest.substr(cut + layout.separator.size());
    } else {
      d.ptr = rest.data();
      d.len = rest.size();
    }
    if (!d.ptr) d.ptr = "";
    if (!(st = store_value(t->field[idx.columns_[i]], d)).ok()) return st;
  }
  auto store_number = [&](int col, uint64_t v) -> Store_status {
    Field *f = t->field[idx.columns_[col]];
    f->set_notnull();
    f->store(longlong(v), true);
    f->set_has_explicit_value();
    return take_stmt_error() ? bad_value_status() : Store_status{};
  };
  if (req.set_flags && layout.flags >= 0 && !(st = store_number(layout.flags, req.flags)).ok()) return st;
  if (layout.cas >= 0 && !(st = store_number(layout.cas, req.new_cas)).ok()) return st;
  if (req.set_expiry && layout.expiry >= 0 && !(st = store_number(layout.expiry, uint64_t(req.expiry))).ok())
    return st;
  int r;
  if (exists) {
    if (!compare_record(t)) return {};
    r = complete_changed_row(t);
    if (!r) r = write_changed_row(t);
  } else {
    if (missing_required_values(t)) return bad_value_status();
    r = complete_new_row(t);
    /* An AUTO_INCREMENT column the container does not map (a table whose key column is a UNIQUE
       one beside it) gets its next value, as in an SQL insert that leaves it out: it was stored as
       its default 0, and every new key after the first was a duplicate. One the container maps
       keeps what the command gave (key 0 is the row with key 0). */
    if (Field *ai = t->found_next_number_field) {
      bool mapped = false;
      for (uint16_t c : idx.columns_) mapped = mapped || t->field[c] == ai;
      if (!mapped) t->next_number_field = ai;
    }
    /* An insert, as InnoDB asks the statement: with innodb_autoinc_lock_mode=1 an INSERT takes
       the next id under a mutex, anything else under the table's AUTO-INC lock until the
       statement ends, which two workers' batches then fought over (error 166). */
    const enum_sql_command cmd = thd_->lex->sql_command;
    thd_->lex->sql_command = SQLCOM_INSERT;
    if (!r) r = write_new_row(t);
    thd_->lex->sql_command = cmd;
    t->next_number_field = nullptr;
    t->file->ha_release_auto_increment();
  }
  if (r == kBadValue) return bad_value_status();
  return r ? Store_status::of(Store_errc::handler_error, r) : Store_status{};
}

Store_status Mariadb_store::kv_write_here(Open_index &idx, const Kv_layout &layout, const Kv_request &req,
                                          Kv_result *res) {
  TABLE *t;
  const enum_sql_command cmd = req.op == Kv_op::remove ? SQLCOM_DELETE : SQLCOM_UPDATE;
  Store_status st = prepare_request(idx, cmd, privileges_for(cmd, nullptr, &req, false), &t);
  if (!st.ok()) return st;
  if (idx.columns_.size() < 1 + layout.nvalues) return Store_status::of(Store_errc::column_not_found);
  Table_slot &s = slots_[idx.slot_];
  st = begin_write(s, idx);
  if (!st.ok()) return st;
  last_error_.clear();
  handler *h = t->file;
  KEY &k = t->key_info[idx.index_no_];
  Find_request fr;
  fr.keys = &req.key;
  fr.nkeys = 1;
  uint key_len;
  build_key(t, k, fr, 0, &key_len, true);
  h->ha_index_or_rnd_end();
  int r = h->ha_index_init(idx.index_no_, true);
  /* A key the key column cannot hold (longer than it, say) names no row: a miss. */
  if (!r) r = key_names_no_row_ ? HA_ERR_KEY_NOT_FOUND : h->ha_index_read_map(t->record[0], key_buf_.data(), 1, HA_READ_KEY_EXACT);
  /* A key column indexed by a prefix only: the row must hold this very key, not just its prefix. */
  while (!r && ((key_has_prefix_parts_ && full_key_cmp(k, 1) != 0) || history_row(t)))
    r = h->ha_index_next_same(t->record[0], key_buf_.data(), key_len);
  const bool present = r == 0;
  if (r && r != HA_ERR_KEY_NOT_FOUND && r != HA_ERR_END_OF_FILE) {
    h->ha_index_or_rnd_end();
    return failed_write(s, r);
  }
  bool live = present;
  if (present && layout.expiry >= 0) {
    Field *ef = t->field[idx.columns_[layout.expiry]];
    if (!ef->is_null()) {
      longlong e = ef->val_int();
      if (e > 0 && e <= req.now) live = false;  // expired: absent for every command
    }
  }
  st = {};
  Kv_request upd = req;
  /* A row's cas only grows (common/kv_cas.h): a token from an earlier version never matches it
     again, even one issued before a restart, when the counter began lower. */
  if (present && layout.cas >= 0)
    upd.new_cas = kv_cas_after(uint64_t(t->field[idx.columns_[layout.cas]]->val_int()), req.new_cas);
  auto current_flags = [&]() -> uint32_t {
    return layout.flags >= 0 ? uint32_t(t->field[idx.columns_[layout.flags]]->val_int()) : 0;
  };
  /* The CAS a client will see for the row as written: the new cas value, or the content hash. */
  auto result_cas = [&](std::string_view value, uint32_t flags) {
    res->cas = layout.cas >= 0 ? upd.new_cas : content_cas(value, flags);
  };
  /* The row's CAS as a client saw it: the cas column, or the content hash for a row without one
     (e.g. a row SQL wrote). */
  auto current_cas = [&]() -> uint64_t {
    uint64_t c = layout.cas >= 0 ? uint64_t(t->field[idx.columns_[layout.cas]]->val_int()) : 0;
    return c ? c : content_cas(kv_current_value(t, idx, layout), current_flags());
  };
  /* memcached's order: an incr/decr of an empty value is non-numeric before its CAS is looked at. */
  const bool empty_counter = (req.op == Kv_op::incr || req.op == Kv_op::decr) && req.expect_cas && live &&
                             kv_current_value(t, idx, layout).empty();
  if (req.expect_cas && live && req.op != Kv_op::cas && !empty_counter && current_cas() != req.expect_cas) {
    res->outcome = Kv_outcome::exists;
    h->ha_index_or_rnd_end();
    return end_write(s, true) ? Store_status{} : commit_failed();
  }
  switch (req.op) {
    case Kv_op::set:
      st = kv_set_row(t, idx, layout, upd, req.value.view(), present);
      res->outcome = Kv_outcome::stored;
      result_cas(req.value.view(), req.flags);
      break;
    case Kv_op::add:
      if (live) { res->outcome = Kv_outcome::not_stored; break; }
      st = kv_set_row(t, idx, layout, upd, req.value.view(), present);
      res->outcome = Kv_outcome::stored;
      result_cas(req.value.view(), req.flags);
      break;
    case Kv_op::replace:
      if (!live) { res->outcome = Kv_outcome::not_stored; break; }
      st = kv_set_row(t, idx, layout, upd, req.value.view(), true);
      res->outcome = Kv_outcome::stored;
      result_cas(req.value.view(), req.flags);
      break;
    case Kv_op::append:
    case Kv_op::prepend: {
      if (!live) { res->outcome = Kv_outcome::not_stored; break; }
      std::string cur = kv_current_value(t, idx, layout);
      if (cur.size() + req.value.len > req.max_value_size) { res->outcome = Kv_outcome::too_large; break; }
      std::string v = req.op == Kv_op::append ? cur + std::string(req.value.view()) : std::string(req.value.view()) + cur;
      const uint32_t flags = current_flags();
      upd.set_flags = false;
      upd.set_expiry = false;
      st = kv_set_row(t, idx, layout, upd, v, true);
      res->outcome = Kv_outcome::stored;
      result_cas(v, flags);
      break;
    }
    case Kv_op::cas: {
      if (!live) { res->outcome = Kv_outcome::not_found; break; }
      if (current_cas() != req.cas) { res->outcome = Kv_outcome::exists; break; }
      st = kv_set_row(t, idx, layout, upd, req.value.view(), true);
      res->outcome = Kv_outcome::stored;
      result_cas(req.value.view(), req.flags);
      break;
    }
    case Kv_op::incr:
    case Kv_op::decr: {
      if (!live) { res->outcome = Kv_outcome::not_found; break; }
      uint64_t n;
      const std::string cur = kv_current_value(t, idx, layout);
      if (!parse_counter_value(cur, &n)) { res->outcome = Kv_outcome::not_numeric; break; }
      if (req.op == Kv_op::incr)
        n += req.delta;  // wraps at 2^64, as memcached does
      else
        n = n < req.delta ? 0 : n - req.delta;
      std::string v = std::to_string(n);
      const uint32_t flags = current_flags();
      res->previous_cas = current_cas();
      upd.set_flags = false;
      upd.set_expiry = false;
      st = kv_set_row(t, idx, layout, upd, v, true);
      res->outcome = Kv_outcome::number;
      res->number = n;
      res->longer = v.size() > cur.size();
      result_cas(v, flags);
      break;
    }
    case Kv_op::touch:
    case Kv_op::invalidate: {
      /* touch: a new expiry. invalidate (md I): a new CAS and, with set_expiry, a new expiry. */
      if (!live) { res->outcome = Kv_outcome::not_found; break; }
      res->outcome = Kv_outcome::touched;
      const bool invalidate = req.op == Kv_op::invalidate;
      const int cas_col = invalidate ? layout.cas : -1;
      const int expiry_col = !invalidate || req.set_expiry ? layout.expiry : -1;
      if (cas_col >= 0 || expiry_col >= 0) {
        store_record(t, record[1]);
        t->reset_default_fields();
        for (int col : {cas_col, expiry_col}) {
          if (col < 0) continue;
          Field *f = t->field[idx.columns_[col]];
          f->set_notnull();
          f->store(longlong(col == cas_col ? upd.new_cas : uint64_t(req.expiry)), true);
          f->set_has_explicit_value();
        }
        if (compare_record(t)) {
          int e = complete_changed_row(t);  // ON UPDATE defaults, generated columns
          if (!e) e = write_changed_row(t);
          if (e == kBadValue) st = Store_status::of(Store_errc::bad_value);
          else if (e) st = Store_status::of(Store_errc::handler_error, e);
        }
      }
      if (invalidate) result_cas(kv_current_value(t, idx, layout), current_flags());
      break;
    }
    case Kv_op::remove:
      if (!present) { res->outcome = Kv_outcome::not_found; break; }
      /* An expired row is deleted too, but reported as absent. */
      if (int e = remove_row(t)) st = Store_status::of(e == kBadValue ? Store_errc::bad_value : Store_errc::handler_error, e);
      res->outcome = live ? Kv_outcome::deleted : Kv_outcome::not_found;
      break;
  }
  h->ha_index_or_rnd_end();
  if (!st.ok()) {
    if (st.errc == Store_errc::handler_error) return failed_write(s, st.handler_error);
    if (st.errc == Store_errc::bad_value) return failed_write(s, kBadValue);
    end_write(s, false);
    return st;
  }
  if (!end_write(s, true)) return commit_failed();
  const bool wrote = res->outcome == Kv_outcome::stored || res->outcome == Kv_outcome::number ||
                     res->outcome == Kv_outcome::touched || (req.op == Kv_op::remove && present);
  if (wrote) counters_.add(counters_.rows_written);  // a miss, a NOT_STORED or a bad CAS wrote nothing
  return {};
}

}  // namespace tablesocket
