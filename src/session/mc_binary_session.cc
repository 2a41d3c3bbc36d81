/* The memcached binary protocol on a memcached connection: the same containers, rows, CAS and
   expiry as the text protocol (mc_session.cc), answered as memcached 1.6.18's proto_bin.c
   answers. Logging in: SASL PLAIN with a MariaDB account (memcached's -S). */
#include <cstring>
#include <string>

#include "session/mc_session.h"

namespace tablesocket {

using mc::Bin_op;
using mc::Bin_request;
using mc::Bin_status;

Session_outcome Mc_session::run_binary(Byte_buffer &in, Byte_buffer &out, unsigned max_requests) {
  unsigned done = 0;
  if (parked_) {
    retrying_ = true;
    Exec e = exec_bin(parked_bin_, out);
    retrying_ = false;
    if (e == Exec::park) return Session_outcome::parked;
    parked_ = false;
    lock_wait_over();
    in.consume(parked_len_);
    ++done;
    if (e == Exec::close) return Session_outcome::close;
  }
  while (!in.empty()) {
    if (swallow_) {
      in.consume(mc::swallow_step(&swallow_, in.size()));
      continue;
    }
    if (done >= max_requests || store_.batch_budget_spent() || store_.turn_spent() || out.size() >= cfg_.output_high_water)
      return Session_outcome::yielded;
    mc::Bin_parse_result pr = mc::parse_binary_request(in.data(), in.size(), request_limits(), &bin_rq_);
    switch (pr.status) {
      case mc::Mc_parse_status::need_more:
        return Session_outcome::idle;
      case mc::Mc_parse_status::fatal:
        counters_.add(counters_.protocol_errors);
        if (pr.reply) mc::encode_bin_error(out, bin_rq_, pr.error);
        in.clear();
        return Session_outcome::close;
      case mc::Mc_parse_status::error:
        counters_.add(counters_.errors);
        if (refused_before_login(bin_rq_, out)) {
          in.clear();
          return Session_outcome::close;
        }
        /* A set refused as too large drops the old item, as memcached's does (a stale value must
           not outlive a set the client was told failed). */
        if (pr.error == Bin_status::e2big && bin_rq_.op == Bin_op::set) drop_refused_item(bin_rq_.key);
        mc::encode_bin_error(out, bin_rq_, pr.error);
        in.consume(pr.consumed);
        swallow_ = pr.swallow;
        ++done;
        continue;
      case mc::Mc_parse_status::complete:
        break;
    }
    Exec e = exec_bin(bin_rq_, out);
    if (e == Exec::park) {
      parked_ = true;
      parked_bin_ = bin_rq_;
      parked_len_ = pr.consumed;
      counters_.add(counters_.lock_waits);
      return Session_outcome::parked;
    }
    lock_wait_over();
    in.consume(pr.consumed);
    ++done;
    if (e == Exec::close) return Session_outcome::close;
  }
  return Session_outcome::idle;
}

Mc_session::Exec Mc_session::bin_server_error(const Store_status &st, const Bin_request &rq, Byte_buffer &out) {
  if (waits_for_lock(st)) return Exec::park;
  count_failure(st);
  Bin_status code = Bin_status::internal_error;
  switch (st.errc) {
    case Store_errc::access_denied: code = Bin_status::auth_error; break;
    case Store_errc::table_busy:
    case Store_errc::row_locked:
    case Store_errc::lock_queued:
    case Store_errc::lock_wait_timeout: code = Bin_status::etmpfail; break;
    case Store_errc::result_too_large: code = Bin_status::e2big; break;
    default: break;
  }
  mc::encode_bin_error(out, rq, code, error_message(st));
  return Exec::done;
}

Mc_session::Open_container *Mc_session::bin_resolve(const Bin_request &rq, Byte_buffer &out,
                                                    std::string_view *row_key, Exec *e) {
  Store_status st;
  Open_container *oc = resolve(rq.key, row_key, &st);
  if (!oc) {
    *e = bin_server_error(st, rq, out);
    return nullptr;
  }
  if (row_key->empty()) {  // "@@name" without ".key": not a row
    counters_.add(counters_.errors);
    mc::encode_bin_error(out, rq, Bin_status::einval);
    *e = Exec::done;
    return nullptr;
  }
  return oc;
}

/* What is served before a required login, as by memcached with SASL on (-S): the login (SASL
   list, auth, step), version and quit. By the opcode as sent: one the parser refused (an unknown
   opcode) has no Bin_op. */
static bool served_before_login(uint8_t opcode) {
  switch (Bin_op(opcode)) {
    case Bin_op::sasl_list_mechs: case Bin_op::sasl_auth: case Bin_op::sasl_step:
    case Bin_op::version: case Bin_op::quit: case Bin_op::quitq:
      return true;
    default:
      return false;
  }
}

bool Mc_session::refused_before_login(const Bin_request &rq, Byte_buffer &out) {
  /* memcached checks before it reads a request's body: any other request the parser refused (an
     unknown opcode, a body too large) gets AUTH_ERROR and the connection is closed, as the
     requests exec_bin() refuses. */
  if (served_before_login(rq.opcode) || !awaiting_login()) return false;
  Auth_state::Identity id;
  Principal *p = nullptr;
  if (!auth_.identity(&id, &p, uses_anonymous_account(cfg_)).ok() || id != Auth_state::Identity::unauthenticated)
    return false;  // (a verified client certificate logged it in)
  mc::encode_bin_error(out, rq, Bin_status::auth_error);
  return true;
}

Mc_session::Exec Mc_session::exec_bin(const Bin_request &rq, Byte_buffer &out) {
  if (!served_before_login(rq.opcode)) {
    /* Who this request runs as (a login, a TLS client certificate, or the anonymous account). */
    Auth_state::Identity id;
    Store_status st = auth_.identity(&id, &principal_, uses_anonymous_account(cfg_));
    if (!st.ok()) return bin_server_error(st, rq, out);
    if (id == Auth_state::Identity::unauthenticated) {
      /* As memcached with SASL on (-S): everything but the login is refused and the connection
         closed. */
      counters_.add(counters_.errors);
      mc::encode_bin_error(out, rq, Bin_status::auth_error);
      return Exec::close;
    }
    /* MAX_QUERIES_PER_HOUR / MAX_UPDATES_PER_HOUR (see Mc_session::execute). */
    if (!retrying_ && rq.op != Bin_op::noop && rq.op != Bin_op::stat) {
      const bool read = rq.op == Bin_op::get || rq.op == Bin_op::getk;
      Store_status ch = auth_.charge_request(!read);
      if (!ch.ok()) return bin_server_error(ch, rq, out);
    }
  }
  switch (rq.op) {
    case Bin_op::get:
    case Bin_op::getk:
    case Bin_op::gat:
    case Bin_op::gatk:
      counters_.count_request(counters_.requests_find, retrying_);
      return bin_get(rq, out);
    case Bin_op::touch:
      counters_.count_request(counters_.requests_modify, retrying_);
      return bin_get(rq, out);
    case Bin_op::set:
    case Bin_op::add:
    case Bin_op::replace:
    case Bin_op::append:
    case Bin_op::prepend:
      counters_.count_request(counters_.requests_insert, retrying_);
      if (!retrying_) counters_.add(counters_.mc_cmd_set);
      return bin_store(rq, out);
    case Bin_op::del:
      counters_.count_request(counters_.requests_modify, retrying_);
      return bin_delete(rq, out);
    case Bin_op::incr:
    case Bin_op::decr:
      counters_.count_request(counters_.requests_modify, retrying_);
      return bin_arith(rq, out);
    case Bin_op::flush:
      counters_.count_request(counters_.requests_modify, retrying_);
      return bin_flush(rq, out);
    case Bin_op::noop:
      counters_.count_request(counters_.requests_other, retrying_);
      mc::encode_bin_response(out, rq, Bin_status::ok, 0, {}, {}, {});
      return Exec::done;
    case Bin_op::version:
      counters_.count_request(counters_.requests_other, retrying_);
      mc::encode_bin_response(out, rq, Bin_status::ok, 0, {}, {}, "1.6.18");
      return Exec::done;
    case Bin_op::stat:
      counters_.count_request(counters_.requests_other, retrying_);
      return bin_stat(rq, out);
    case Bin_op::quit:
      if (!rq.quiet) mc::encode_bin_response(out, rq, Bin_status::ok, 0, {}, {}, {});
      return Exec::close;
    case Bin_op::sasl_list_mechs:
      counters_.count_request(counters_.requests_auth, retrying_);
      mc::encode_bin_response(out, rq, Bin_status::ok, 0, {}, {}, "PLAIN");
      return Exec::done;
    case Bin_op::sasl_auth:
      counters_.count_request(counters_.requests_auth, retrying_);
      return bin_sasl_auth(rq, out);
    case Bin_op::sasl_step:  // PLAIN has no second step
      counters_.count_request(counters_.requests_auth, retrying_);
      counters_.add(counters_.errors);
      mc::encode_bin_error(out, rq, Bin_status::auth_error);
      return Exec::done;
    default:
      break;
  }
  counters_.add(counters_.errors);
  mc::encode_bin_error(out, rq, Bin_status::unknown_command);
  return Exec::done;
}

Mc_session::Exec Mc_session::bin_get(const Bin_request &rq, Byte_buffer &out) {
  const bool with_key = rq.op == Bin_op::getk || rq.op == Bin_op::gatk;
  const bool touch = rq.op == Bin_op::touch || rq.op == Bin_op::gat || rq.op == Bin_op::gatk;
  if (answers_discarded && !touch && !selects_container(rq.key)) return Exec::done;  // nobody to answer
  char extras[4];
  if ((rq.op == Bin_op::get || rq.op == Bin_op::getk) && selects_container(rq.key)) {
    /* "@@name", as the text protocol's "get @@name". */
    std::string_view row_key;
    Store_status st;
    Open_container *oc = resolve(rq.key, &row_key, &st);
    if (!oc) {
      if (!waits_for_lock(st)) container_switch_failed(rq.key);
      return bin_server_error(st, rq, out);
    }
    const std::string table = use_container(rq.key, *oc);
    mc::put_be32(extras, 0);
    mc::encode_bin_response(out, rq, Bin_status::ok, 0, std::string_view(extras, 4),
                            with_key ? rq.key : std::string_view(), table);
    return Exec::done;
  }
  std::string_view row_key;
  Exec e = Exec::done;
  Open_container *oc = bin_resolve(rq, out, &row_key, &e);
  if (!oc) return e;
  clear_items();
  Store_status st = lookup(*oc, &row_key, 1, items_, !touch);
  if (!st.ok()) return bin_server_error(st, rq, out);
  if (items_.empty()) {
    count_reads(touch, 1, 0);
    if (rq.quiet) return Exec::done;  // a quiet get's miss is not answered
    if (with_key)
      mc::encode_bin_response(out, rq, Bin_status::key_enoent, 0, {}, rq.key, {});
    else
      mc::encode_bin_error(out, rq, Bin_status::key_enoent);
    return Exec::done;
  }
  Item &it = items_[0];
  if (touch) {
    st = touch_row(*oc, row_key, absolute_expiry_u32(rq.exptime));
    if (!st.ok()) return bin_server_error(st, rq, out);  // a lock wait runs it again: counted after
  }
  count_reads(touch, 1, 1);
  if (rq.op != Bin_op::touch && !fits_output(it)) {
    counters_.add(counters_.errors);
    mc::encode_bin_error(out, rq, Bin_status::e2big);
    return Exec::done;
  }
  counters_.add(counters_.rows_read);
  /* A hit is answered even to a quiet get (GETQ, GATQ: only misses are silent). */
  mc::put_be32(extras, it.flags);
  mc::encode_bin_response(out, rq, Bin_status::ok, cas_of(it), std::string_view(extras, 4),
                          with_key ? rq.key : std::string_view(),
                          rq.op == Bin_op::touch ? std::string_view() : std::string_view(it.value));
  return Exec::done;
}

Mc_session::Exec Mc_session::bin_store(const Bin_request &rq, Byte_buffer &out) {
  std::string_view row_key;
  Exec e = Exec::done;
  Open_container *oc = bin_resolve(rq, out, &row_key, &e);
  if (!oc) return e;
  Kv_request kr;
  switch (rq.op) {
    case Bin_op::add: kr.op = Kv_op::add; break;
    case Bin_op::replace: kr.op = Kv_op::replace; break;
    case Bin_op::append: kr.op = Kv_op::append; break;
    case Bin_op::prepend: kr.op = Kv_op::prepend; break;
    default: kr.op = Kv_op::set; break;
  }
  const bool concat = kr.op == Kv_op::append || kr.op == Kv_op::prepend;
  /* A CAS makes set/add/replace a compare-and-swap (memcached: NREAD_CAS); append/prepend with a
     CAS change the item only if it still has that CAS. */
  if (rq.cas && !concat) {
    kr.op = Kv_op::cas;
    kr.cas = rq.cas;
  } else if (rq.cas) {
    kr.expect_cas = rq.cas;
  }
  kr.key = Datum{row_key.data(), row_key.size()};
  kr.value = Datum{rq.value.data() ? rq.value.data() : "", rq.value.size()};
  kr.flags = rq.flags;
  kr.expiry = absolute_expiry_u32(rq.exptime);
  Kv_result res;
  Store_status st = write(*oc, kr, &res);
  if (!st.ok()) return bin_server_error(st, rq, out);
  switch (res.outcome) {
    case Kv_outcome::stored:
      if (!rq.quiet) mc::encode_bin_response(out, rq, Bin_status::ok, res.cas, {}, {}, {});
      return Exec::done;
    case Kv_outcome::not_stored:
      /* memcached: an add of an existing key "exists", a replace of a missing one "not found". */
      mc::encode_bin_error(out, rq, rq.op == Bin_op::add       ? Bin_status::key_eexists
                                    : rq.op == Bin_op::replace ? Bin_status::key_enoent
                                                               : Bin_status::not_stored);
      return Exec::done;
    case Kv_outcome::exists: mc::encode_bin_error(out, rq, Bin_status::key_eexists); return Exec::done;
    case Kv_outcome::too_large:
      /* memcached 1.6: an append or prepend whose result would be too large is "Not stored." (the
         chunk alone too large was refused as "Too large." before it was read). */
      mc::encode_bin_error(out, rq, concat ? Bin_status::not_stored : Bin_status::e2big);
      return Exec::done;
    default: mc::encode_bin_error(out, rq, Bin_status::key_enoent); return Exec::done;
  }
}

Mc_session::Exec Mc_session::bin_delete(const Bin_request &rq, Byte_buffer &out) {
  std::string_view row_key;
  Exec e = Exec::done;
  Open_container *oc = bin_resolve(rq, out, &row_key, &e);
  if (!oc) return e;
  Kv_request kr;
  kr.op = Kv_op::remove;
  kr.key = Datum{row_key.data(), row_key.size()};
  kr.expect_cas = rq.cas;
  Kv_result res;
  Store_status st = write(*oc, kr, &res);
  if (!st.ok()) return bin_server_error(st, rq, out);
  if (res.outcome == Kv_outcome::deleted) {
    if (!rq.quiet) mc::encode_bin_response(out, rq, Bin_status::ok, 0, {}, {}, {});
  } else {
    mc::encode_bin_error(out, rq, res.outcome == Kv_outcome::exists ? Bin_status::key_eexists : Bin_status::key_enoent);
  }
  return Exec::done;
}

Mc_session::Exec Mc_session::bin_arith(const Bin_request &rq, Byte_buffer &out) {
  std::string_view row_key;
  Exec e = Exec::done;
  Open_container *oc = bin_resolve(rq, out, &row_key, &e);
  if (!oc) return e;
  Kv_request kr;
  kr.op = rq.op == Bin_op::incr ? Kv_op::incr : Kv_op::decr;
  kr.key = Datum{row_key.data(), row_key.size()};
  kr.delta = rq.delta;
  kr.expect_cas = rq.cas;
  Kv_result res;
  /* A counter this request creates counts as a stored item, not as a miss (as in memcached). */
  Store_status st = write(*oc, kr, &res, !rq.creates());
  if (!st.ok()) return bin_server_error(st, rq, out);
  if (rq.creates() && res.outcome != Kv_outcome::not_found) count_outcome(kr.op, res.outcome);
  if (res.outcome == Kv_outcome::not_found && rq.creates()) {
    /* A missing counter is created with the initial value (and the expiration); the delta is not
       applied to it. If another client created it meanwhile, that one is incremented. */
    Kv_result ar;
    st = add_row(*oc, row_key, std::to_string(rq.initial), absolute_expiry_u32(rq.exptime), &ar);
    if (!st.ok()) return bin_server_error(st, rq, out);
    if (ar.outcome == Kv_outcome::stored) {
      res.outcome = Kv_outcome::number;
      res.number = rq.initial;
      res.cas = ar.cas;
    } else {
      st = write(*oc, kr, &res);
      if (!st.ok()) return bin_server_error(st, rq, out);
    }
  }
  switch (res.outcome) {
    case Kv_outcome::number: {
      if (rq.quiet) return Exec::done;
      char v[8];
      mc::put_be64(v, res.number);
      mc::encode_bin_response(out, rq, Bin_status::ok, res.cas, {}, {}, std::string_view(v, 8));
      return Exec::done;
    }
    case Kv_outcome::not_numeric: mc::encode_bin_error(out, rq, Bin_status::delta_badval); return Exec::done;
    case Kv_outcome::exists: mc::encode_bin_error(out, rq, Bin_status::key_eexists); return Exec::done;
    case Kv_outcome::too_large:  // (memcached's binary protocol does not count store_too_large)
      mc::encode_bin_error(out, rq, Bin_status::e2big);
      return Exec::done;
    default: mc::encode_bin_error(out, rq, Bin_status::key_enoent); return Exec::done;
  }
}

Mc_session::Exec Mc_session::bin_flush(const Bin_request &rq, Byte_buffer &out) {
  bool needs_expiry = false;
  Store_status st = flush_container(rq.has_exptime && rq.exptime > 0 ? absolute_expiry_u32(rq.exptime) : 0,
                                    &needs_expiry);
  if (needs_expiry) {
    counters_.add(counters_.errors);
    mc::encode_bin_error(out, rq, Bin_status::not_supported, "flush with a delay needs an expiry column");
    return Exec::done;
  }
  if (!st.ok()) return bin_server_error(st, rq, out);
  if (!rq.quiet) mc::encode_bin_response(out, rq, Bin_status::ok, 0, {}, {}, {});
  return Exec::done;
}

Mc_session::Exec Mc_session::bin_stat(const Bin_request &rq, Byte_buffer &out) {
  /* One response per figure (key = name, value = figure), then one with neither. */
  std::vector<Stat> stats;
  /* memcached's binary stats know neither of the text protocol's "conns" and "cachedump". */
  const bool text_only = rq.key == "conns" || rq.key.substr(0, 9) == "cachedump";
  if (rq.key == "reset" && principal_) {  // as FLUSH STATUS: RELOAD (memcached lets anyone)
    Store_status st = store_.check_reload_privilege(*principal_);
    if (!st.ok()) return bin_server_error(st, rq, out);
  }
  switch (text_only ? Stats_kind::unknown : collect_stats(rq.key, &stats)) {
    case Stats_kind::listed:
      for (const Stat &s : stats) mc::encode_bin_response(out, rq, Bin_status::ok, 0, {}, s.name, s.value);
      /* memcached sends the (here empty) per-prefix dump as one figure holding the text form */
      if (rq.key == "detail dump") mc::encode_bin_response(out, rq, Bin_status::ok, 0, {}, "detailed", "END\r\n");
      break;
    case Stats_kind::reset:
    case Stats_kind::done: break;
    case Stats_kind::unknown:
      counters_.add(counters_.errors);
      mc::encode_bin_error(out, rq, Bin_status::key_enoent);
      return Exec::done;
  }
  mc::encode_bin_response(out, rq, Bin_status::ok, 0, {}, {}, {});
  return Exec::done;
}

Mc_session::Exec Mc_session::bin_sasl_auth(const Bin_request &rq, Byte_buffer &out) {
  /* PLAIN (RFC 4616): [authzid] NUL user NUL password, as the password of a MariaDB account. */
  std::string_view user, password;
  bool well_formed = rq.key == "PLAIN";
  if (well_formed) {
    const size_t a = rq.value.find('\0');
    const size_t b = a == std::string_view::npos ? a : rq.value.find('\0', a + 1);
    well_formed = b != std::string_view::npos && rq.value.find('\0', b + 1) == std::string_view::npos;
    if (well_formed) {
      user = rq.value.substr(a + 1, b - a - 1);
      password = rq.value.substr(b + 1);
    }
  }
  if (!well_formed || user.empty()) {
    counters_.add(counters_.errors);
    mc::encode_bin_error(out, rq, Bin_status::auth_error);
    return Exec::done;
  }
  Store_status st = auth_.login(Login_method::cleartext, user, password);
  if (st.errc == Store_errc::table_busy || st.errc == Store_errc::row_locked) return bin_server_error(st, rq, out);
  if (!st.ok()) {
    counters_.add(counters_.errors);
    mc::encode_bin_error(out, rq, Bin_status::auth_error);
    return Exec::done;
  }
  forget_containers();
  auth_.forget_previous_account();
  mc::encode_bin_response(out, rq, Bin_status::ok, 0, {}, {}, "Authenticated");
  return Exec::done;
}

}  // namespace tablesocket
