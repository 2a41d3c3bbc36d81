#include "session/hs_session.h"

#include <strings.h>

#include <cstring>

#include "common/account_record.h"

namespace tablesocket {
namespace {

class Hs_row_sink final : public Row_sink {
 public:
  Hs_row_sink(Byte_buffer &out, size_t limit) : out_(out), limit_(limit) {}
  void begin(size_t ncols) override { mark_ = hs::begin_rows(out_, ncols); }
  void value(const char *p, size_t n) override { hs::append_value(out_, p, n); }
  void null() override { hs::append_value(out_, nullptr, 0); }
  void end() override { hs::end_rows(out_); }
  void cancel() override { hs::cancel_rows(out_, mark_); }
  bool would_overflow() const override { return out_.size() > limit_; }

 private:
  Byte_buffer &out_;
  size_t limit_;
  size_t mark_ = 0;
};

/* Keeps the first column of each row: the IN list taken from another index. */
class First_column_sink final : public Row_sink {
 public:
  First_column_sink(std::string &bytes, std::vector<std::pair<size_t, size_t>> &spans, size_t max_bytes)
      : bytes_(bytes), spans_(spans), max_bytes_(max_bytes) {}
  void begin(size_t ncols) override { ncols_ = ncols; col_ = 0; }
  void value(const char *p, size_t n) override {
    if (col_++ % ncols_ == 0) { spans_.emplace_back(bytes_.size(), n); bytes_.append(p, n); }
  }
  void null() override {
    if (col_++ % ncols_ == 0) spans_.emplace_back(SIZE_MAX, 0);  // NULL group: matches nothing
  }
  void end() override {}
  void cancel() override { spans_.clear(); bytes_.clear(); }
  bool would_overflow() const override { return bytes_.size() > max_bytes_; }

 private:
  std::string &bytes_;
  std::vector<std::pair<size_t, size_t>> &spans_;
  size_t max_bytes_;
  size_t ncols_ = 1, col_ = 0;
};

}  // namespace

void Hs_session::reply_denied(Byte_buffer &out, std::string_view message) {
  counters_.add(counters_.errors);
  out.append(std::string_view("3\t1\t"));
  hs::escape_into(out, message.data(), message.size());
  out.push_back('\n');
}

void Hs_session::reply_client_error(Byte_buffer &out, uint32_t code, const char *msg) {
  counters_.add(counters_.errors);
  hs::encode_status(out, code, msg);
}

Hs_session::Exec Hs_session::reply_error(const Store_status &failed, Byte_buffer &out) {
  const Store_status st = store_.as_reported(failed);
  const char *msg = nullptr;
  uint32_t code = 2;
  switch (st.errc) {
    case Store_errc::ok: hs::encode_status(out, 0, ""); return Exec::done;
    case Store_errc::lock_queued: return Exec::park;  // its own session waits for the lock, with the timeout
    case Store_errc::table_busy:
    case Store_errc::row_locked:
      if (may_wait_longer(cfg_.lock_wait_timeout_ms)) return Exec::park;
      code = 1;
      msg = "lock_wait_timeout";
      break;
    case Store_errc::table_open_failed: code = 1; msg = "open_table"; break;
    case Store_errc::lock_wait_timeout: code = 1; msg = "lock_wait_timeout"; break;
    case Store_errc::index_not_found: msg = "idxnum"; break;
    case Store_errc::index_unusable:
    case Store_errc::bad_container_index: msg = "idxtype"; break;
    case Store_errc::column_not_found: msg = "fld"; break;
    case Store_errc::too_many_key_parts: msg = "kpnum"; break;
    case Store_errc::bad_in_column: msg = "invalueskp"; break;
    case Store_errc::bad_filter_column: msg = "filterfld"; break;
    case Store_errc::filter_on_blob: msg = "filterblob"; break;
    case Store_errc::read_only: msg = "readonly"; break;
    case Store_errc::lock_failed: code = 1; msg = "lock_tables"; break;
    case Store_errc::result_too_large: code = 1; msg = "toolarge"; break;
    case Store_errc::too_many_indexes: msg = "toomanyindexes"; break;
    case Store_errc::too_many_columns: msg = "toomanycolumns"; break;
    case Store_errc::server_shutdown: code = 1; msg = "shutdown"; break;
    case Store_errc::too_many_values: msg = "toomanyvalues"; break;
    case Store_errc::bad_merge: msg = "merge"; break;
    case Store_errc::server_read_only: code = 1; msg = "read_only"; break;
    case Store_errc::bad_value:
    case Store_errc::not_replicated:
    case Store_errc::commit_failed: {
      /* The server's own message (e.g. "Incorrect integer value: 'x' for column ..."), escaped:
         it may quote the client's bytes. */
      counters_.add(counters_.errors);
      out.append(std::string_view("1\t1\t"));
      std::string_view m = st.message.empty() ? std::string_view(st.errc == Store_errc::bad_value ? "bad_value" : "commit_failed")
                                              : st.message;
      hs::escape_into(out, m.data(), m.size());
      out.push_back('\n');
      return Exec::done;
    }
    case Store_errc::handler_error:
      counters_.add(counters_.errors);
      hs::encode_number(out, 1, uint64_t(st.handler_error));
      return Exec::done;
    case Store_errc::access_denied:
      counters_.add(counters_.access_denied);
      reply_denied(out, st.message.empty() ? std::string_view("access denied") : st.message);
      return Exec::done;
  }
  reply_client_error(out, code, msg);
  return Exec::done;
}

Hs_session::Outcome Hs_session::run(Byte_buffer &in, Byte_buffer &out, unsigned max_requests) {
  hs::Limits limits;
  limits.max_line = cfg_.max_request_size;
  /* Before the login the configuration requires, a line is a login or is refused: one longer than
     any login ends the connection with "toolong", as an over-long line does after it (the
     network layer holds no more than kPreLoginInput for such a connection). */
  if (pre_login_capped() && limits.max_line > kPreLoginLine) limits.max_line = kPreLoginLine;
  limits.max_tokens = cfg_.max_tokens;
  unsigned done = 0;
  if (parked_) {
    retrying_ = true;
    const Exec e = execute(parked_req_, out);
    retrying_ = false;
    if (e == Exec::park) return Outcome::parked;
    parked_ = false;
    lock_wait_over();
    in.consume(parked_len_);
    ++done;
  }
  while (!in.empty()) {
    if (done >= max_requests || store_.batch_budget_spent() || store_.turn_spent() ||
        out.size() >= cfg_.output_high_water) return Outcome::yielded;
    hs::Request req;
    hs::Parse_result pr = hs::parse_request(in.data(), in.size(), limits, scratch_, &req);
    switch (pr.status) {
      case hs::Parse_status::need_more:
        return Outcome::idle;
      case hs::Parse_status::fatal:
        counters_.add(counters_.protocol_errors);
        reply_client_error(out, pr.error_code, pr.error_message ? pr.error_message : "toolong");
        in.clear();
        return Outcome::close;
      case hs::Parse_status::error:
        reply_parse_error(req, pr, out);
        in.consume(pr.consumed);
        ++done;
        continue;
      case hs::Parse_status::complete:
        break;
    }
    if (execute(req, out) == Exec::park) {
      parked_ = true;
      parked_req_ = req;
      parked_len_ = pr.consumed;
      counters_.add(counters_.lock_waits);
      return Outcome::parked;
    }
    lock_wait_over();
    in.consume(pr.consumed);
    ++done;
  }
  return Outcome::idle;
}

void Hs_session::reply_parse_error(const hs::Request &req, const hs::Parse_result &pr, Byte_buffer &out) {
  /* HandlerSocket checks the login, then looks the index id up, before it reads the rest of the
     line: an index that is not open is "stmtnum" however malformed the rest is. */
  const char *msg = pr.error_message ? pr.error_message : "";
  const bool index_named = req.command == hs::Command::exec && std::strcmp(msg, "indexid") != 0 && std::strcmp(msg, "cmd") != 0;
  if ((req.command == hs::Command::open_index || index_named) && !authorized_)
    reply_client_error(out, 3, "unauth");
  else if (index_named && indexes_.find(req.exec.index_id) == indexes_.end())
    reply_client_error(out, 2, "stmtnum");
  else
    reply_client_error(out, pr.error_code, pr.error_message ? pr.error_message : "syntax");
}

Hs_session::Exec Hs_session::execute(const hs::Request &req, Byte_buffer &out) {
  switch (req.command) {
    case hs::Command::auth:
      counters_.count_request(counters_.requests_auth, retrying_);
      return exec_auth(req.auth, out);
    case hs::Command::open_index:
      counters_.count_request(counters_.requests_open, retrying_);
      if (!authorized_) { reply_client_error(out, 3, "unauth"); return Exec::done; }
      return exec_open(req.open, out);
    case hs::Command::exec:
      if (!authorized_) { reply_client_error(out, 3, "unauth"); return Exec::done; }
      return exec_on_index(req.exec, out);
  }
  reply_client_error(out, 2, "cmd");
  return Exec::done;
}

Hs_session::Exec Hs_session::exec_auth(const hs::Auth_request &r, Byte_buffer &out) {
  if (r.type == "1") {
    /* HandlerSocket's shared secret for this port. */
    std::string_view key = r.nargs ? r.args[0].view() : std::string_view();
    const bool match = equal_constant_time(key, policy_.plain_secret);
    /* Without a secret on the port nothing is locked (as HandlerSocket, which checks a connection's
       authorization only when a secret is set): a non-empty key gets "unauth" and changes nothing. */
    if (policy_.plain_secret.empty()) {
      if (match) hs::encode_status(out, 0, "");
      else reply_client_error(out, 3, "unauth");
      return Exec::done;
    }
    authorized_ = match;
    if (!authorized_) {
      auth_.secret_failed();
      reply_client_error(out, 3, "unauth");
      return Exec::done;
    }
    hs::encode_status(out, 0, "");
    return Exec::done;
  }
  if (r.type == "2") {
    /* A challenge for the mysql_native_password login: 0 1 <40 hex digits>. */
    std::string hex;
    auth_.new_challenge(&hex);
    out.append(std::string_view("0\t1\t"));
    out.append(hex);
    out.push_back('\n');
    return Exec::done;
  }
  if (r.type != "3" && r.type != "4") {
    reply_client_error(out, 3, "authtype");
    return Exec::done;
  }
  const std::string_view user = r.nargs > 0 ? r.args[0].view() : std::string_view();
  std::string_view secret = r.nargs > 1 ? r.args[1].view() : std::string_view();
  Login_method method = Login_method::cleartext;
  unsigned char token[20];
  if (r.type == "3") {
    method = Login_method::native;
    if (!secret.empty()) {
      /* The token as 40 hex digits ("" for an account without a password). */
      if (!hex_decode(secret, token, sizeof token)) {
        reply_denied(out, "malformed token: expected 40 hex digits");
        return Exec::done;
      }
      secret = std::string_view(reinterpret_cast<const char *>(token), sizeof token);
    }
  }
  Store_status st = auth_.login(method, user, secret);
  if (st.errc == Store_errc::access_denied) {
    reply_denied(out, st.message);
    return Exec::done;
  }
  if (!st.ok()) return reply_error(st, out);
  /* A new account: what was opened for the old one is forgotten (its privileges differ). */
  indexes_.clear();
  index_bytes_ = 0;
  auth_.forget_previous_account();
  authorized_ = true;
  hs::encode_status(out, 0, "");
  return Exec::done;
}

Hs_session::Exec Hs_session::exec_open(const hs::Open_index_request &r, Byte_buffer &out) {
  auto it = indexes_.find(r.index_id);
  if (it == indexes_.end() && indexes_.size() >= cfg_.max_open_indexes)
    return reply_error(Store_status::of(Store_errc::too_many_indexes), out);
  Index_spec spec;
  spec.db = r.db;
  spec.table = r.table;
  spec.index = r.index;
  spec.columns = r.columns;
  spec.filter_columns = r.filter_columns;
  spec.for_write = policy_.writable;
  Auth_state::Identity id;
  Store_status ist = auth_.identity(&id, &spec.principal);
  if (!ist.ok()) return reply_error(ist, out);
  if (id == Auth_state::Identity::unauthenticated) {
    reply_client_error(out, 3, "unauth");
    return Exec::done;
  }
  /* Without an account nothing is checked (HandlerSocket's way), but the server's own schema is
     out of reach: its tables hold every account's password hash and privileges (an insert into
     mysql.global_priv made an administrator at the next FLUSH PRIVILEGES). */
  if (id == Auth_state::Identity::unrestricted && r.db.size() == 5 && strncasecmp(r.db.data(), "mysql", 5) == 0) {
    counters_.add(counters_.access_denied);
    reply_denied(out, "the mysql schema needs a login: log in with a MariaDB account (A 3 / A 4) that may use it");
    return Exec::done;
  }
  Open_index idx;
  Store_status st = store_.open_index(spec, idx);
  if (!st.ok()) {
    /* HandlerSocket replaces an index id only when the new open succeeds. */
    return reply_error(st, out);
  }
  auto old = indexes_.find(r.index_id);
  if (old != indexes_.end()) index_bytes_ -= std::min(index_bytes_, old->second.memory_bytes());  // replaced
  Open_index &slot = indexes_[r.index_id];
  slot = std::move(idx);
  index_bytes_ += slot.memory_bytes();
  hs::encode_status(out, 0, "");
  return Exec::done;
}

Hs_session::Exec Hs_session::exec_on_index(const hs::Exec_request &r, Byte_buffer &out) {
  auto it = indexes_.find(r.index_id);
  if (it == indexes_.end()) {
    counters_.count_request(counters_.requests_other, retrying_);
    reply_client_error(out, 2, "stmtnum");
    return Exec::done;
  }
  Open_index &idx = it->second;
  const bool is_write = r.op == hs::Exec_op::insert || r.op == hs::Exec_op::upsert || r.mod != Modify_op::none;
  if (!retrying_) {  // MAX_QUERIES_PER_HOUR / MAX_UPDATES_PER_HOUR: once per request, not per retry
    Store_status ch = auth_.charge_request(is_write);
    if (!ch.ok()) return reply_error(ch, out);
  }
  if (is_write) {
    if (r.op == hs::Exec_op::insert || r.op == hs::Exec_op::upsert)
      counters_.count_request(counters_.requests_insert, retrying_);
    else
      counters_.count_request(counters_.requests_modify, retrying_);
    if (!policy_.writable) return reply_error(Store_status::of(Store_errc::read_only), out);
    return exec_write(idx, r, out);
  }
  counters_.count_request(counters_.requests_find, retrying_);
  if (answers_discarded) return Exec::done;  // a read whose answer nobody will hear
  Find_request fr;
  if (!to_find_request(r, &fr)) {
    reply_client_error(out, 2, "op");
    return Exec::done;
  }
  if (r.in_from_index) {
    bool answered = false;
    Exec e = resolve_in_source(r, idx, &fr, out, &answered);
    if (e == Exec::park || answered) return e;
  }
  Hs_row_sink sink(out, cfg_.max_output_buffer);
  Store_status st = store_.find(idx, fr, sink);
  if (!st.ok()) return reply_error(st, out);
  return Exec::done;
}

Hs_session::Exec Hs_session::resolve_in_source(const hs::Exec_request &r, const Open_index &idx, Find_request *fr,
                                               Byte_buffer &out, bool *answered) {
  *answered = true;
  auto src = indexes_.find(r.in_index_id);
  if (src == indexes_.end() || src->second.ncolumns() == 0) {
    reply_client_error(out, 2, "insource");
    return Exec::done;
  }
  Find_request lookup;
  lookup.op = Find_op::eq;
  lookup.keys = r.in_keys;
  lookup.nkeys = r.nin_keys;
  /* The IN list is bounded like one sent on the wire would be: one row more than that is looked
     for, to refuse a source that holds more rather than cut it short silently. */
  lookup.limit = r.in_limit <= cfg_.max_tokens ? r.in_limit : cfg_.max_tokens + 1;
  in_bytes_.clear();
  std::vector<std::pair<size_t, size_t>> spans;
  First_column_sink sink(in_bytes_, spans, cfg_.max_request_size);
  Store_status st = store_.find(src->second, lookup, sink);
  if (!st.ok()) return reply_error(st, out);
  if (spans.size() > cfg_.max_tokens) {
    reply_client_error(out, 1, "insource_too_many");  // more groups than tablesocket_max_tokens
    return Exec::done;
  }
  *answered = false;
  in_values_.clear();
  for (auto &sp : spans) {
    Datum d;
    if (sp.first != SIZE_MAX) {
      d.ptr = in_bytes_.data() + sp.first;
      d.len = sp.second;
      in_values_.push_back(d);
    }
  }
  fr->in_values = in_values_.data();
  fr->nin_values = uint32_t(in_values_.size());
  if (fr->nin_values == 0) {
    /* The source found no groups: no rows (a read, or a modify's `?`), or nothing changed. */
    *answered = true;
    if (r.mod != Modify_op::none && !r.mod_returns_rows) {
      hs::encode_number(out, 0, 0);
    } else {
      hs::begin_rows(out, idx.ncolumns());
      hs::end_rows(out);
    }
  }
  return Exec::done;
}

bool Hs_session::to_find_request(const hs::Exec_request &r, Find_request *fr) {
  switch (r.op) {
    case hs::Exec_op::eq: fr->op = Find_op::eq; break;
    case hs::Exec_op::gt: fr->op = Find_op::gt; break;
    case hs::Exec_op::ge: fr->op = Find_op::ge; break;
    case hs::Exec_op::lt: fr->op = Find_op::lt; break;
    case hs::Exec_op::le: fr->op = Find_op::le; break;
    case hs::Exec_op::last_prefix: fr->op = Find_op::last_prefix; break;
    case hs::Exec_op::merge_desc: fr->op = Find_op::merge_desc; break;
    case hs::Exec_op::merge_asc: fr->op = Find_op::merge_asc; break;
    default: return false;
  }
  fr->keys = r.keys;
  fr->nkeys = r.nkeys;
  fr->limit = r.limit;
  fr->offset = r.offset;
  fr->has_in = r.has_in;
  fr->in_column = r.in_column;
  fr->in_values = r.in_values;
  fr->nin_values = r.nin_values;
  fr->filters = r.filters;
  fr->nfilters = r.nfilters;
  return true;
}

Hs_session::Exec Hs_session::exec_write(Open_index &idx, const hs::Exec_request &r, Byte_buffer &out) {
  if (r.op == hs::Exec_op::insert || r.op == hs::Exec_op::upsert) {
    if (r.mod != Modify_op::none || r.has_in || r.nfilters) {
      reply_client_error(out, 2, "op");  // an insert takes values only
      return Exec::done;
    }
    Insert_result res;
    Store_status st = store_.insert(idx, r.keys, r.nkeys, r.op == hs::Exec_op::upsert, &res);
    if (!st.ok()) return reply_error(st, out);
    if (!store_.write_committed()) wrote_in_batch = true;  // its reply waits for the batch's commit
    if (res.has_insert_id)
      hs::encode_number(out, 0, res.insert_id);
    else
      hs::encode_status(out, 0, "");
    return Exec::done;
  }
  Find_request fr;
  if (!to_find_request(r, &fr)) {
    reply_client_error(out, 2, "op");
    return Exec::done;
  }
  if (r.in_from_index) {
    /* The IN values come from another index's rows, as for a read (e.g. delete what every
       followee posted): looked up first, in the same batch. */
    bool answered = false;
    Exec e = resolve_in_source(r, idx, &fr, out, &answered);
    if (e == Exec::park || answered) return e;
  }
  Modify_request mr;
  mr.op = r.mod;
  mr.returns_rows = r.mod_returns_rows;
  mr.values = r.mod_values;
  mr.nvalues = r.nmod_values;
  /* HandlerSocket reads exactly as many values as the index has columns: the empty token a
     trailing tab leaves ("... U 5\t") is not one. Empty values past the columns are dropped; any
     other extra value is still toomanyvalues. */
  while (mr.nvalues > idx.ncolumns() && !mr.values[mr.nvalues - 1].is_null() && mr.values[mr.nvalues - 1].len == 0)
    --mr.nvalues;
  Hs_row_sink sink(out, cfg_.max_output_buffer);
  uint64_t modified = 0;
  Store_status st = store_.modify(idx, fr, mr, sink, &modified);
  if (!st.ok()) return reply_error(st, out);
  if (!store_.write_committed()) wrote_in_batch = true;
  if (!mr.returns_rows) hs::encode_number(out, 0, modified);
  return Exec::done;
}

}  // namespace tablesocket
